"""How a schema and a value are put in words for an operator: 'an integer >= 1 or null',
'a list of non-empty strings', a value cut to one line, a secret's kind instead of its value.

Why apart from the checking (vfleet/engine/varschema.py): docs/variables.md's table, the
inventory parser's messages and the redactor's tests use the same words without a validator,
so the words for a type live once, here.
"""

from __future__ import annotations

from typing import Any

from vfleet.engine.pathrules import kind_words

__all__ = ["describe", "short_value", "value_kind"]


def _type_words(t: str, schema: dict[str, Any]) -> str:
    if t == "integer":
        return "an integer"
    if t == "number":
        return "a number"
    if t == "boolean":
        return "true or false"
    if t == "null":
        return "null"
    if t == "string":
        return "a string"
    if t == "array":
        items = schema.get("items")
        return f"a list of {_plural(describe(items))}" if isinstance(items, dict) else "a list"
    if t == "object":
        vals = schema.get("additionalProperties")
        if isinstance(vals, dict):
            inner = describe(vals)
            inner = _plural(inner) if " or " not in inner else f"({inner})"
            return f"a mapping of names to {inner}"
        if isinstance(schema.get("properties"), dict):
            return f"a mapping (keys: {' '.join(schema['properties'])})"
        return "a mapping"
    return t


def _plural(text: str) -> str:
    """'a non-empty string' -> 'non-empty strings', so list/mapping descriptions read well."""
    head = text.split(" (")[0]  # a path kind's words in parentheses do not count
    if " or " in head or "," in head:
        return text
    words = text.split(" ")
    if words[0] in ("a", "an"):
        words = words[1:]
    for i, w in enumerate(words):
        if w in ("string", "integer", "number", "list", "mapping"):
            words[i] = w + "s"
            break
    return " ".join(words)


def _bounds(schema: dict[str, Any]) -> str:
    parts = []
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if lo is not None and hi is not None:
        return f"from {lo} to {hi}"
    if lo is not None:
        parts.append(f">= {lo}")
    if xlo is not None:
        parts.append(f"> {xlo}")
    if hi is not None:
        parts.append(f"<= {hi}")
    if xhi is not None:
        parts.append(f"< {xhi}")
    return " and ".join(parts)


def describe(schema: dict[str, Any]) -> str:
    """Plain words for what a schema accepts: 'an integer >= 1 or null', 'one of: a, b'.

    Used both for error messages and for the variable table of docs/variables.md, so the two never drift.
    """
    if "enum" in schema:
        return "one of: " + ", ".join(str(v) for v in schema["enum"])
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(describe(s) for s in schema.get("anyOf") or schema["oneOf"])
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    words = []
    for t in types:
        w = _type_words(t, schema)
        if t in ("integer", "number") and _bounds(schema):
            w += " " + _bounds(schema)
        if t == "string":
            if "examples" in schema:
                w += " like " + " or ".join(f"'{e}'" for e in schema["examples"][:2])
            elif schema.get("minLength") == 1:
                w = "a non-empty string"
            if "path" in schema:
                w += f" ({kind_words(schema['path'])})"
        words.append(w)
    if not words:
        return "any value"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def short_value(value: Any, limit: int = 60) -> str:
    """The offending value for a message: repr-like (so a newline shows as \\n), one line,
    cut if long; an integer too long to print in decimal is described, not shown."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    try:
        text = repr(value)
    except ValueError:  # int's 4300-digit str() limit, inside a list too
        return f"{value_kind(value)} too large to show"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def value_kind(value: Any, none: str = "null") -> str:
    """A value's kind in words ('a list', 'a string'...): for 'expected X, got Y' messages,
    and for secrets, whose value must never be shown."""
    if value is None:
        return none
    if isinstance(value, bool):
        return "true/false"
    for t, words in ((dict, "a mapping"), (list, "a list"), (str, "a string"), (int, "a number"), (float, "a number")):
        if isinstance(value, t):
            return words
    return f"a {type(value).__name__}"
