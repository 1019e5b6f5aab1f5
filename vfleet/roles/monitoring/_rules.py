"""Alert rules for the vLLM fleet, a pure function of the metric names and the thresholds.

Why names are passed in: vLLM renamed metrics between releases (gpu_cache_usage_perc ->
kv_cache_usage_perc), and a rule over a name the hosts do not export never fires, silently.
A logical name may map to several exported names (a fleet in the middle of an upgrade):
each expression is then the `or` of one term per name; `or` matches series on their labels
without the metric name, so a host exporting both names counts once (the first, newest).

Every alert carries the target labels (host, model, service) of vfleet/roles/monitoring/_scrape.py.
The thresholds follow the field reports of issue 15: a KV cache near full for minutes,
a queue that keeps growing, any preemption, TTFT p95 over its target, a host whose
/metrics cannot be scraped, and an engine that answers /health but generates nothing
while requests run (a known vLLM failure). A second group watches each gateway's nginx
through its exporter: GatewayDown when the exporter cannot be scraped (up == 0) or cannot
read nginx's stub_status (nginx_up == 0), held for monitoring_down_for as VllmHostDown is."""

from __future__ import annotations

from typing import Any, Mapping

import yaml

from vfleet.config.monitoring import Thresholds
from vfleet.roles.monitoring._gpu_rules import gpu_rules
from vfleet.roles.monitoring._promql import Names, any_of
from vfleet.roles.monitoring._scrape import GATEWAY_JOB, VLLM_JOB
from vfleet.roles.monitoring._usage_rules import usage_group
from vfleet.roles.monitoring._verdict_rules import verdict_group

__all__ = ["ALERTS", "GATEWAY_ALERTS", "alert_rules", "gateway_rules", "rules_yaml"]

ALERTS = (
    "VllmHostDown",
    "VllmKvCacheNearFull",
    "VllmRequestsQueueGrowing",
    "VllmPreemptions",
    "VllmTtftP95High",
    "VllmEngineStuck",
)
GATEWAY_ALERTS = ("GatewayDown",)


def _alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description},
    }


def alert_rules(names: Names, th: Thresholds, limits: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The rules file as data: one group `vllm` with the alerts of ALERTS, in that order, then
    the gateway, gpu and verdict groups (`limits`: each host's max_num_seqs, _verdict_rules.py) and
    the per-tenant recording rules (_usage_rules.py)."""
    w = th.window
    sel = f'{{job="{VLLM_JOB}"}}'
    kv = any_of(names, "kv_cache_usage", lambda n: f"{n}{sel}")
    waiting = any_of(names, "requests_waiting", lambda n: f"{n}{sel}")
    waiting_deriv = any_of(names, "requests_waiting", lambda n: f"deriv({n}{sel}[{w}])")
    preempt = any_of(names, "preemptions", lambda n: f"increase({n}{sel}[{w}])")
    ttft = any_of(names, "ttft", lambda n: f"rate({n}_bucket{sel}[{w}])")
    running = any_of(names, "requests_running", lambda n: f"{n}{sel}")
    generated = any_of(names, "generation_tokens", lambda n: f"increase({n}{sel}[{th.stuck_for}])")
    by = "host, model, service"
    rules = [
        _alert(
            "VllmHostDown",
            f"up{sel} == 0",
            th.down_for,
            "critical",
            "vLLM host {{ $labels.host }} is down",
            "Prometheus cannot scrape {{ $labels.instance }}/metrics: the service is stopped, "
            "starting, or the host is unreachable.",
        ),
        _alert(
            "VllmKvCacheNearFull",
            f"{kv} > {th.kv_cache_usage_max:g}",
            th.kv_cache_for,
            "warning",
            "KV cache of {{ $labels.host }} is {{ $value | humanizePercentage }} full",
            "Requests queue or are preempted soon; lower max_num_seqs/max_model_len, cap max_tokens, or add hosts.",
        ),
        _alert(
            "VllmRequestsQueueGrowing",
            f"({waiting} > {th.waiting_max}) and ({waiting_deriv} > 0)",
            th.waiting_for,
            "warning",
            "{{ $value }} requests waiting on {{ $labels.host }}, and growing",
            "The host admits requests slower than they arrive.",
        ),
        _alert(
            "VllmPreemptions",
            f"{preempt} > {th.preemptions_max}",
            "0m",
            "warning",
            "{{ $labels.host }} preempted {{ $value }} requests in the last " + w,
            "The KV cache cannot hold the running batch: sequences are evicted and recomputed.",
        ),
        _alert(
            "VllmTtftP95High",
            f"histogram_quantile(0.95, sum by (le, {by}) ({ttft})) > {th.ttft_p95_seconds:g}",
            th.ttft_for,
            "warning",
            "TTFT p95 of {{ $labels.host }} is {{ $value | humanizeDuration }}",
            f"Above the {th.ttft_p95_seconds:g} s target over {w}.",
        ),
        _alert(
            "VllmEngineStuck",
            f"({running} > 0) and ({generated} == 0)",
            th.stuck_for,
            "critical",
            "vLLM on {{ $labels.host }} runs {{ $value }} requests but generates no token",
            "/health may still answer 200; restart the service (vfleet restart --limit {{ $labels.host }}).",
        ),
    ]
    return {
        "groups": [
            {"name": "vllm", "rules": rules},
            {"name": "gateway", "rules": gateway_rules(th)},
            {"name": "gpu", "rules": gpu_rules(th)},
            verdict_group(names, th, limits),
            usage_group(th),
        ]
    }


def gateway_rules(th: Thresholds) -> list[dict[str, Any]]:
    """The alerts of GATEWAY_ALERTS. No connection-saturation alert: nginx's ceiling is
    worker_connections x worker_processes of Debian's nginx.conf (768 x cores), which vfleet
    does not manage, and the per-host max_conns caps answer 503 long before it."""
    sel = f'{{job="{GATEWAY_JOB}"}}'
    return [
        _alert(
            "GatewayDown",
            f"(up{sel} == 0) or (nginx_up{sel} == 0)",
            th.down_for,
            "critical",
            "nginx gateway {{ $labels.host }} is down",
            "The exporter on {{ $labels.instance }} cannot be scraped (up 0), or it "
            "cannot read nginx's stub_status (nginx_up 0): nginx is stopped or its config lost "
            "the status server; clients of this gateway get no answer.",
        ),
    ]


def rules_yaml(names: Names, th: Thresholds, limits: Mapping[str, int] | None = None) -> str:
    head = "# Managed by vfleet (vfleet/roles/monitoring/_rules.py): local edits are overwritten.\n"
    return head + yaml.safe_dump(alert_rules(names, th, limits), sort_keys=False, width=120)
