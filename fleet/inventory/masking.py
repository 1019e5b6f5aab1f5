"""Variables made safe to print: secrets become '***' wherever they sit.

A secret is a schema variable marked secret, or any key whose name says it is one
(varschema.looks_secret: HF_TOKEN inside vllm_env, openai_api_key, db_password), at any
depth of mappings and lists. The schema's own non-secret variables stay visible at the top
level even when their name has such a part (weights_peer_ssh_key is a path), and NAME_file
/ NAME_env always do: they say where a secret is, not what it is.
"""
from __future__ import annotations

from typing import Any

from fleet.varschema import VarSchema, looks_secret

__all__ = ["masked_vars", "MASK"]

MASK = "***"


def masked_vars(vars: dict[str, Any], *, schema: VarSchema) -> dict[str, Any]:
    """A copy of `vars` safe to print (see the module docstring)."""
    secret = set(schema.secret_names)
    out: dict[str, Any] = {}
    for k, v in vars.items():
        hide = k in secret or (k not in schema.known_names and looks_secret(k))
        out[k] = MASK if hide and v is not None else _masked_inside(v)
    return out


def _masked_inside(value: Any) -> Any:
    """A copy of a nested value with secret-named keys masked (explicit stack, no
    recursion: a value's depth is the inventory's to choose)."""
    root: list[Any] = [None]
    todo: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while todo:
        parent, key, item = todo.pop()
        if isinstance(item, dict):
            copy: Any = dict.fromkeys(item)
            for k, v in item.items():
                if looks_secret(str(k)) and v is not None:
                    copy[k] = MASK
                else:
                    todo.append((copy, k, v))
        elif isinstance(item, list):
            copy = [None] * len(item)
            todo.extend((copy, i, v) for i, v in enumerate(item))
        else:
            copy = item
        parent[key] = copy
    return root[0]
