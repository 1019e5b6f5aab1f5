"""Generic variable schema: a table of variable specs, checked with jsonschema.

The engine must not know what vLLM needs, so it only knows *how* to check variables; the
table of *which* variables exist lives with the roles (vfleet/config/variables.py). Each variable has
its own small JSON schema so an error points at one variable (and inside it, at the list
item or mapping key) and can be worded for an operator: "expected an integer >= 1, got
'two'", never a jsonschema dump. Types, ranges and enums are jsonschema's job; nothing here
re-implements them by hand. The validator, with vfleet's stricter `pattern` and `type` and its
`path` and `reserved` keywords, is vfleet/engine/schemakeywords.py.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from jsonschema import Draft202012Validator

from vfleet.engine.schema_words import describe, short_value, value_kind
from vfleet.engine.schemakeywords import MAX_NAME, MAX_TEXT, OWN_WORDS, Validator, text_problem

__all__ = ["VariableSpec", "VarSchema", "looks_secret", "ENV_NAME_PATTERN", "text_problem", "MAX_TEXT", "MAX_NAME"]

# The pattern of a POSIX environment variable name, for `propertyNames` of env mappings.
ENV_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*$"
# Ansible's boolean() (module_utils/parsing/convert_bool.py): the strings it accepts.
_TRUE = frozenset(("y", "yes", "on", "1", "true", "t"))
_FALSE = frozenset(("n", "no", "off", "0", "false", "f"))
_DIGITS = re.compile(r"[0-9]{1,30}")  # a digit string coerce() may turn into an int
# Name parts that mark a value as secret wherever it sits (HF_TOKEN, openai_api_key,
# db_password, ansible_become_pass); whole parts only, so 'max_num_batched_tokens' is shown.
_SECRET_PARTS = frozenset(
    ("key", "token", "secret", "password", "passwd", "pass", "credential", "credentials", "apikey")
)
_COMPANION_PARTS = frozenset(("file", "env"))
WARN_CUTOFF = 0.6  # difflib ratio for a "did you mean" warning (errors need 0.8)


def looks_secret(name: str) -> bool:
    """True when a variable or mapping key's name says it holds a secret.

    The name is split on '_', '-', '.' and camelCase humps; a part that is key/token/secret/password/...
    marks it, unless the last part is 'file' or 'env': NAME_file and NAME_env say where a
    secret is, not what it is, and an operator needs to see them.
    """
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)  # apiToken -> api_Token
    parts = [p for p in re.split(r"[_\-.]+", words.lower()) if p]
    if not parts or parts[-1] in _COMPANION_PARTS:
        return False
    return any(p in _SECRET_PARTS for p in parts)


@dataclass(frozen=True)
class VariableSpec:
    """One variable an operator may set: its JSON schema, default, meaning for the docs.

    `secret` variables may also be given as NAME_file (path read at load time) or NAME_env
    (environment variable name), so that no secret has to sit in an inventory, and their
    values are masked whenever vars are printed.
    """

    name: str
    json_schema: dict[str, Any]
    default: Any = None
    meaning: str = ""
    secret: bool = False


def _types(schema: dict[str, Any]) -> set[str]:
    """Every JSON type a schema names, at the top or in its anyOf/oneOf branches."""
    t = schema.get("type")
    out = {t} if isinstance(t, str) else set(t or [])
    for branch in schema.get("anyOf", []) + schema.get("oneOf", []):
        if isinstance(branch, dict):
            out |= _types(branch)
    return out


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)


def _path_text(path: Iterable[Any]) -> str:
    """'.key[3]' for a place in a value; an odd key is quoted (and cut) so a newline in it
    cannot break the message's one line."""
    out = []
    for p in path:
        if isinstance(p, int):
            out.append(f"[{p}]")
        else:
            out.append(f".{p}" if _PLAIN_KEY.fullmatch(str(p)) else f"[{short_value(p, 40)}]")
    return "".join(out)


