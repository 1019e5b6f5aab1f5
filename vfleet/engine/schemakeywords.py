"""The validator behind every variable check: jsonschema, with vfleet's own keywords.

Why its own module: these are the rules every value passes before anything else runs, and
they hold for every schema a caller passes in (vfleet/engine/varschema.py builds one
validator per variable from it):

- `pattern` is a FULL, ASCII match: jsonschema's re.search lets '$' match before a trailing
  newline ("20r/s\\n" passed "^...$"), and \\d, \\w match Arabic-Indic digits and non-Latin
  letters, values that then break nginx or Prometheus;
- `type` "string" also refuses control, format and surrogate characters (no variable needs
  one, and each is a way to add a line to a unit, an env file or a config);
- `integer` is never a float (4.0) or a bool, `number` never NaN or infinity;
- `path`: the named rules of vfleet/engine/pathrules.py;
- `reserved`: names that would take over something that is not ours.

Errors of the last three keywords carry their own operator wording (ValidationError's
`validator` is "text", "path" or "reserved"), which varschema puts after "got VALUE, which".
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from typing import Any, Iterator

from jsonschema import Draft202012Validator, ValidationError, validators

from vfleet.engine.pathrules import path_problem

__all__ = ["Validator", "text_problem", "MAX_TEXT", "MAX_NAME", "OWN_WORDS"]

MAX_TEXT = 4096  # longest string value of any variable (a path: PATH_MAX is 4096 on Linux)
MAX_NAME = 255  # longest name (of a variable, a unit, an account, a file name part)
# Characters no value may hold: control (Cc: newline, tab, NUL, ESC), format (Cf: bidi
# overrides, zero-width), lone surrogates (Cs: not text, they fail to encode later) and the
# Unicode line/paragraph separators (str.splitlines splits on them, so one-line messages and
# one-line config directives would break).
_BAD_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def _is_integer(_checker: Any, instance: Any) -> bool:
    # jsonschema counts 4.0 as an integer; a variable typed integer must not render "4.0".
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_number(_checker: Any, instance: Any) -> bool:
    # NaN and infinity compare false with every bound, so ranges alone would let them in.
    # An int is always finite (and math.isfinite would overflow on one over ~308 digits).
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (isinstance(instance, float) and math.isfinite(instance))


_draft_type = Draft202012Validator.VALIDATORS["type"]


def text_problem(text: str) -> str | None:
    """Why a string cannot be a value (a control, format or surrogate character), or None."""
    if text.isascii() and text.isprintable():
        return None
    for i, ch in enumerate(text):
        if unicodedata.category(ch) in _BAD_CATEGORIES:
            return f"the control character U+{ord(ch):04X} at position {i + 1}"
    return None


@functools.lru_cache(maxsize=None)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.ASCII)


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    """`pattern` as a FULL, ASCII match: jsonschema's re.search lets '$' match before a
    trailing newline ("20r/s\\n" passed ^...$) and lets \\d match Arabic-Indic digits, values
    that then break nginx or Prometheus. A string over maxLength is left to maxLength."""
    if not isinstance(instance, str) or len(instance) > schema.get("maxLength", MAX_TEXT):
        return
    if not _compiled(pattern).fullmatch(instance):
        yield ValidationError(f"does not match {pattern!r}")


def _type_and_text(validator: Any, types: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    """jsonschema's `type`, and for every string (values, list items, mapping keys checked by
    propertyNames) no control characters: no variable needs one, and each one is a way to
    add a line to a unit, an env file, an nginx or Prometheus config."""
    yield from _draft_type(validator, types, instance, schema)
    if isinstance(instance, str) and "string" in ([types] if isinstance(types, str) else types):
        why = text_problem(instance)
        if why:
            yield ValidationError(why, validator="text")


def _path(validator: Any, kind: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    """`path`: the named path rules of vfleet/engine/pathrules.py."""
    if (
        isinstance(instance, str)
        and len(instance) <= schema.get("maxLength", MAX_TEXT)
        and text_problem(instance) is None
    ):
        why = path_problem(instance, kind)
        if why:
            yield ValidationError(why, validator="path")


def _reserved(validator: Any, rule: dict[str, Any], instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    """`reserved`: {"names": [...], "prefixes": [...], "why": ..., "fix": ...}: names that
    would take over something that is not ours (a distribution's unit)."""
    if isinstance(instance, str) and (
        instance in rule.get("names", ()) or instance.startswith(tuple(rule.get("prefixes", ())))
    ):
        yield ValidationError(f"{rule['why']}; {rule['fix']}", validator="reserved")


Validator = validators.extend(
    Draft202012Validator,
    validators={"pattern": _pattern, "type": _type_and_text, "path": _path, "reserved": _reserved},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number}),
)

# Keywords whose errors are worded for an operator here, not by jsonschema.
OWN_WORDS = ("text", "path", "reserved")
