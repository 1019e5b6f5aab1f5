"""Recording rules over the gateways' access log metrics (mtail, job `gateway_usage`): each
tenant's request rate and 429 rate, summed over every gateway and model.

Why recorded and not only queried: the dashboard and an operator's alert on a noisy tenant read
the same two series, computed once per evaluation instead of once per panel refresh; and the
names follow Prometheus's level:metric:operations convention, so `tenant:` says what they are
summed by. A 429 is both over the rate and over the concurrency cap (GATEWAY24.md "Responses");
the `error` label of the raw counter tells them apart."""

from __future__ import annotations

from typing import Any

from vfleet.config.monitoring import Thresholds
from vfleet.roles.monitoring._scrape import GATEWAY_USAGE_JOB

__all__ = ["REQUESTS", "record_names", "usage_records", "usage_group"]

REQUESTS = "vfleet_gateway_requests_total"  # the counter of vfleet_gateway.mtail


def record_names(window: str) -> tuple[str, str]:
    """The recorded per-tenant request rate and 429 rate over `window` (the dashboard reads them)."""
    return f"tenant:vfleet_gateway_requests:rate{window}", f"tenant:vfleet_gateway_requests_429:rate{window}"


def usage_records(th: Thresholds) -> dict[str, str]:
    """{recorded name: expression}: per-tenant request rate and 429 rate over the rules window."""
    w = th.window
    sel = f'job="{GATEWAY_USAGE_JOB}"'
    requests, too_many = record_names(w)
    return {
        requests: f"sum by (tenant) (rate({REQUESTS}{{{sel}}}[{w}]))",
        too_many: f'sum by (tenant) (rate({REQUESTS}{{{sel}, status="429"}}[{w}]))',
    }


def usage_group(th: Thresholds) -> dict[str, Any]:
    return {
        "name": "gateway_usage",
        "rules": [{"record": name, "expr": expr} for name, expr in usage_records(th).items()],
    }
