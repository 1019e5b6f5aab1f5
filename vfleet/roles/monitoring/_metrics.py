"""vLLM's Prometheus metric names per release, as the alert rules and the dashboard need them:
the names of vfleet.config.vllm_facts.metric_names (the version table, each row with its source) under
the logical names the rules use."""

from __future__ import annotations

from typing import Iterable, Mapping

from vfleet.config import vllm_facts

__all__ = ["LOGICAL", "metric_names_for", "fleet_metric_names"]

# the rules' logical name -> vllm_facts.metric_names' key
_KEYS = {
    "requests_running": "running",
    "requests_waiting": "waiting",
    "preemptions": "preemptions",
    "generation_tokens": "generation_tokens",
    "prompt_tokens": "prompt_tokens",
    "ttft": "ttft",
    "e2e_latency": "e2e_latency",
    "kv_cache_usage": "kv_cache_usage",
}
LOGICAL = tuple(sorted(_KEYS))
NEWEST = "999.0.0"  # an unknown version is watched under the newest names


def _release(version: str | None) -> tuple[int, int] | None:
    try:
        major, minor = str(version).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, AttributeError):
        return None


def metric_names_for(version: str | None) -> dict[str, str]:
    """Exported name of each logical metric for a vLLM release (unknown: the newest names)."""
    names = vllm_facts.metric_names(version if _release(version) else NEWEST)
    return {logical: names[key] for logical, key in _KEYS.items()}


def fleet_metric_names(versions: Iterable[str | None]) -> Mapping[str, tuple[str, ...]]:
    """Logical name -> every exported name the fleet's releases use (newest first), so a
    fleet in the middle of an upgrade is watched under both names."""
    per = [metric_names_for(v) for v in sorted(set(versions), key=lambda v: _release(v) or (999, 0), reverse=True)]
    per = per or [metric_names_for(None)]
    return {k: tuple(dict.fromkeys(m[k] for m in per)) for k in LOGICAL}