class VarSchema:
    """A table of VariableSpec, able to check values and name what was expected."""

    def __init__(self, specs: Iterable[VariableSpec], aliases: Mapping[str, str] | None = None):
        """`aliases` maps names operators write by mistake (a vLLM flag with underscores,
        another tool's name: "tp_size") to the variable meant; they only drive warnings."""
        self.specs: dict[str, VariableSpec] = {}
        for spec in specs:
            if spec.name in self.specs:
                raise ValueError(f"variable {spec.name!r} defined twice")
            self.specs[spec.name] = spec
        self._types = {n: _types(s.json_schema) for n, s in self.specs.items()}
        self.secret_names: list[str] = [n for n, s in self.specs.items() if s.secret]
        # NAME_file / NAME_env of a secret: a path or a variable name, never the secret itself.
        self._companions = {c for n in self.secret_names for c in self.secret_sources(n)}
        # Each variable's validator is built (and its schema checked) when a value of it is first
        # checked: checking all ~110 schemas up front cost 18 ms of every command's start, and an
        # inventory sets a handful. tests/unit/test_startup.py checks every row's schema.
        self._validators: dict[str, Any] = {}
        self.aliases: dict[str, str] = dict(aliases or {})
        unknown = sorted(set(self.aliases.values()) - self.known_names)
        if unknown:
            raise ValueError(f"aliases point at unknown variables: {', '.join(unknown)}")

    # Companion keys of a secret: where to read it from instead of writing it inline.
    @staticmethod
    def secret_sources(name: str) -> tuple[str, str]:
        return f"{name}_file", f"{name}_env"

    @property
    def known_names(self) -> set[str]:
        """Every key the schema accepts, including NAME_file / NAME_env of secrets."""
        names = set(self.specs)
        for n in self.secret_names:
            names.update(self.secret_sources(n))
        return names

    def defaults(self) -> dict[str, Any]:
        """Default of every variable (None where a variable has no default)."""
        return {n: s.default for n, s in self.specs.items()}

    def is_string_typed(self, name: str) -> bool:
        """True when the variable accepts strings but not numbers (for --set coercion)."""
        spec = self.specs.get(name)
        if spec is None:
            return False
        t = spec.json_schema.get("type")
        types = {t} if isinstance(t, str) else set(t or [])
        return "string" in types and not types & {"integer", "number"}

    def suggest(self, key: str) -> str | None:
        """Closest known name for a key that looks like a typo of one (difflib, cutoff 0.8)."""
        if key in self.known_names:
            return None
        close = difflib.get_close_matches(key, sorted(self.known_names), n=1, cutoff=0.8)
        return close[0] if close else None

    def hint(self, key: str) -> str | None:
        """The variable an unknown key probably meant, for a warning: the alias map first,
        then a looser difflib match than suggest() (cutoff WARN_CUTOFF)."""
        if key in self.known_names:
            return None
        if key in self.aliases:
            return self.aliases[key]
        close = difflib.get_close_matches(key, sorted(self.known_names), n=1, cutoff=WARN_CUTOFF)
        return close[0] if close else None

    def coerce(self, name: str, value: Any) -> Any:
        """The value as Ansible would take it, by the variable's JSON type: a string of
        digits for a variable that takes integers but not strings (ansible_port: "2222"),
        and boolean-ish strings or 0/1 for one that takes booleans (Ansible's boolean():
        yes/no/true/false/on/off/y/n/t/f/1/0, any case). Anything else is returned as is,
        for check() to accept or refuse."""
        types = self._types.get(name)
        if not types or isinstance(value, bool):
            return value
        if isinstance(value, str) and "string" not in types:
            text = value.strip()
            if "integer" in types and _DIGITS.fullmatch(text):
                return int(text)
            if "boolean" in types and text.lower() in _TRUE | _FALSE:
                return text.lower() in _TRUE
        if (
            isinstance(value, (int, float))
            and value in (0, 1)
            and "boolean" in types
            and not types & {"integer", "number"}
        ):
            return value == 1
        return value

    def _validator(self, name: str) -> Any:
        """The validator of a known name (None for an unknown one), built on first use; a
        schema that is not valid JSON Schema raises jsonschema's SchemaError here."""
        if name not in self._validators:
            if name.endswith("_env") and name in self._companions:
                schema: dict[str, Any] = {
                    "type": "string",
                    "pattern": ENV_NAME_PATTERN,
                    "maxLength": MAX_NAME,
                    "examples": ["VFLEET_API_KEY"],
                }
            elif name in self._companions:
                schema = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT, "path": "controller"}
            elif name in self.specs:
                schema = self.specs[name].json_schema
            else:
                return None
            Draft202012Validator.check_schema(schema)
            self._validators[name] = Validator(schema)
        return self._validators[name]

    def check(self, name: str, value: Any) -> list[str]:
        """Problems with one value, each 'vars.NAME[.path]: expected X, got Y'; [] if fine.

        Secret values are never shown, only their type: an error message ends up in terminals,
        CI logs and reports.
        """
        validator = self._validator(name)
        if validator is None:
            return []
        out: list[str] = []
        seen: set[str] = set()
        # By place; at one place the character and path rules first: they say what to fix.
        errors = sorted(
            validator.iter_errors(value),
            key=lambda e: ([str(p) for p in e.absolute_path], e.validator not in OWN_WORDS),
        )
        for err in errors:
            where = f"vars.{name}{_path_text(err.absolute_path)}"
            if "propertyNames" in err.relative_schema_path:
                key = f"{where} key {short_value(err.instance)}"
                if key not in seen:
                    seen.add(key)
                    out.append(
                        f"{where}: key {short_value(err.instance)} is not a valid "
                        f"{_name_words(err.schema)}{_key_why(err)}"
                    )
                continue
            if where in seen:
                continue
            seen.add(where)
            spec = self.specs.get(name)
            secret = (spec.secret if spec else looks_secret(name)) or any(
                looks_secret(str(p)) for p in err.absolute_path
            )
            out.append(f"{where}: {_message(err, secret)}")
        return out


