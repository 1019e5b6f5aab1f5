"""Speculative decoding of a host's model: its schema, its typed value and the rules of each
method, for vLLM's --speculative-config.

    speculative_decoding: {method: draft_model, source: /data/models/qwen2.5-0.5b, num_speculative_tokens: 4}
    speculative_decoding: {method: ngram, num_speculative_tokens: 3, prompt_lookup_max: 4}

The methods vfleet renders (vLLM 0.32.0 vllm/config/speculative.py SpeculativeMethod):
- draft_model, eagle, eagle3: a second model proposes the tokens; `source` (a controller folder
  or hf://ORG/NAME@REVISION) is synced like the weights to <model_dir>/draft/<service_name>
  and passed as "model";
- ngram: proposals looked up in the prompt (prompt_lookup_max/min), no model;
- mtp: the target's own multi-token-prediction layers, no model.
vLLM takes no key it does not know (its configs forbid extra fields: the server exits), so
only these keys are rendered (vfleet/roles/service/_speculative_flags.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from vfleet.engine.pathrules import REVISION, is_host_source
from vfleet.engine.varschema import MAX_TEXT

__all__ = ["Speculative", "SPECULATIVE_SCHEMA", "MODEL_METHODS", "speculative_from_vars", "speculative_problems"]

MODEL_METHODS = ("draft_model", "eagle", "eagle3")  # a second model: `source` required
OWN_METHODS = ("ngram", "mtp")  # no model of their own
_LOOKUP = {"type": "integer", "minimum": 1, "maximum": 64}

SPECULATIVE_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "maxProperties": 6,
    "additionalProperties": False,
    "required": ["method", "num_speculative_tokens"],
    "properties": {
        "method": {"enum": [*MODEL_METHODS, *OWN_METHODS]},
        "num_speculative_tokens": {"type": "integer", "minimum": 1, "maximum": 32},
        "source": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_TEXT,
            "path": "source",
            "examples": ["/data/models/qwen2.5-0.5b", "hf://Qwen/Qwen2.5-0.5B-Instruct@main"],
        },
        "revision": {"type": "string", "maxLength": 255, "pattern": REVISION.pattern, "examples": ["main"]},
        "prompt_lookup_max": _LOOKUP,
        "prompt_lookup_min": _LOOKUP,
    },
}


@dataclass(frozen=True)
class Speculative:
    """One host's speculative decoding, as the inventory set it (schema-checked)."""

    method: str
    num_speculative_tokens: int
    source: str | None = None
    revision: str | None = None
    prompt_lookup_max: int | None = None
    prompt_lookup_min: int | None = None

    @property
    def has_model(self) -> bool:
        return self.method in MODEL_METHODS


def speculative_from_vars(row: Mapping[str, Any] | None) -> Speculative | None:
    if not row:
        return None
    return Speculative(
        str(row["method"]),
        int(row["num_speculative_tokens"]),
        row.get("source"),
        row.get("revision"),
        row.get("prompt_lookup_max"),
        row.get("prompt_lookup_min"),
    )


def _problems(s: Speculative) -> list[str]:
    out = []
    if s.has_model and not s.source:
        out.append(
            f"method {s.method} proposes with a model of its own: set source (a controller folder "
            f"or hf://ORG/NAME@REVISION)"
        )
    if not s.has_model and (s.source or s.revision):
        out.append(f"method {s.method} uses no model of its own: remove source and revision")
    if is_host_source(s.source):
        out.append(
            f"source {s.source!r} names a host; the draft comes from a controller folder or "
            f"hf://ORG/NAME@REVISION (its config is read on the controller)"
        )
    if s.method != "ngram" and (s.prompt_lookup_max or s.prompt_lookup_min):
        out.append(f"prompt_lookup_max/min belong to method ngram, not {s.method}: remove them")
    if s.prompt_lookup_max and s.prompt_lookup_min and s.prompt_lookup_min > s.prompt_lookup_max:
        out.append(f"prompt_lookup_min {s.prompt_lookup_min} is above prompt_lookup_max {s.prompt_lookup_max}")
    return out


def speculative_problems(configs: Iterable[Any]) -> list[str]:
    """One line per rule a host's speculative_decoding breaks (vLLM would exit at start)."""
    return [
        f"host '{c.name}': vars.speculative_decoding: {p}"
        for c in configs
        if c.serves and c.speculative
        for p in _problems(c.speculative)
    ]
