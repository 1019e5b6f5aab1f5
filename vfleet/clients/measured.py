"""What a bench result or an eval report measured: the server behind the figures.

Two runs are only comparable when the same thing was measured, and when they are not, the
change that explains a difference is usually one of these (a vLLM upgrade, other weights, a
dtype or quantization, another GPU). Bench and eval both store a `measured` record in their
JSON, and `bench.compare` / `eval.compare` name the fields that differ instead of leaving the
reader to diff two reports by hand.

The record is a plain dict (it travels in JSON reports); `FIELDS` is its vocabulary, in the
order a person reads it. A field nobody could read is absent or None, and "unknown" is never
reported as a change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# field -> what it is, for the line that says which changed
FIELDS: dict[str, str] = {
    "vllm_version": "vLLM version",
    "vllm_argv": "vLLM command line",
    "model": "model",
    "weights_version": "weights copy",
    "dtype": "dtype",
    "quantization": "quantization",
    "kv_cache_dtype": "KV cache dtype",
    "gpu_model": "GPU model",
    "gpu_count": "GPU count",
    "gpu_memory_used_mib": "GPU memory used",
    "planned_weights_gib": "planned weights",
}

# Figures that move between two runs of the same setup: shown, never called a change of setup.
VARYING = frozenset({"gpu_memory_used_mib"})


def record(**values: Any) -> dict[str, Any]:
    """A measured record with the known fields, in FIELDS order (unknown names refused, so a
    typo is a bug found in tests rather than a field no comparison ever looks at)."""
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise ValueError(f"not a measured field: {', '.join(sorted(unknown))}")
    return {k: values[k] for k in FIELDS if values.get(k) is not None}


def differences(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[str]:
    """One phrase per setup field known on both sides that differs, e.g.
    "vLLM version 0.19.1 -> 0.20.0"; fields known on one side only are not changes."""
    a, b = a or {}, b or {}
    out: list[str] = []
    for key, label in FIELDS.items():
        if key in VARYING or a.get(key) is None or b.get(key) is None or a[key] == b[key]:
            continue
        if key == "vllm_argv":
            out.append(f"{label} changed")
        else:
            out.append(f"{label} {a[key]} -> {b[key]}")
    return out
