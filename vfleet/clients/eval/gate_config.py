"""The gate's settings file (`upgrade --gate eval.yaml`): which eval set, the thresholds, the
decoding settings and, optionally, a saved baseline report to compare against instead of
recording one. Validated with a JSON schema so a typo ("max_score_dorp") is refused with the file
and key instead of silently leaving a default in place."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from vfleet.clients.eval.compare import Thresholds
from vfleet.clients.eval.runner import EvalSettings
from vfleet.engine.errors import VfleetError

GATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "evalset": {"type": ["string", "null"], "minLength": 1},
        "baseline": {"type": ["string", "null"], "minLength": 1},
        "max_score_drop": {"type": "number", "minimum": 0, "maximum": 1},
        "max_divergence": {"type": "number", "minimum": 0},
        "seed": {"type": "integer", "minimum": 0},
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": 65536},
        "concurrency": {"type": "integer", "minimum": 1, "maximum": 256},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(GATE_SCHEMA)
KEYS = ", ".join(GATE_SCHEMA["properties"])


@dataclass(frozen=True)
class GateConfig:
    evalset: str | None  # path to the user's JSONL, None = built-in
    thresholds: Thresholds
    settings: EvalSettings
    baseline: str | None  # a saved EvalReport to reuse instead of recording one


def _beside(base: Path, value: str | None) -> str | None:
    """A relative path in the file means beside the file, wherever the command runs."""
    return None if value is None else str(base.parent / value) if not Path(value).is_absolute() else value


def load_gate(path: str) -> GateConfig:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise VfleetError(f"{path}: no such gate file") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise VfleetError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise VfleetError(f"{path}: a gate file is a mapping of {KEYS}")
    infinite = next(
        (
            k
            for k in ("max_score_drop", "max_divergence")
            if isinstance(data.get(k), float) and not math.isfinite(data[k])
        ),
        None,
    )
    if infinite:  # YAML's .nan/.inf: NaN compares false with everything, so the gate would never fail
        raise VfleetError(f"{path}: key '{infinite}': {data[infinite]} is not a finite number; give one like 0.10")
    err = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if err is not None:
        if err.validator == "additionalProperties":
            unknown = sorted(set(data) - set(GATE_SCHEMA["properties"]))
            raise VfleetError(f"{path}: unknown key {', '.join(map(repr, unknown))}; the keys are {KEYS}")
        key = str(err.absolute_path[0]) if err.absolute_path else "(top)"
        raise VfleetError(f"{path}: key '{key}': {err.message[:160]}")
    d = EvalSettings()
    return GateConfig(
        evalset=_beside(p, data.get("evalset")),
        baseline=_beside(p, data.get("baseline")),
        thresholds=Thresholds(**{k: float(data[k]) for k in ("max_score_drop", "max_divergence") if k in data}),
        settings=EvalSettings(
            seed=data.get("seed", d.seed),
            max_tokens=data.get("max_tokens", d.max_tokens),
            concurrency=data.get("concurrency", d.concurrency),
        ),
    )
