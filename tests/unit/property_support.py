"""Strategies of the property-based suite (tests/unit/test_property_*.py): inventory values
derived from the variable table itself, and the base inventory they are dropped into.

Why from the table: vfleet.config.variables.VARIABLES is the one list of what an inventory may
set, each row with its JSON schema, so a variable added there is generated here (valid values
from its schema, hostile ones around them) without a line of its own.

What "hostile" means here: the characters each target treats specially (newline, CR, NUL, ESC,
`$`, `%`, `;`, braces, quotes, backslash, spaces, a leading `-`, `..`, `/`), text the schema's
regular expressions accept by accident (a trailing newline before `$`, non-ASCII digits for
`\\d`), lone surrogates, very long strings, numbers at and past the schema's bounds, huge ints,
negatives, NaN and infinities, wrong types, and containers where scalars belong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from vfleet.config.variables import VARIABLES, Variable

__all__ = [
    "SECRET_MARK",
    "SECRET_NUMBER",
    "LEVELS",
    "Setting",
    "Example",
    "BASE_VARS",
    "HOST_ADDRESSES",
    "valid_values",
    "hostile_values",
    "values_for",
    "settings_of",
    "examples",
    "inventory_text",
    "secret_tokens",
]

# Every generated secret carries one of these, so a leak is found by a plain substring search
# (a secret of "a" would "leak" into every file). Not a word any renderer writes.
SECRET_MARK = "Zq7PROPSECRET"
SECRET_NUMBER = 73577357735773577357

# Where a generated value is set: all.vars or one host of each kind (a lone vLLM host, a replica
# member, the gateway, the monitoring host). Host vars beat all.vars (Ansible's precedence).
LEVELS = ("all", "gpu01", "gpu02", "gw01", "mon01")
HOST_ADDRESSES = {
    "gpu01": "10.0.0.1",
    "gpu02": "10.0.0.2",
    "gpu03": "10.0.0.3",
    "gw01": "10.0.0.9",
    "mon01": "10.0.0.10",
}
# A fleet that renders every kind of file: one lone vLLM host, a two-member Ray replica, a
# gateway, a monitoring host; secrets set (api_key, hf_token, a secret-named vllm_env entry).
BASE_VARS: dict[str, Any] = {
    "ansible_user": "root",
    "vllm_version": "0.32.0",
    "model_name": "tiny",
    "model_source": "/srv/weights/tiny",
    "api_key": f"sk-{SECRET_MARK}-api",
    "hf_token": f"hf_{SECRET_MARK}_token",
    "vllm_env": {"OMP_NUM_THREADS": "4", "PROPERTY_API_TOKEN": f"tok-{SECRET_MARK}-env"},
}

# Characters and words each target reads specially; joined into strings below.
ATOMS = [
    "\n",
    "\r",
    "\x00",
    "\t",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\x9b",
    "\u2028",
    "\ufeff",
    "\u202e",
    "\ud800",
    "\udfff",
    "$",
    "${HOME}",
    "$(id)",
    "`id`",
    "$$",
    "%",
    "%n",
    "%%",
    "%i",
    ";",
    "{",
    "}",
    "{}",
    "'",
    '"',
    "\\",
    "\\n",
    " ",
    "  ",
    "-",
    "--",
    "-h",
    "..",
    "/",
    "../",
    "#",
    "&",
    "|",
    "<",
    ">",
    "*",
    "?",
    "[",
    "]",
    "=",
    ",",
    ":",
    "@",
    "~",
    "!",
    "^",
    "\u0663",
    "\uff11",
    "\u00b2",
    "é",
    "✓",
    "\u00a0",
    "a",
    "Z",
    "0",
    "9",
    "x.y",
    "/x",
    "--port",
    "rm -rf /",
    "\\\n",
    "' ; id ; '",
    '"; }',
    "include /etc/passwd;",
]
LONG = ["x" * 300, "9" * 400, "/" + "a/" * 2100, "é" * 5000]
NUMBERS = [
    0,
    -1,
    1,
    2,
    7,
    2**31,
    2**63,
    2**64,
    10**30,
    -(10**30),
    10**400,
    65535,
    65536,
    0.5,
    -0.0,
    1.5,
    1e308,
    math.nan,
    math.inf,
    -math.inf,
]
WRONG_TYPES = [None, True, False, [], {}, "", [None], {"a": None}, [[1]], {"": ""}]


def _hostile_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(st.sampled_from(ATOMS), min_size=1, max_size=5).map("".join),
        st.text(st.characters(codec=None, exclude_categories=()), max_size=12),
        st.sampled_from(LONG),
    )


def _schema_types(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type")
    if t is None:
        return []
    return [t] if isinstance(t, str) else list(t)


def valid_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values the schema accepts (what JSON Schema would pass; the renderers may still refuse)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    options = []
    for t in _schema_types(schema):
        if t == "null":
            options.append(st.none())
        elif t == "boolean":
            options.append(st.booleans())
        elif t == "integer":
            lo, hi = schema.get("minimum"), schema.get("maximum")
            options.append(st.integers(lo, hi if hi is not None else (lo or 0) + 10**6))
            options.append(st.sampled_from([v for v in (lo, hi) if v is not None] or [0]))
        elif t == "number":
            lo = schema.get("minimum", schema.get("exclusiveMinimum"))
            options.append(
                st.floats(
                    lo,
                    schema.get("maximum"),
                    allow_nan=False,
                    allow_infinity=False,
                    exclude_min="exclusiveMinimum" in schema,
                )
            )
        elif t == "string":
            options.append(_valid_string(schema))
        elif t == "array":
            options.append(
                st.lists(
                    valid_values(schema.get("items", {"type": "string"})),
                    max_size=3,
                    unique_by=str if schema.get("uniqueItems") else None,
                )
            )
        elif t == "object" and "properties" in schema:  # named keys: the required ones, some others
            props, required = schema["properties"], set(schema.get("required", []))
            options.append(
                st.fixed_dictionaries(
                    {k: valid_values(v) for k, v in props.items() if k in required},
                    optional={k: valid_values(v) for k, v in props.items() if k not in required},
                )
            )
        elif t == "object":
            keys = _valid_string(schema.get("propertyNames", {"type": "string", "minLength": 1}))
            options.append(
                st.dictionaries(keys, valid_values(schema.get("additionalProperties", {"type": "string"})), max_size=3)
            )
    return st.one_of(options) if options else st.nothing()


def _valid_string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    examples = [e for e in schema.get("examples", []) if isinstance(e, str)]
    if "pattern" in schema:
        # from_regex also finds what the pattern accepts by accident (a newline before `$`,
        # Unicode digits for \d): JSON Schema's `pattern` is an unanchored re.search
        generated = st.from_regex(schema["pattern"])
        return st.one_of(st.sampled_from(examples), generated) if examples else generated
    return st.text(min_size=schema.get("minLength", 0), max_size=30)


def _mutated(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    """A valid string with hostile text glued on before, after or both."""
    base = _valid_string(schema) if "string" in _schema_types(schema) else st.just("a")
    return st.builds(
        lambda pre, v, post: pre + v + post, st.sampled_from(["", *ATOMS]), base, st.sampled_from(["", *ATOMS])
    )


def hostile_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values around the schema: hostile strings, bounds +-1, wrong types, hostile containers."""
    bounds = [
        b + d
        for key in ("minimum", "maximum", "exclusiveMinimum")
        if isinstance(schema.get(key), (int, float))
        for b in [schema[key]]
        for d in (-1, 0, 1)
    ]
    text = _hostile_text()
    return st.one_of(
        text,
        _mutated(schema),
        st.sampled_from(NUMBERS + bounds),
        st.sampled_from(WRONG_TYPES),
        st.lists(st.one_of(text, _mutated(schema.get("items", {}))), min_size=1, max_size=3),
        st.dictionaries(st.one_of(text, st.from_regex(r"[A-Z_]{1,8}", fullmatch=True)), text, min_size=1, max_size=2),
        st.builds(str, st.sampled_from(NUMBERS + bounds)),
    )


