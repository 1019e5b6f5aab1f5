"""A level's numbers from its request records: throughput over the measured window, and
TTFT, TPOT, inter-token latency and end-to-end latency as mean/p50/p90/p95/p99 in
milliseconds (percentiles with statistics.quantiles, 'inclusive' = numpy's linear, as
`vllm bench serve` computes them). Warm-up records are left out."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any, Iterable

from vfleet.clients.bench.client import RequestRecord

PCTS = (50, 90, 95, 99)
LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")


def distribution(values_s: Iterable[float]) -> dict[str, float | None]:
    """mean and percentiles, in ms; None for each when there is no value."""
    v = sorted(x * 1000.0 for x in values_s)
    if not v:
        return {"mean": None, **{f"p{p}": None for p in PCTS}}
    if len(v) == 1:
        return {"mean": round(v[0], 3), **{f"p{p}": round(v[0], 3) for p in PCTS}}
    q = statistics.quantiles(v, n=100, method="inclusive")
    return {"mean": round(statistics.fmean(v), 3), **{f"p{p}": round(q[p - 1], 3) for p in PCTS}}


def summarize(records: list[RequestRecord]) -> dict[str, Any]:
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    errors = Counter(r.error for r in measured if not r.ok)
    if measured:
        t0 = min(r.start for r in measured)
        t1 = max(r.end for r in measured)
        duration = max(t1 - t0, 1e-9)
    else:
        duration = 0.0
    out_tokens = sum(r.completion_tokens or 0 for r in ok)
    in_tokens = sum(r.prompt_tokens or 0 for r in ok)

    def per_s(x: float) -> float:
        return round(x / duration, 4) if duration else 0.0

    tpots = [t for r in ok if (t := r.tpot) is not None]
    return {
        "requests": len(measured),
        "completed": len(ok),
        "failed": len(measured) - len(ok),
        "errors": dict(sorted(errors.items())),
        "error_examples": sorted({f"{r.error}: {r.detail}" for r in measured if not r.ok})[:5],
        "warmup_requests": len(records) - len(measured),
        "duration_s": round(duration, 4),
        "request_throughput": per_s(len(ok)),
        "output_throughput": per_s(out_tokens),
        "total_token_throughput": per_s(out_tokens + in_tokens),
        "total_output_tokens": out_tokens,
        "total_prompt_tokens": in_tokens,
        "mean_prompt_tokens": round(in_tokens / len(ok), 2) if ok else None,
        "mean_output_tokens": round(out_tokens / len(ok), 2) if ok else None,
        # Little's law: the mean number of requests in flight during the window
        "mean_inflight": per_s(sum(r.e2e for r in measured)),
        "ttft_ms": distribution(r.ttft for r in ok if r.ttft is not None),
        "tpot_ms": distribution(tpots),
        "itl_ms": distribution(x for r in ok for x in r.itls),
        "e2e_ms": distribution(r.e2e for r in ok),
    }