_DESCRIBED = (
    "type",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "pattern",
    "minLength",
    "anyOf",
    "oneOf",
    "minItems",
    "uniqueItems",
)


def _message(err: Any, secret: bool) -> str:
    """'expected X, got Y[, which Z; fix]' for one jsonschema error."""
    schema = err.schema if isinstance(err.schema, dict) else {}
    inst = err.instance
    if secret:
        got = f"{value_kind(inst)} (value hidden)"
    elif err.validator == "text":
        # A value with a control character is most often a pasted blob (a token copied with
        # its '\r'), and a free-form value (a vllm_env setting, an extra argument) cannot be
        # told from a credential by its name: the character and its position are the fix.
        got = f"{value_kind(inst)} (value not shown)"
    elif err.validator == "type" and isinstance(inst, (list, dict)):
        got = f"{value_kind(inst)} {short_value(inst, 40)}"
    else:
        got = short_value(inst)
    if err.validator in ("maxLength", "maxItems", "maxProperties"):
        size, unit = len(inst), {"maxLength": "characters", "maxItems": "items", "maxProperties": "keys"}[err.validator]
        return (
            f"expected {describe(schema)} of at most {err.validator_value} {unit}, "
            f"got {value_kind(inst)} of {size} {unit}"
        )
    if err.validator == "text":
        why = "a control character" if secret else err.message
        return f"expected {describe(schema)}, got {got}, which has {why}; remove it"
    if err.validator in ("path", "reserved"):
        return f"expected {describe(schema)}, got {got}, which {err.message}"
    if err.validator in ("required", "additionalProperties"):
        # Worded without the mapping's values: one of them may be a key written inline.
        return _key_problem(err, schema)
    expected = describe(schema) if err.validator in _DESCRIBED else err.message
    return f"expected {expected}, got {got}" + ("" if secret else _why(inst, expected))


def _key_problem(err: Any, schema: dict[str, Any]) -> str:
    """A missing or unknown key of a mapping with named keys, and the keys it takes."""
    keys = " ".join(schema.get("properties", {}))
    if err.validator == "required":
        missing = next((k for k in err.validator_value if k not in err.instance), "?")
        return f"the key '{missing}' is missing; add it (keys: {keys})"
    unknown = sorted(str(k) for k in err.instance if k not in schema.get("properties", {}))
    return f"unknown key {short_value(unknown[0], 40)}; the keys are: {keys}"


def _key_why(err: Any) -> str:
    """Why a mapping key was refused, when the reason is one of ours."""
    return f" (it has {err.message})" if err.validator == "text" else ""


def _why(instance: Any, expected: str) -> str:
    """A hint for the near misses operators make most."""
    if isinstance(instance, bool) or not isinstance(instance, (int, float)):
        return ""
    if expected.startswith("a string"):
        return " (a number: put it in quotes)"
    if isinstance(instance, float) and not math.isfinite(instance):
        return " (not a finite number)"
    if isinstance(instance, float) and expected.startswith("an integer") and instance.is_integer():
        return f" (write {int(instance)}, without the decimal point)"
    return ""


def _name_words(schema: Any) -> str:
    """What a `propertyNames` schema wants, in words."""
    schema = schema if isinstance(schema, dict) else {}
    if schema.get("title"):
        return str(schema["title"])
    if schema.get("pattern") == ENV_NAME_PATTERN:
        return "environment variable name (letters, digits and '_', not starting with a digit)"
    return f"name (expected {describe(schema)})" if describe(schema) != "any value" else "name"
