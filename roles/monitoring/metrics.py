"""vLLM's Prometheus metric names per release, as the alert rules and the dashboard need them.

TEMPORARY: a small local table until `roles.vllm_facts.metric_names(version)` is the
authoritative one; the lead switches `metric_names_for` over. Keep it small.

Verified in vllm-project/vllm: V0 `vllm/engine/metrics.py` exports vllm:gpu_cache_usage_perc,
vllm:num_preemptions_total, vllm:generation_tokens_total; V1 `vllm/v1/metrics/loggers.py`
renamed the gauge to vllm:kv_cache_usage_perc ("Deprecated in 0.9 - Renamed as
vllm:kv_cache_usage_perc"), and 0.32.0 (the lab's wheel) exports only the new name. Counters
are declared without `_total` in V1 (vllm:num_preemptions) and exported with it by
prometheus_client, so the exported names of the counters did not change."""
from __future__ import annotations

from typing import Iterable, Mapping

__all__ = ["LOGICAL", "metric_names_for", "fleet_metric_names"]

# logical name -> exported name, for every release
_COMMON = {
    "requests_running": "vllm:num_requests_running",
    "requests_waiting": "vllm:num_requests_waiting",
    "preemptions": "vllm:num_preemptions_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "ttft": "vllm:time_to_first_token_seconds",
    "e2e_latency": "vllm:e2e_request_latency_seconds",
}
KV_RENAMED_IN = (0, 9)
LOGICAL = tuple(sorted([*_COMMON, "kv_cache_usage"]))


def _release(version: str | None) -> tuple[int, int] | None:
    try:
        major, minor = str(version).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, AttributeError):
        return None


def metric_names_for(version: str | None) -> dict[str, str]:
    """Exported name of each logical metric for a vLLM release (unknown: the newest names)."""
    rel = _release(version)
    kv = "vllm:gpu_cache_usage_perc" if rel is not None and rel < KV_RENAMED_IN else "vllm:kv_cache_usage_perc"
    return {**_COMMON, "kv_cache_usage": kv}


def fleet_metric_names(versions: Iterable[str | None]) -> Mapping[str, tuple[str, ...]]:
    """Logical name -> every exported name the fleet's releases use (newest first), so a
    fleet in the middle of an upgrade is watched under both names."""
    per = [metric_names_for(v) for v in sorted(set(versions), key=lambda v: _release(v) or (999, 0), reverse=True)]
    per = per or [metric_names_for(None)]
    return {k: tuple(dict.fromkeys(m[k] for m in per)) for k in LOGICAL}
