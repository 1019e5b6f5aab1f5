"""What the target serves, checked before a sweep sends anything, and what the server said when
requests failed anyway.

Why: on the demo (max_model_len 512) `vfleet bench --input-len 512 --output-len 128` sent every
request into vLLM's HTTP 400 ("This model's maximum context length is 512 tokens...") and printed
only that a level completed nothing. So a sweep first asks the target's GET /v1/models for the
model's `max_model_len` (vLLM returns it per model; the gateway answers the same shape from the
inventory), else takes the inventory's; a synthetic prompt that does not fit with the output is
shortened to fit, with one line that says so and how to ask for what fits; an output that cannot
fit at all is refused before the first request. Prompts are counted through vLLM's /tokenize,
and the gateway does not pass /tokenize on (vfleet/roles/gateway/_endpoints.py): the sweep then
counts through one of the vLLM hosts behind it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

import httpx

from vfleet.clients.bench.client import Endpoint, RequestRecord
from vfleet.clients.bench.prompts import SyntheticPrompts
from vfleet.engine.errors import VfleetError

__all__ = [
    "TEMPLATE_TOKENS",
    "Served",
    "served_max_model_len",
    "fit_prompts",
    "tokenizer_counter",
    "first_counter",
    "ServerErrors",
]

# Tokens kept for the chat template around a synthetic prompt (role markers, BOS, the generation
# prompt): Llama 3's template adds about 30 with its default system header, Qwen2.5's about 20.
TEMPLATE_TOKENS = 32


@dataclass(frozen=True)
class Served:
    """The longest sequence the target takes for the model, and who said so."""

    max_model_len: int | None
    source: str


def served_max_model_len(ep: Endpoint, inventory_max: int | None, timeout: float = 10.0) -> Served:
    """max_model_len from the target's GET /v1/models entry for ep.model, else the inventory's."""
    try:
        r = httpx.get(ep.base_url + "/v1/models", headers=ep.headers(), timeout=timeout, verify=ep.verify)
        entries = r.json().get("data") if r.status_code == 200 else None
        for entry in entries if isinstance(entries, list) else []:
            value = entry.get("max_model_len") if isinstance(entry, dict) and entry.get("id") == ep.model else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return Served(value, f"{ep.base_url}/v1/models")
    except (httpx.HTTPError, ValueError, AttributeError):
        pass
    return Served(inventory_max, "the inventory's max_model_len") if inventory_max else Served(None, "")


def fit_prompts(prompts: Any, output_len: int, served: Served, say: Callable[[str], None]) -> dict[str, Any]:
    """Make a sweep fit `served`: refuse an output that cannot fit, shorten synthetic prompts
    that do not fit beside it. Returns what was done, for the result file."""
    limit = served.max_model_len
    if not limit:
        return {}
    room = limit - output_len - TEMPLATE_TOKENS
    if room < 1:
        raise VfleetError(
            f"--output-len {output_len} does not fit max_model_len {limit} ({served.source}) with "
            f"a prompt and its chat template ({TEMPLATE_TOKENS} tokens): give --output-len "
            f"{max(1, limit - TEMPLATE_TOKENS - 16)} or less, or raise max_model_len"
        )
    if isinstance(prompts, SyntheticPrompts) and prompts.input_len > room:
        asked = prompts.input_len
        prompts.input_len = room
        say(
            f"--input-len {asked} + --output-len {output_len} + {TEMPLATE_TOKENS} for the chat template exceed "
            f"max_model_len {limit} ({served.source}): prompts shortened to {room} tokens; give --input-len "
            f"{room} or less to measure exactly what you ask, or raise max_model_len"
        )
        return {"max_model_len": limit, "max_model_len_source": served.source, "input_len_asked": asked}
    return {"max_model_len": limit, "max_model_len_source": served.source}


def tokenizer_counter(ep: Endpoint, timeout: float = 30.0) -> Callable[[str], int | None]:
    """count(text) through vLLM's POST /tokenize (None when the server or gateway won't)."""

    def count(text: str) -> int | None:
        try:
            r = httpx.post(
                ep.base_url + "/tokenize",
                headers=ep.headers(),
                timeout=timeout,
                verify=ep.verify,
                json={"model": ep.model, "prompt": text, "add_special_tokens": False},
            )
            if r.status_code != 200:
                return None
            return int(r.json().get("count") or len(r.json().get("tokens") or [])) or None
        except (httpx.HTTPError, ValueError, TypeError, AttributeError):
            return None

    return count


def first_counter(ep: Endpoint, host_urls: Iterable[str]) -> tuple[Callable[[str], int | None] | None, str]:
    """The first of the target and the vLLM hosts behind it whose /tokenize answers, and its URL."""
    for url in [ep.base_url, *[u for u in host_urls if u != ep.base_url]]:
        count = tokenizer_counter(replace(ep, base_url=url))
        if count("probe"):
            return count, url
    return None, ""


class ServerErrors:
    """Prints the server's own message once per kind of failure over a whole sweep."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.seen: set[str] = set()

    def report(self, label: str, records: list[RequestRecord]) -> None:
        for rec in records:
            if rec.error and rec.error not in self.seen:
                self.seen.add(rec.error)
                n = sum(1 for r in records if r.error == rec.error)
                self.say(
                    f"{label}: {rec.error} ({n} of {len(records)} requests); the server said: "
                    f"{rec.detail or '(nothing)'}"
                )
