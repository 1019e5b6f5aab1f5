"""Where a sweep's requests come from: synthetic prompts, a JSONL file of chat messages, or a
ShareGPT-style file. Every synthetic prompt is DISTINCT from its first words on: vLLM's prefix
caching is on by default, and one repeated prompt measures cache hits, not prefill (on a real
H200 that overstated throughput 1.6x at concurrency 128).

A synthetic prompt's length is given in tokens. Words of a fixed vocabulary are drawn from a
seeded generator per request; how many words make N tokens is calibrated once against the
server's own tokenizer (vLLM's POST /tokenize) when it answers, else taken as one word a token.
What a request really sent is read back from the server's `usage.prompt_tokens`."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from vfleet.engine.errors import VfleetError

# Plain, short English words: most BPE tokenizers give one token for " word".
WORDS = tuple(
    """
time year people way day man thing woman life child world school state family student group
country problem hand part place case week company system program question work government number
night point home water room mother area money story fact month lot right study book eye job word
business issue side kind head house service friend father power hour game line end member law car
city community name president team minute idea kid body information back parent face others level
office door health person art war history party result change morning reason research girl guy
moment air teacher force education foot boy age policy process music market sense nation plan
college interest death experience effect use class control care field development role effort
rate heart drug show leader light voice wife police mind price report decision son view
relationship town road arm difference value building action model season society tax director
position player record paper space ground form event official matter center couple site project
activity star table need court oil situation cost industry figure street image phone data picture
practice piece land product doctor wall patient worker news test movie north love support
technology step baby computer type attention film tree source organization hair window evidence
population site river stone garden bridge letter summer winter autumn spring ocean island forest
""".split()
)


@dataclass
class Prompt:
    messages: list[dict[str, str]]
    max_tokens: int | None = None  # None: the sweep's --output-len
    source: str = "synthetic"


def _words(index: int, seed: int, n: int) -> str:
    rng = random.Random(f"{seed}:{index}")
    # A unique head (the request's number spelt into words) and a random body: no two
    # prompts share a first block of tokens, so no prefix-cache hit between requests.
    head = f"Request {index}:"
    return head + " " + " ".join(rng.choice(WORDS) for _ in range(max(n, 1)))


@dataclass
class SyntheticPrompts:
    """Distinct prompts of about `input_len` tokens each."""

    input_len: int
    seed: int = 0
    words_per_token: float = 1.0  # calibrated by `calibrate`
    calibrated: bool = False

    def words_for(self) -> int:
        return max(1, round(self.input_len * self.words_per_token))

    def text(self, index: int) -> str:
        return _words(index, self.seed, self.words_for())

    def get(self, index: int) -> Prompt:
        return Prompt([{"role": "user", "content": self.text(index)}])

    def calibrate(self, count_tokens: Callable[[str], int | None], samples: int = 3) -> bool:
        """Fit words per token from the server's tokenizer (two rounds); False if it won't say."""
        for _ in range(2):
            ratios = []
            for i in range(samples):
                text = _words(10_000_000 + i, self.seed, self.words_for())
                n = count_tokens(text)
                if not n:
                    return False
                ratios.append(self.words_for() / n)
            self.words_per_token = sum(ratios) / len(ratios)
        self.calibrated = True
        return True

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "synthetic",
            "input_len": self.input_len,
            "seed": self.seed,
            "words_per_prompt": self.words_for(),
            "calibrated": self.calibrated,
        }


@dataclass
class FilePrompts:
    """Prompts read from a file: JSONL (one {"messages": [...]} or [...] per line, optional
    "max_tokens") or ShareGPT-style JSON (a list of {"conversations": [{"from": "human",
    "value": ...}, {"from": "gpt", ...}]}). Used round-robin when a sweep needs more."""

    path: str
    prompts: list[Prompt] = field(default_factory=list)
    fmt: str = ""

    def get(self, index: int) -> Prompt:
        return self.prompts[index % len(self.prompts)]

    def describe(self) -> dict[str, Any]:
        return {"kind": self.fmt, "path": self.path, "prompts": len(self.prompts)}


_SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "system": "system",
}


def _sharegpt(items: Any, path: str) -> list[Prompt]:
    if not isinstance(items, list):
        raise VfleetError(f"{path}: a ShareGPT file is a JSON list of conversations")
    out = []
    for item in items:
        conv = item.get("conversations") or item.get("conversation") or [] if isinstance(item, dict) else []
        msgs = []
        for turn in conv:
            role = _SHAREGPT_ROLES.get(str(turn.get("from", turn.get("role", ""))).lower())
            text = turn.get("value", turn.get("content"))
            if role and isinstance(text, str) and text:
                msgs.append({"role": role, "content": text})
        # the prompt is the conversation up to its first answer; an answer's length is not used
        # (the sweep fixes the output length, or lets the model end naturally)
        first_answer = next((i for i, m in enumerate(msgs) if m["role"] == "assistant"), len(msgs))
        msgs = msgs[:first_answer]
        if msgs and msgs[-1]["role"] == "user":
            out.append(Prompt(msgs, source="sharegpt"))
    return out


def _jsonl(text: str, path: str) -> list[Prompt]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise VfleetError(f"{path}:{n}: not JSON ({exc.msg})") from None
        msgs = obj.get("messages") if isinstance(obj, dict) else obj
        if isinstance(obj, dict) and "conversations" in obj:
            out.extend(_sharegpt([obj], f"{path}:{n}"))
            continue
        if isinstance(obj, dict) and isinstance(obj.get("prompt"), str):
            msgs = [{"role": "user", "content": obj["prompt"]}]
        if not (
            isinstance(msgs, list)
            and msgs
            and all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs)
        ):
            raise VfleetError(f'{path}:{n}: expected {{"messages": [{{"role": ..., "content": ...}}]}}')
        mt = obj.get("max_tokens") if isinstance(obj, dict) else None
        out.append(Prompt(msgs, int(mt) if mt else None, source="jsonl"))
    return out


def load_file(path: str, fmt: str = "auto") -> FilePrompts:
    p = Path(path)
    if not p.is_file():
        raise VfleetError(f"--dataset {path}: no such file")
    text = p.read_text(encoding="utf-8")
    if fmt == "auto":
        fmt = "sharegpt" if text.lstrip().startswith("[") else "jsonl"
    if fmt == "sharegpt":
        try:
            prompts = _sharegpt(json.loads(text), path)
        except json.JSONDecodeError as exc:
            raise VfleetError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    elif fmt == "jsonl":
        prompts = _jsonl(text, path)
    else:
        raise VfleetError(f"--dataset-format {fmt}: expected auto, jsonl or sharegpt")
    if not prompts:
        raise VfleetError(f"{path}: no usable prompt (a user turn) in the file")
    return FilePrompts(path, prompts, fmt)


def iter_prompts(source: SyntheticPrompts | FilePrompts, start: int = 0) -> Iterator[tuple[int, Prompt]]:
    i = start
    while True:
        yield i, source.get(i)
        i += 1
