"""A Grafana dashboard of the fleet, with the same metric names as the alert rules.

Why generated: the names depend on the installed vLLM version (see _metrics.py), and a
hand-kept dashboard silently shows "No data" after an upgrade renames a gauge. The JSON
uses a `${DS_PROMETHEUS}` datasource input, so Grafana asks for the datasource on import."""

from __future__ import annotations

import json
from typing import Any

from vfleet.roles.monitoring._promql import Names, any_of
from vfleet.roles.monitoring._scrape import GATEWAY_JOB, GPU_JOB, VLLM_JOB
from vfleet.roles.monitoring._usage_rules import record_names

__all__ = ["dashboard", "dashboard_json", "panel_queries"]

SEL = f'{{job="{VLLM_JOB}", host=~"$host"}}'
GW = f'{{job="{GATEWAY_JOB}"}}'  # every gateway: the $host variable lists vLLM hosts
GPU = f'{{job="{GPU_JOB}", host=~"$host"}}'  # the vLLM hosts' node exporters (_gpu_exporter.py)


def panel_queries(names: Names, window: str = "5m") -> list[tuple[str, str, str]]:
    """(title, unit, PromQL) of each panel, in order (`window`: the rules' rate window, which
    names the per-tenant recorded series)."""

    def q(key: str, term: str) -> str:
        return any_of(names, key, lambda n: term.format(n=n, sel=SEL))

    ttft = q("ttft", "rate({n}_bucket{sel}[5m])")
    return [
        ("Hosts up", "short", f"up{SEL}"),
        ("KV cache usage", "percentunit", q("kv_cache_usage", "{n}{sel}")),
        ("Requests running", "short", q("requests_running", "{n}{sel}")),
        ("Requests waiting", "short", q("requests_waiting", "{n}{sel}")),
        ("Generated tokens/s", "short", q("generation_tokens", "rate({n}{sel}[1m])")),
        ("Preemptions (5m)", "short", q("preemptions", "increase({n}{sel}[5m])")),
        ("TTFT p95", "s", f"histogram_quantile(0.95, sum by (le, host) ({ttft}))"),
        ("TTFT p50", "s", f"histogram_quantile(0.5, sum by (le, host) ({ttft}))"),
        ("Gateway active connections", "short", f"nginx_connections_active{GW}"),
        ("Gateway requests/s", "reqps", f"rate(nginx_http_requests_total{GW}[1m])"),
        # per host, as every other panel: the GPUs of one host serve one engine together
        (
            "GPU utilisation (mean of the host's GPUs)",
            "percentunit",
            f"avg by (host) (vfleet_gpu_utilization_ratio{GPU})",
        ),
        ("GPU memory used", "bytes", f"sum by (host) (vfleet_gpu_memory_used_bytes{GPU})"),
        (
            "GPU memory used (fraction)",
            "percentunit",
            f"sum by (host) (vfleet_gpu_memory_used_bytes{GPU}) / sum by (host) (vfleet_gpu_memory_total_bytes{GPU})",
        ),
        # per tenant, over every gateway: the recording rules of _usage_rules.py
        *[
            (title, "reqps", name)
            for title, name in zip(("Gateway requests/s per tenant", "Gateway 429/s per tenant"), record_names(window))
        ],
    ]


def dashboard(names: Names, window: str = "5m") -> dict[str, Any]:
    ds = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    panels = []
    for i, (title, unit, expr) in enumerate(panel_queries(names, window)):
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "datasource": ds,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {
                        "refId": "A",
                        "datasource": ds,
                        "expr": expr,
                        "legendFormat": "{{tenant}}" if expr.startswith("tenant:") else "{{host}}",
                    }
                ],
            }
        )
    host_var = {
        "name": "host",
        "type": "query",
        "datasource": ds,
        "includeAll": True,
        "multi": True,
        "query": f'label_values(up{{job="{VLLM_JOB}"}}, host)',
        "refresh": 2,
        "current": {"text": "All", "value": "$__all"},
        "allValue": ".*",
    }
    return {
        "__inputs": [
            {
                "name": "DS_PROMETHEUS",
                "label": "Prometheus",
                "type": "datasource",
                "pluginId": "prometheus",
                "pluginName": "Prometheus",
            }
        ],
        "uid": "vfleet-vllm",
        "title": "vLLM fleet (vfleet)",
        "tags": ["vllm", "vfleet"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [host_var]},
        "panels": panels,
    }


def dashboard_json(names: Names, window: str = "5m") -> str:
    return json.dumps(dashboard(names, window), indent=2, sort_keys=True) + "\n"
