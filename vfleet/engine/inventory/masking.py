"""Variables made safe to print: secrets become '***' wherever they sit, by name and by value.

A secret is a schema variable marked secret, or any key whose name says it is one
(varschema.looks_secret: HF_TOKEN inside vllm_env, openai_api_key, db_password), at any
depth of mappings and lists. The schema's own non-secret variables stay visible at the top
level even when their name has such a part (weights_peer_ssh_key is a path), and NAME_file
/ NAME_env always do: they say where a secret is, not what it is.

The same rule tells the run's redactor (vfleet.engine.redact) which values to hide in any
other text (remember_secrets), and what stays visible is passed through the redactor too, so
a password in a URL or a token under an unexpected name is hidden where it sits.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from vfleet.engine.inventory.tree import KEEP, copy_tree
from vfleet.engine.redact import MASK, Redactor, current
from vfleet.engine.varschema import VarSchema, looks_secret

__all__ = ["masked_vars", "remember_secrets", "MASK"]


def masked_vars(vars: dict[str, Any], *, schema: VarSchema) -> dict[str, Any]:
    """A copy of `vars` safe to print (see the module docstring)."""
    out: dict[str, Any] = {}
    for k, v in vars.items():
        out[k] = MASK if _hidden(k, schema) and v is not None else _masked_inside(v)
    return current().tree(out)


def remember_secrets(vars_of: Iterable[dict[str, Any]], *, schema: VarSchema, redactor: Redactor | None = None) -> None:
    """Tell the redactor (the run's by default) every value masked_vars would mask, in each
    of these variable mappings (one per host). Hosts share most value objects (their
    groups'), so each object is looked into once and names are classified once: a
    100,000-host range costs set operations per host, not a walk of its values."""
    redactor = redactor or current()
    names: set[str] = set()  # every name classified so far
    hidden: set[str] = set()  # those that are secret
    # By id, holding the value: an id is only unique while its object lives.
    given: dict[int, Any] = {}  # secret values given to the redactor
    looked: dict[int, Any] = {}  # values already looked into
    previous: dict[str, Any] | None = None
    for vars in vars_of:
        if vars == previous:  # the same values (a range in one group): nothing new
            continue
        previous = vars
        if not names.issuperset(vars):
            for k in vars.keys() - names:
                names.add(k)
                if _hidden(k, schema):
                    hidden.add(k)
        for k in hidden.intersection(vars):
            _once(vars[k], given, redactor.add)
        values = {id(v): v for v in vars.values()}
        for i in values.keys() - looked.keys():
            looked[i] = values[i]
            if isinstance(values[i], (dict, list)):
                for inner in _secrets_inside(values[i]):
                    redactor.add(inner)


def _once(value: Any, done: dict[int, Any], give: Callable[[Any], None]) -> None:
    """give(value) unless this very object was given before."""
    if value is not None and id(value) not in done:
        done[id(value)] = value
        give(value)


def _hidden(name: str, schema: VarSchema) -> bool:
    """Whether a top-level variable is a secret (by the schema, else by its name)."""
    return name in schema.secret_names or (name not in schema.known_names and looks_secret(name))


def _masked_inside(value: Any) -> Any:
    """A copy of a nested value with secret-named keys masked, at any depth."""
    return copy_tree(value, lambda k, v: MASK if looks_secret(str(k)) and v is not None else KEEP)


def _secrets_inside(value: Any) -> Iterator[Any]:
    """The values of secret-named keys inside a nested value, at any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if looks_secret(str(k)) and v is not None:
                    yield v
                else:
                    stack.append(v)
        elif isinstance(item, list):
            stack.extend(item)
