"""Smoke probes that judge what the model says, not only that it answers (vfleet/clients/smoke.py
runs them with its other checks).

Why these two: a server can be healthy and still be useless. A wrong or missing chat template
makes a healthy model ramble to max_tokens or repeat itself (the most frequent false alarm after
a model change), so "stops" asks a chat question whose reply must end by itself and not loop.
A client that relies on structured output breaks silently when the server ignores the request
field (vLLM dropped `guided_json` with HTTP 200), so "json_schema" asks through the OpenAI
`response_format` and checks the reply against its schema."""

from __future__ import annotations

import json
from typing import Any, Protocol

import httpx
import jsonschema

from vfleet.clients.bench.client import error_message
from vfleet.config import vllm_facts

STOPS = "stops"
JSON_SCHEMA = "json_schema"
LOOP_REPEATS = 3  # the same phrase this many times in a row is a loop
LOOP_MAX_WORDS = 8  # longest phrase looked for
TEMPLATE_FIX = (
    "check the model's chat_template (tokenizer_config.json), generation_config.json's "
    "eos_token_id, or the served --chat-template (inventory: chat_template)"
)

STOPS_MESSAGES = [{"role": "user", "content": "Say hello."}]
STOPS_MAX_TOKENS = 64
JSON_MESSAGES = [
    {
        "role": "user",
        "content": 'Give the capital of Germany as a JSON object with keys "city" and '
        '"country". Reply with the JSON only.',
    }
]
JSON_MAX_TOKENS = 48
CAPITAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}


class Endpoint(Protocol):
    """What a probe needs of smoke's Target."""

    base_url: str
    model: str
    chat: bool
    vllm_version: str | None

    @property
    def headers(self) -> dict[str, str]: ...


def repeated_phrase(text: str, repeats: int = LOOP_REPEATS, max_words: int = LOOP_MAX_WORDS) -> str | None:
    """The shortest run of words (1 to `max_words`) that `text` says `repeats` or more times in a
    row ("help help help", "I am. I am. I am."), or None. Words are compared case-folded, so a
    loop that changes only capitals is still one."""
    words = text.casefold().split()
    for n in range(1, max_words + 1):
        for start in range(len(words) - n * repeats + 1):
            phrase = words[start : start + n]
            if all(words[start + k * n : start + (k + 1) * n] == phrase for k in range(1, repeats)):
                return " ".join(phrase)
    return None


def _ask(
    client: httpx.Client, t: Endpoint, messages: list[dict[str, str]], max_tokens: int, **extra: Any
) -> tuple[str, str | None]:
    """A greedy chat completion that may stop by itself (no ignore_eos): (reply, finish_reason)."""
    r = client.post(
        f"{t.base_url}/v1/chat/completions",
        headers=t.headers,
        json={"model": t.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0, **extra},
    )
    if r.is_error:  # the server's own words (a bare "500 Internal Server Error" says nothing)
        raise httpx.HTTPStatusError(
            f"HTTP {r.status_code} from {t.base_url}: {error_message(r)[:300]}", request=r.request, response=r
        )
    choice = r.json()["choices"][0]
    return (choice.get("message") or {}).get("content") or "", choice.get("finish_reason")


def _no_chat(t: Endpoint) -> tuple[bool, str, dict[str, Any]] | None:
    if t.chat:
        return None
    return True, "served without a chat template (serve_completions_only): no chat reply to judge", {"skipped": True}


def stops(client: httpx.Client, t: Endpoint) -> tuple[bool, str, dict[str, Any]]:
    """ "Say hello." must end with finish_reason "stop" within STOPS_MAX_TOKENS, without a loop."""
    skipped = _no_chat(t)
    if skipped:
        return skipped
    reply, finish = _ask(client, t, STOPS_MESSAGES, STOPS_MAX_TOKENS)
    seen = {"finish_reason": finish, "reply": reply[:200]}
    loop = repeated_phrase(reply)
    if finish != "stop":
        return (
            False,
            (
                f"reply did not stop by itself (finish_reason {finish}, max_tokens {STOPS_MAX_TOKENS}): "
                f"{reply[:60]!r}; {TEMPLATE_FIX}"
            ),
            seen,
        )
    if loop:
        return False, f"reply loops on {loop!r} ({LOOP_REPEATS}+ times in a row): {reply[:60]!r}; {TEMPLATE_FIX}", seen
    return True, f"stopped by itself: {reply[:40]!r}", seen


def json_schema(client: httpx.Client, t: Endpoint) -> tuple[bool, str, dict[str, Any]]:
    """A reply asked for with response_format json_schema must parse and satisfy the schema."""
    skipped = _no_chat(t)
    if skipped:
        return skipped
    if not vllm_facts.request_feature_available("response_format_json_schema", t.vllm_version):
        return (
            True,
            f"vLLM {t.vllm_version} has no response_format json_schema (vLLM 0.6.0 added it)",
            {"skipped": True},
        )
    reply, finish = _ask(
        client,
        t,
        JSON_MESSAGES,
        JSON_MAX_TOKENS,
        response_format={"type": "json_schema", "json_schema": {"name": "smoke", "schema": CAPITAL_SCHEMA}},
    )
    seen = {"finish_reason": finish, "reply": reply[:200]}
    if finish == "length":  # cut mid-object: not JSON, yet the server did follow the schema
        return (
            False,
            (
                f"reply was truncated at max_tokens {JSON_MAX_TOKENS} (finish_reason length) before its "
                f"JSON closed: {reply[:60]!r}; the model wrote more than the schema asks for"
            ),
            seen,
        )
    try:
        value = json.loads(reply)
    except ValueError as exc:
        return False, f"reply is not JSON ({exc}): {reply[:60]!r}; the server ignored response_format", seen
    try:
        jsonschema.validate(value, CAPITAL_SCHEMA)
    except jsonschema.ValidationError as exc:
        return False, f"reply {reply[:60]!r} fails its schema: {exc.message}", seen
    return True, f"reply satisfies its schema: {reply[:60]!r}", seen
