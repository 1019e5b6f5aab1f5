"""What eval sends to vLLM's /v1/chat/completions and how it reads the answers (parsers tested on
replies captured from a real vLLM 0.32.0: tests/unit/data/eval/).

Two requests: the item itself (greedy, seeded, with logprobs of each generated token as token
ids: `return_tokens_as_token_ids` makes vLLM name a token "token_id:530" instead of text whose
bytes may not round-trip), and the scoring of an earlier run's reply under this server: the reply
is sent as the assistant's own message and continued (`continue_final_message`), so the server
computes the logprob of each of its tokens as part of the prompt (`prompt_logprobs`) and generates
one token we ignore."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TOKEN_PREFIX = "token_id:"


@dataclass
class ChatReply:
    """One generated reply as eval records it."""

    reply: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[dict[str, float]] = field(default_factory=list)  # per token: {"<token id>": logprob}
    finish_reason: str | None = None


@dataclass
class PromptScores:
    """The prompt as the server tokenized it, and each token's logprob (None for the first,
    which nothing precedes)."""

    token_ids: list[int]
    logprobs: list[float | None]


def chat_body(
    model: str, messages: list[dict[str, str]], *, seed: int, max_tokens: int, top_logprobs: int
) -> dict[str, Any]:
    return {
        "model": model,
        "messages": messages,
        "temperature": 0,
        "seed": seed,
        "max_tokens": max_tokens,
        "logprobs": True,
        "top_logprobs": top_logprobs,
        "return_tokens_as_token_ids": True,
    }


def continuation_body(model: str, messages: list[dict[str, str]], reply: str) -> dict[str, Any]:
    """Score `reply` as the assistant's answer to `messages`. return_token_ids asks for the
    prompt's token ids (vLLM >= 0.10.2); without them they are read from prompt_logprobs."""
    return {
        "model": model,
        "messages": [*messages, {"role": "assistant", "content": reply}],
        "continue_final_message": True,
        "add_generation_prompt": False,
        "prompt_logprobs": 1,
        "max_tokens": 1,
        "temperature": 0,
        "return_tokens_as_token_ids": True,
        "return_token_ids": True,
    }


def token_id(token: str) -> int:
    """ "token_id:530" -> 530; ValueError for text (a server that ignored return_tokens_as_token_ids)."""
    if not token.startswith(TOKEN_PREFIX):
        raise ValueError(f"token {token[:20]!r} is not a token id: the server ignored return_tokens_as_token_ids")
    return int(token[len(TOKEN_PREFIX) :])


def parse_chat(data: dict[str, Any]) -> ChatReply:
    """The first choice of a chat completion. The stop token (EOS) may or may not be among
    logprobs.content, depending on the version and how the reply ended: it is kept as it came."""
    choice = data["choices"][0]
    out = ChatReply(reply=(choice.get("message") or {}).get("content") or "", finish_reason=choice.get("finish_reason"))
    for entry in (choice.get("logprobs") or {}).get("content") or []:
        out.token_ids.append(token_id(entry["token"]))
        out.logprobs.append(float(entry["logprob"]))
        out.top_logprobs.append(
            {str(token_id(t["token"])): float(t["logprob"]) for t in entry.get("top_logprobs") or []}
        )
    return out


def parse_prompt_scores(data: dict[str, Any]) -> PromptScores:
    """prompt_logprobs is a list with one entry a prompt token (the first None), each a dict
    {"<token id>": {"logprob", "rank", "decoded_token"}} holding the prompt's own token first and
    then the top-1. The token ids come from prompt_token_ids when the server sent them, else from
    the first key of each entry (vLLM builds the dict with the prompt token first)."""
    entries = data.get("prompt_logprobs")
    if not isinstance(entries, list):
        raise ValueError("no prompt_logprobs in the reply: the server ignored prompt_logprobs")
    ids = data.get("prompt_token_ids")
    if not isinstance(ids, list) or len(ids) != len(entries):
        ids = [int(next(iter(e))) if e else -1 for e in entries]
    logprobs: list[float | None] = []
    for tid, entry in zip(ids, entries):
        own = (entry or {}).get(str(tid))
        logprobs.append(None if own is None else float(own["logprob"]))
    return PromptScores(token_ids=[int(t) for t in ids], logprobs=logprobs)
