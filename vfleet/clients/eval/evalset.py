"""Eval sets: JSONL, one item a line ({"id", "messages", at most one of "answer" | "regex" |
"schema", optional "reference" and "max_tokens"}).

Why strict: an eval set is the yardstick of a gate that stops upgrades. A typo that silently
drops an expectation (two expectations, a regex that does not compile, a schema that is not a
JSON schema) would make the gate measure less than the operator thinks, so every such line is
refused with FILE:LINE, what is wrong and the fix. The item shape is a JSON schema (jsonschema
checks it); what a schema cannot say (regex compiles, the schema is a schema) is checked below."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from vfleet.engine.errors import VfleetError

BUILTIN = "builtin.jsonl"
EXPECTATIONS = ("answer", "regex", "schema")
MAX_ID = 64
# C0 controls other than tab, newline and carriage return: nothing a prompt needs, and they
# garble the terminal table and the report a person reads.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "messages"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*$", "maxLength": MAX_ID},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["role", "content"],
                "additionalProperties": False,
                "properties": {"role": {"enum": ["system", "user", "assistant"]}, "content": {"type": "string"}},
            },
        },
        "answer": {"type": "string", "minLength": 1},
        "regex": {"type": "string", "minLength": 1},
        "schema": {"type": ["object", "boolean"]},
        "reference": {"type": "string"},
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": 65536},
    },
}
_ITEM_VALIDATOR = jsonschema.Draft202012Validator(ITEM_SCHEMA)

FIX = {
    "id": f"ids are 1-{MAX_ID} characters of letters, digits, '.', '_' or '-', starting with a letter or digit",
    "messages": 'messages is a list of {"role": "system"|"user"|"assistant", "content": "..."}',
    "max_tokens": "max_tokens is a whole number of tokens from 1",
}


@dataclass(frozen=True)
class EvalItem:
    id: str
    messages: tuple[dict[str, str], ...]
    answer: str | None = None  # normalized exact match (case-folded, whitespace and trailing . stripped)
    regex: str | None = None  # re.search on the reply
    schema: dict | None = None  # reply parsed as JSON (a ```json fence allowed) and validated with jsonschema
    reference: str | None = None
    max_tokens: int | None = None  # per item; default EvalSettings.max_tokens

    @property
    def expectation(self) -> str | None:
        """Which expectation the item has ("answer", "regex", "schema"), or None."""
        return next((k for k in EXPECTATIONS if getattr(self, k) is not None), None)

    @property
    def digest(self) -> str:
        """A short hash of what decides the item's reply and verdict (messages, expectation,
        max_tokens): a saved baseline is comparable only over items with the same digests, an
        id alone says nothing when the item was edited."""
        what = {
            "messages": list(self.messages),
            "max_tokens": self.max_tokens,
            **{k: getattr(self, k) for k in EXPECTATIONS},
        }
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def _schema_error(err: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in err.absolute_path) or "the item"
    key = str(err.absolute_path[0]) if err.absolute_path else ""
    fix = FIX.get(key) or (
        'each line is {"id": ..., "messages": [...], and at most one of answer, regex, schema}'
        if err.validator in ("required", "additionalProperties", "type")
        else ""
    )
    return f"{where}: {err.message[:160]}" + (f" ({fix})" if fix else "")


def parse_item(raw: str) -> EvalItem:
    """One JSONL line as an item; ValueError with the reason (load_evalset adds FILE:LINE)."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno}); one JSON object a line") from None
    if not isinstance(data, dict):
        raise ValueError('not a JSON object; each line is {"id": ..., "messages": [...]}')
    err = jsonschema.exceptions.best_match(_ITEM_VALIDATOR.iter_errors(data))
    if err is not None:
        raise ValueError(_schema_error(err))
    given = [k for k in EXPECTATIONS if k in data]
    if len(given) > 1:
        raise ValueError(
            f"{' and '.join(given)} both given; an item has at most one expectation (split it in two items)"
        )
    texts = [
        data["id"],
        *(m["content"] for m in data["messages"]),
        *(str(data.get(k, "")) for k in ("answer", "reference")),
    ]
    if any(_CONTROL.search(t) for t in texts):
        raise ValueError("control characters in the text; only tab and newline are allowed (remove them)")
    if "regex" in data:
        try:
            re.compile(data["regex"])
        except re.error as exc:
            raise ValueError(f"regex {data['regex']!r} does not compile ({exc}); write a Python `re` pattern") from None
    if "schema" in data:
        try:
            jsonschema.validators.validator_for(data["schema"]).check_schema(data["schema"])
        except jsonschema.SchemaError as exc:
            raise ValueError(f"schema is not a valid JSON schema ({exc.message[:160]})") from None
    return EvalItem(
        id=data["id"],
        messages=tuple(dict(m) for m in data["messages"]),
        answer=data.get("answer"),
        regex=data.get("regex"),
        schema=data.get("schema"),
        reference=data.get("reference"),
        max_tokens=data.get("max_tokens"),
    )


def _read(path: str | None) -> tuple[str, str]:
    if path is None:
        return "builtin eval set", resources.files(__package__).joinpath("data", BUILTIN).read_text(encoding="utf-8")
    try:
        return path, Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise VfleetError(f"{path}: no such eval set file") from None
    except (UnicodeDecodeError, IsADirectoryError, PermissionError) as exc:
        raise VfleetError(f"{path}: cannot read the eval set ({type(exc).__name__}); give a UTF-8 JSONL file") from None


def load_evalset(path: str | None) -> list[EvalItem]:
    """The items of a JSONL eval set, in file order (None: the built-in set). A bad file is one
    VfleetError line "FILE:LINE: what is wrong (the fix)"; nothing runs on half a set."""
    name, text = _read(path)
    items: list[EvalItem] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            item = parse_item(raw)
        except ValueError as exc:
            raise VfleetError(f"{name}:{lineno}: {exc}") from None
        if item.id in seen:
            raise VfleetError(f"{name}:{lineno}: id {item.id!r} already used on line {seen[item.id]}; ids are unique")
        seen[item.id] = lineno
        items.append(item)
    if not items:
        raise VfleetError(
            f"{name}: no items; one JSON object a line, e.g. "
            '{"id": "q1", "messages": [{"role": "user", "content": "..."}], "answer": "..."}'
        )
    return items
