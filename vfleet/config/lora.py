"""LoRA adapters served beside a host's base model: their schema, their typed value and the
rules across hosts.

    lora_adapters:                          # on the hosts of one model (its group_vars)
      - {name: support-bot, source: /data/adapters/support-bot}
      - {name: sql, source: "hf://acme/tiny-sql-lora", revision: v2}

Each adapter is synced like the weights (vfleet/roles/model_source/_payload.py), rendered into the
unit as `--lora-modules NAME=PATH` with --max-lora-rank and --max-loras read from the adapters'
own adapter_config.json (vfleet/roles/service/_lora_flags.py), and routed by the gateway to
the hosts of its base model under its own name.

Why a narrower name than a served model name: the name is a folder on the host
(<model_dir>/lora/NAME), a word before '=' on vLLM's command line and a "model" clients
send, so it carries no '/', '=', ':' or '@'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from vfleet.engine.pathrules import HUB_SCHEME, REVISION, is_host_source
from vfleet.engine.varschema import MAX_TEXT

__all__ = ["LoraAdapter", "LORA_NAME_PATTERN", "LORA_ADAPTER_SCHEMA", "adapters_from_vars", "lora_problems"]

LORA_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MAX_ADAPTERS = 64

# One row of lora_adapters (variables.py holds the list; tests/unit/test_schema_rules.py
# holds this row to the schema's rules like every other).
LORA_ADAPTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "maxProperties": 3,
    "additionalProperties": False,
    "required": ["name", "source"],
    "properties": {
        "name": {"type": "string", "pattern": LORA_NAME_PATTERN, "maxLength": 64, "examples": ["support-bot"]},
        "source": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_TEXT,
            "path": "source",
            "examples": ["/data/adapters/support-bot", "hf://acme/sql-lora@v2"],
        },
        "revision": {"type": "string", "maxLength": 255, "pattern": REVISION.pattern, "examples": ["main", "v2"]},
    },
}


@dataclass(frozen=True)
class LoraAdapter:
    """One adapter: the name clients send as "model", and where its files come from (a
    folder on the controller or hf://ORG/NAME[@REVISION], with `revision` for the latter)."""

    name: str
    source: str
    revision: str | None = None

    @property
    def is_hub(self) -> bool:
        return self.source.startswith(HUB_SCHEME)


def adapters_from_vars(rows: Iterable[Mapping[str, Any]] | None) -> tuple[LoraAdapter, ...]:
    """The schema-checked rows as typed values, in inventory order."""
    return tuple(LoraAdapter(str(r["name"]), str(r["source"]), r.get("revision")) for r in rows or ())


def lora_problems(configs: Iterable[Any]) -> list[str]:
    """Rules across hosts, one line each: an adapter named like a served model or twice, a
    HOST:/path source, and hosts of one model that disagree on its adapters (the gateway
    sends an adapter's requests to any host of its base model)."""
    configs = [c for c in configs if c.serves]
    served = {c.served_model_name for c in configs}
    out: list[str] = []
    by_model: dict[str, tuple[str, tuple[LoraAdapter, ...]]] = {}
    for c in configs:
        seen: set[str] = set()
        for i, a in enumerate(c.lora_adapters):
            where = f"host '{c.name}': vars.lora_adapters[{i}]"
            if a.name in served:
                out.append(f"{where}: name {a.name!r} is a served model's name; give the adapter its own name")
            if a.name in seen:
                out.append(f"{where}: name {a.name!r} is listed twice; give each adapter its own name")
            seen.add(a.name)
            # HOST:/path: the rank is read from adapter_config.json on the controller
            if is_host_source(a.source):
                out.append(
                    f"{where}.source: {a.source!r} names a host; adapters come from a controller "
                    f"folder or hf://ORG/NAME@REVISION"
                )
        first = by_model.setdefault(str(c.served_model_name), (c.name, c.lora_adapters))
        if first[1] != c.lora_adapters:
            out.append(
                f"host '{c.name}': lora_adapters differ from host '{first[0]}', which serves the same "
                f"model {c.served_model_name!r}; set them once in the model group's group_vars"
            )
    owner: dict[str, str] = {}
    for model, (_, adapters) in by_model.items():
        for a in adapters:
            other = owner.setdefault(a.name, model)
            if other != model:
                out.append(
                    f"lora adapter {a.name!r} is declared for models {other!r} and {model!r}; "
                    f"the gateway routes a name to one model: rename one"
                )
    return out