def _secret_values() -> st.SearchStrategy[Any]:
    """A secret: hostile, yet always carrying SECRET_MARK (or SECRET_NUMBER) so a leak is seen."""
    marked = st.builds(
        lambda pre, post: pre + SECRET_MARK + post, _hostile_text() | st.just(""), _hostile_text() | st.just("")
    )
    return st.one_of(
        marked,
        marked.map(lambda s: [s]),
        marked.map(lambda s: {s: s}),
        marked.map(lambda s: {"a": [s]}),
        st.just(SECRET_NUMBER),
    )


def values_for(var: Variable, valid_weight: int = 1) -> st.SearchStrategy[Any]:
    """Valid and hostile values of one variable; valid_weight > 1 favours valid ones (several
    variables together rarely all pass the schema, and then no renderer runs)."""
    if var.secret:
        return _secret_values()
    return st.one_of(*[valid_values(var.json_schema)] * valid_weight, hostile_values(var.json_schema))


@dataclass(frozen=True)
class Setting:
    name: str
    value: Any
    level: str  # "all" or a host name


@dataclass(frozen=True)
class Example:
    settings: tuple[Setting, ...]
    vars_at: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: list[Setting]) -> "Example":
        at: dict[str, dict[str, Any]] = {}
        for s in settings:
            at.setdefault(s.level, {})[s.name] = s.value
        return cls(tuple(settings), at)


def settings_of(var: Variable, valid_weight: int = 1) -> st.SearchStrategy[Setting]:
    return st.builds(Setting, st.just(var.name), values_for(var, valid_weight), st.sampled_from(LEVELS))


def examples(
    variables: list[Variable] | None = None, max_vars: int = 3, valid_weight: int = 1
) -> st.SearchStrategy[Example]:
    """1..max_vars distinct variables of `variables` (default: every row) set to generated values."""
    pool = variables or VARIABLES
    chosen = st.lists(st.sampled_from(pool), min_size=1, max_size=min(max_vars, len(pool)), unique_by=lambda v: v.name)
    return chosen.flatmap(lambda vs: st.tuples(*[settings_of(v, valid_weight) for v in vs])).map(
        lambda t: Example.of(list(t))
    )


def inventory_text(example: Example, vllm_root: Path) -> str:
    """The base fleet with the example's values laid over it, as YAML (every string escaped:
    NUL, lone surrogates and the rest survive the file as the exact value)."""
    at = example.vars_at

    def host(name: str) -> dict[str, Any]:
        return {"ansible_host": HOST_ADDRESSES[name], **at.get(name, {})}

    data = {
        "all": {
            "vars": {**BASE_VARS, "vllm_root": str(vllm_root), **at.get("all", {})},
            "children": {
                "vllm": {
                    "children": {
                        "single": {"hosts": {"gpu01": host("gpu01")}},
                        "r1": {
                            "vars": {"replica": "r1", "pipeline_parallel_size": 2},
                            "hosts": {"gpu02": host("gpu02"), "gpu03": host("gpu03")},
                        },
                    }
                },
                "gateways": {"hosts": {"gw01": host("gw01")}},
                "monitoring": {"hosts": {"mon01": host("mon01")}},
            },
        }
    }
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=False, width=1 << 20)


def secret_tokens() -> tuple[str, ...]:
    """What must never appear in a masked output, whatever the example set."""
    return (SECRET_MARK, str(SECRET_NUMBER))
