"""Whether a reply meets its item's expectation, with the reason in one phrase when it does not.

answer: normalized exact match (case-folded, runs of whitespace as one space, trailing '.'
stripped): "Paris." and "paris" are the same answer, "Paris, France" is not. regex: re.search.
schema: the reply parsed as JSON (the whole reply, or the first ```json fenced block, since
chat models like to fence) and validated with jsonschema."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

from vfleet.clients.eval.evalset import EvalItem

_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
QUOTE = 60  # characters of a reply quoted in a reason


def normalize(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".").strip()


def quoted(text: str, limit: int = QUOTE) -> str:
    """A reply as a reason quotes it: repr-quoted, cut at `limit` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def json_of(reply: str) -> Any:
    """The JSON a reply holds: the first fenced block if there is one, else the whole reply.
    Raises ValueError (json.JSONDecodeError) when it is not JSON."""
    m = _FENCE.search(reply)
    return json.loads(m.group(1) if m else reply)


def score(item: EvalItem, reply: str) -> tuple[bool | None, str]:
    """(passed, why): passed is None for an item without an expectation; why is "" when it passed."""
    if item.answer is not None:
        if normalize(reply) == normalize(item.answer):
            return True, ""
        return False, f"reply {quoted(reply)} is not {item.answer!r}"
    if item.regex is not None:
        if re.search(item.regex, reply):
            return True, ""
        return False, f"reply {quoted(reply)} does not match {item.regex}"
    if item.schema is not None:
        try:
            value = json_of(reply)
        except ValueError as exc:
            return False, f"reply {quoted(reply)} is not JSON ({getattr(exc, 'msg', exc)})"
        err = jsonschema.exceptions.best_match(
            jsonschema.validators.validator_for(item.schema)(item.schema).iter_errors(value)
        )
        if err is None:
            return True, ""
        where = "/".join(str(p) for p in err.absolute_path)
        return False, f"reply JSON fails the schema{' at ' + where if where else ''}: {err.message[:QUOTE]}"
    return None, ""
