"""The access log lines of the gateways summarised per (tenant, model): requests, errors by
kind, p50/p95 of the request time and of the time to first byte.

Each line is read with the json module; a line that is not a JSON object, lacks a key the
summary needs or holds a value of the wrong type is counted as skipped (a line cut by a full
disk, a log_format edited by hand), never an error: the rest of the log still tells the story.
Percentiles are the bench's (vfleet/clients/bench/stats.py `distribution`: statistics.quantiles,
inclusive, as `vllm bench serve` computes them), so vfleet has one way to compute them."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from vfleet.clients.bench.stats import distribution

__all__ = ["Request", "Row", "Summary", "parse_line", "ttfb_seconds", "summarise"]

NEEDED = {
    "msec": (int, float),
    "tenant": str,
    "model": str,
    "status": int,
    "error": str,
    "request_time": (int, float),
    "ttfb": str,
}


@dataclass(frozen=True)
class Request:
    """What the summary reads of one log line."""

    msec: float
    tenant: str
    model: str
    error: str
    request_time: float
    ttfb: float | None


def ttfb_seconds(value: str) -> float | None:
    """nginx's $upstream_header_time: "0.050", "0.001, 0.050" when retried (the last upstream
    answered), "" or "-" when no upstream answered."""
    last = value.rsplit(",", 1)[-1].strip()
    try:
        return float(last) if last not in ("", "-") else None
    except ValueError:
        return None


def parse_line(line: str) -> Request | None:
    """One access log line, or None when it cannot be read (counted as skipped)."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    for key, kind in NEEDED.items():
        if not isinstance(obj.get(key), kind) or isinstance(obj.get(key), bool):
            return None
    return Request(
        float(obj["msec"]),
        obj["tenant"],
        obj["model"],
        obj["error"],
        float(obj["request_time"]),
        ttfb_seconds(obj["ttfb"]),
    )


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else round(ms / 1000.0, 6)


@dataclass
class Row:
    """One (tenant, model) of the window."""

    tenant: str
    model: str
    errors: Counter = field(default_factory=Counter)
    times: list[float] = field(default_factory=list)
    ttfbs: list[float] = field(default_factory=list)

    def add(self, r: Request) -> None:
        self.times.append(r.request_time)
        if r.ttfb is not None:
            self.ttfbs.append(r.ttfb)
        if r.error:
            self.errors[r.error] += 1

    def to_dict(self) -> dict[str, Any]:
        t, f = distribution(self.times), distribution(self.ttfbs)
        return {
            "tenant": self.tenant,
            "model": self.model,
            "requests": len(self.times),
            "errors": dict(sorted(self.errors.items())),
            "p50_s": _seconds(t["p50"]),
            "p95_s": _seconds(t["p95"]),
            "ttfb_p50_s": _seconds(f["p50"]),
            "ttfb_p95_s": _seconds(f["p95"]),
        }


@dataclass
class Summary:
    """The rows of every gateway read, and the lines that could not be."""

    rows: list[dict[str, Any]]
    skipped: int


def summarise(lines: Iterable[str], since: float, until: float) -> Summary:
    """Rows sorted by tenant then model; a line outside [since, until] is left out (the host
    already filtered, this keeps the summary right on its own)."""
    rows: dict[tuple[str, str], Row] = {}
    skipped = 0
    for line in lines:
        r = parse_line(line)
        if r is None:
            skipped += 1
            continue
        if not since <= r.msec <= until:
            continue
        rows.setdefault((r.tenant, r.model), Row(r.tenant, r.model)).add(r)
    return Summary([rows[k].to_dict() for k in sorted(rows)], skipped)
