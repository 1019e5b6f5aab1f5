"""Alert rules that say what holds a host back: the bottleneck verdicts of
vfleet/clients/verdict.py (memory-bound, max_num_seqs too small, queueing) as PromQL, with the
verdict's own advice as the alert's description and the same thresholds (its named constants).

Why a group of its own beside rules.py's: those alerts say a symptom (KV cache near full, a
queue growing); these say which limit the symptom points at and what to change, so an
operator paged at night reads the same sentence `vfleet status` and `vfleet bench` print.

What PromQL cannot see the way status does: vLLM exports no max_num_seqs, so "running at
max_num_seqs" is running at the ceiling the host reached in the last hour (CEILING_WINDOW),
and the planner's figure is not known here (a host whose max_num_seqs is already at it is
reported as too small, as status does without --plan). TTFT "growing" compares the mean TTFT
of the rate window with the window before it (offset). The "not enough load reaches the
engine" verdict needs the GPU utilisation, which these rules do not assume a name for."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from vfleet.clients.verdict import (AT_LIMIT_SHARE, KV_NEAR_FULL, MEMORY_BOUND, QUEUEING, SEQS_TOO_SMALL,
                                    TEXTS, TTFT_GROWTH)
from vfleet.config.monitoring import Thresholds
from vfleet.roles.monitoring.scrape import VLLM_JOB

__all__ = ["VERDICT_ALERTS", "CEILING_WINDOW", "verdict_rules", "verdict_group"]

VERDICT_ALERTS = ("VllmMemoryBound", "VllmMaxNumSeqsTooSmall", "VllmQueueing")
Names = Mapping[str, "str | Sequence[str]"]   # as rules.py's: logical name -> exported name(s)
CEILING_WINDOW = "1h"   # "at max_num_seqs": within AT_LIMIT_SHARE of the most it ran in this window


def _rule(name: str, kind: str, expr: str, for_: str, summary: str) -> dict[str, Any]:
    return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": "warning", "verdict": kind},
            "annotations": {"summary": summary, "description": f"{kind}: {TEXTS[kind]}."}}


def verdict_rules(names: Names, th: Thresholds) -> list[dict[str, Any]]:
    """The alerts of VERDICT_ALERTS: each holds for monitoring's waiting_for (the verdict's
    "waiting stays above 0"), over its rate window."""
    # rules.py lists this group, so its `or`-of-names helper is imported here, when called
    from vfleet.roles.monitoring.rules import any_of

    w, sel = th.window, f'{{job="{VLLM_JOB}"}}'
    kv, waiting, running = (any_of(names, key, lambda n: f"{n}{sel}")
                            for key in ("kv_cache_usage", "requests_waiting", "requests_running"))
    ceiling = any_of(names, "requests_running", lambda n: f"max_over_time({n}{sel}[{CEILING_WINDOW}])")
    preempting = any_of(names, "preemptions", lambda n: f"increase({n}{sel}[{w}]) > 0")
    ttft_now = any_of(names, "ttft", lambda n: f"rate({n}_sum{sel}[{w}]) / rate({n}_count{sel}[{w}])")
    ttft_before = any_of(names, "ttft", lambda n: f"rate({n}_sum{sel}[{w}] offset {w}) "
                                                  f"/ rate({n}_count{sel}[{w}] offset {w})")
    kv_full = f"({kv} >= {KV_NEAR_FULL:g})"
    return [
        _rule("VllmMemoryBound", MEMORY_BOUND, f"({waiting} > 0) and ({kv_full} or ({preempting}))",
              th.waiting_for, "{{ $value }} requests wait on {{ $labels.host }} while its KV cache is near full "
              f"(>= {KV_NEAR_FULL:.0%}) or it preempts"),
        _rule("VllmMaxNumSeqsTooSmall", SEQS_TOO_SMALL,
              f"(({waiting} > 0) and ({kv} < {KV_NEAR_FULL:g})) unless ({preempting})", th.waiting_for,
              "{{ $value }} requests wait on {{ $labels.host }} while its KV cache has room "
              f"(< {KV_NEAR_FULL:.0%})"),
        _rule("VllmQueueing", QUEUEING,
              f"(({running} > 0) and ({running} >= {AT_LIMIT_SHARE:g} * {ceiling})) "
              f"and (({ttft_now}) >= {TTFT_GROWTH:g} * ({ttft_before}))", th.ttft_for,
              "{{ $labels.host }} runs {{ $value }} requests, its ceiling of the last " + CEILING_WINDOW
              + f", and its mean TTFT grew by {TTFT_GROWTH - 1:.0%} or more over {w}"),
    ]


def verdict_group(names: Names, th: Thresholds) -> dict[str, Any]:
    """The rule group rules.alert_rules lists after its own."""
    return {"name": "vllm-verdict", "rules": verdict_rules(names, th)}
