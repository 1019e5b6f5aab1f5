"""Alert rules that say what holds a host back: the bottleneck verdicts of
vfleet/clients/verdict.py (memory-bound, max_num_seqs too small, queueing, not enough load
reaches the engine) as PromQL, with the verdict's own advice as the alert's description and the
same thresholds (its named constants).

Why a group of its own beside _rules.py's: those alerts say a symptom (KV cache near full, a
queue growing); these say which limit the symptom points at and what to change, so an
operator paged at night reads the same sentence `vfleet status` and `vfleet bench` print.

What PromQL cannot see the way status does: vLLM exports no max_num_seqs, so the rules are
rendered with each host's max_num_seqs from the inventory (a comparison per host); a host
whose inventory leaves it to vLLM is compared with the most it ran in the last hour
(CEILING_WINDOW) instead, which any steady load meets, so set max_num_seqs to make these
alerts exact. TTFT "growing" compares the mean TTFT of the rate window with the window before
it (offset). "Not enough load reaches the engine" reads the GPU utilisation the gpu job
exports (vfleet/roles/monitoring/_gpu_textfile.py), averaged over the host's GPUs."""

from __future__ import annotations

from typing import Any, Mapping

from vfleet.clients.verdict import (
    AT_LIMIT_SHARE,
    GPU_UTIL_LOW,
    KV_NEAR_FULL,
    MEMORY_BOUND,
    QUEUEING,
    RUNNING_LOW_SHARE,
    SEQS_TOO_SMALL,
    TEXTS,
    TTFT_GROWTH,
    UNDERFED,
)
from vfleet.config.monitoring import Thresholds
from vfleet.config.quoting import promql_quote
from vfleet.roles.monitoring._gpu_textfile import PREFIX as GPU_PREFIX
from vfleet.roles.monitoring._promql import Names, any_of
from vfleet.roles.monitoring._scrape import GPU_JOB, VLLM_JOB

__all__ = ["VERDICT_ALERTS", "CEILING_WINDOW", "verdict_rules", "verdict_group"]

VERDICT_ALERTS = ("VllmMemoryBound", "VllmMaxNumSeqsTooSmall", "VllmQueueing", "VllmUnderfed")
Limits = Mapping[str, int]  # host (its `host` label, the inventory name) -> its max_num_seqs
CEILING_WINDOW = "1h"  # without max_num_seqs: "at max_num_seqs" is within AT_LIMIT_SHARE of this window's most


def _rule(name: str, kind: str, expr: str, for_: str, summary: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": "warning", "verdict": kind},
        "annotations": {"summary": summary, "description": f"{kind}: {TEXTS[kind]}."},
    }


def _selector(host: str | None = None) -> str:
    return f'{{job="{VLLM_JOB}"}}' if host is None else f'{{job="{VLLM_JOB}", host={promql_quote(host)}}}'


def _running_vs_limit(names: Names, limits: Limits, op: str, share: float) -> str:
    """The running series where running `op` share * max_num_seqs: one comparison per host the
    inventory gives a max_num_seqs, and the CEILING_WINDOW ceiling for every other host."""

    def running(sel: str) -> str:
        return any_of(names, "requests_running", lambda n: f"{n}{sel}")

    hosts = sorted(limits)
    per_host = [f"({running(_selector(h))} {op} {share * limits[h]:g})" for h in hosts]
    sel = _selector()
    ceiling = any_of(names, "requests_running", lambda n: f"max_over_time({n}{sel}[{CEILING_WINDOW}])")
    rest = f"({running(sel)} {op} {share:g} * {ceiling})"
    if hosts:
        rest = f"({rest} unless on (host) ({' or '.join(running(_selector(h)) for h in hosts)}))"
    return "(" + " or ".join(per_host + [rest]) + ")"


def verdict_rules(names: Names, th: Thresholds, limits: Limits | None = None) -> list[dict[str, Any]]:
    """The alerts of VERDICT_ALERTS: each holds for monitoring's waiting_for (the verdict's
    "waiting stays above 0"), over its rate window; `limits`: each host's max_num_seqs."""

    w, sel, limits = th.window, _selector(), limits or {}
    kv, waiting, running = (
        any_of(names, key, lambda n: f"{n}{sel}") for key in ("kv_cache_usage", "requests_waiting", "requests_running")
    )
    at_limit = _running_vs_limit(names, limits, ">=", AT_LIMIT_SHARE)
    running_low = _running_vs_limit(names, limits, "<", RUNNING_LOW_SHARE)
    gpu_idle = f'avg by (host) ({GPU_PREFIX}utilization_ratio{{job="{GPU_JOB}"}}) < {GPU_UTIL_LOW / 100:g}'
    preempting = any_of(names, "preemptions", lambda n: f"increase({n}{sel}[{w}]) > 0")
    ttft_now = any_of(names, "ttft", lambda n: f"rate({n}_sum{sel}[{w}]) / rate({n}_count{sel}[{w}])")
    ttft_before = any_of(
        names, "ttft", lambda n: f"rate({n}_sum{sel}[{w}] offset {w}) / rate({n}_count{sel}[{w}] offset {w})"
    )
    kv_full = f"({kv} >= {KV_NEAR_FULL:g})"
    at_what = f"its max_num_seqs (or its ceiling of the last {CEILING_WINDOW} where the inventory sets none)"
    return [
        _rule(
            "VllmMemoryBound",
            MEMORY_BOUND,
            f"({waiting} > 0) and ({kv_full} or ({preempting}))",
            th.waiting_for,
            "{{ $value }} requests wait on {{ $labels.host }} while its KV cache is near full "
            f"(>= {KV_NEAR_FULL:.0%}) or it preempts",
        ),
        _rule(
            "VllmMaxNumSeqsTooSmall",
            SEQS_TOO_SMALL,
            f"(({waiting} > 0) and ({kv} < {KV_NEAR_FULL:g}) and {at_limit}) unless ({preempting})",
            th.waiting_for,
            "{{ $value }} requests wait on {{ $labels.host }} while its KV cache has room "
            f"(< {KV_NEAR_FULL:.0%}) and it runs at {at_what}",
        ),
        _rule(
            "VllmQueueing",
            QUEUEING,
            f"(({running} > 0) and {at_limit}) and (({ttft_now}) >= {TTFT_GROWTH:g} * ({ttft_before}))",
            th.ttft_for,
            "{{ $labels.host }} runs {{ $value }} requests, at "
            + at_what
            + f", and its mean TTFT grew by {TTFT_GROWTH - 1:.0%} or more over {w}",
        ),
        _rule(
            "VllmUnderfed",
            UNDERFED,
            f"((({running} > 0) and {running_low}) and on (host) ({gpu_idle})) unless on (host) ({waiting} > 0)",
            th.waiting_for,
            "{{ $labels.host }} runs {{ $value }} requests, under "
            f"{RUNNING_LOW_SHARE:.0%} of " + at_what + f", and its GPUs are busy under {GPU_UTIL_LOW:.0f}% "
            "of the time",
        ),
    ]


def verdict_group(names: Names, th: Thresholds, limits: Limits | None = None) -> dict[str, Any]:
    """The rule group rules.alert_rules lists after its own."""
    return {"name": "vllm-verdict", "rules": verdict_rules(names, th, limits)}
