"""Variables made safe to print: secrets become '***' wherever they sit.

A secret is a schema variable marked secret, or any key whose name says it is one
(varschema.looks_secret: HF_TOKEN inside vllm_env, openai_api_key, db_password), at any
depth of mappings and lists. The schema's own non-secret variables stay visible at the top
level even when their name has such a part (weights_peer_ssh_key is a path), and NAME_file
/ NAME_env always do: they say where a secret is, not what it is.
"""
from __future__ import annotations

from typing import Any

from vfleet.engine.inventory.tree import KEEP, copy_tree
from vfleet.engine.varschema import VarSchema, looks_secret

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
    """A copy of a nested value with secret-named keys masked, at any depth."""
    return copy_tree(value, lambda k, v: MASK if looks_secret(str(k)) and v is not None else KEEP)
