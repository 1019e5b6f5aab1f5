"""Reading a sweep: where is the knee, what to set, which level meets the SLO.

The knee is the level after which output-token throughput grows by less than 10% while TTFT
p95 grows: past it, more concurrency only queues requests. Its concurrency is what the fleet
can keep busy: suggested max_num_seqs is that split over the vLLM hosts behind the target
(rounded up), and the client-side concurrency limit is the knee's concurrency itself (for a
rate sweep, the mean number of requests in flight at the knee, by Little's law).
Without a knee in the range (throughput still grows at the last level) the suggestion is the
last level, marked as a lower bound."""

from __future__ import annotations

import math
import re
from typing import Any

from vfleet.engine.errors import VfleetError

GROWTH = 0.10


def parse_duration(text: str | float | int | None) -> float | None:
    """'2s', '500ms', '1.5', 2 -> seconds."""
    if text is None or text == "":
        return None
    if isinstance(text, (int, float)):
        return float(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*", str(text))
    if not m:
        raise VfleetError(f"{text!r}: expected a duration like 2s, 500ms or 1.5")
    value, unit = float(m.group(1)), m.group(2) or "s"
    return value / 1000.0 if unit == "ms" else value * 60.0 if unit == "m" else value


def _p95(level: dict[str, Any], key: str) -> float | None:
    return (level.get(key) or {}).get("p95")


def find_knee(levels: list[dict[str, Any]], growth: float = GROWTH) -> dict[str, Any]:
    """levels of one mode, any order. Returns {"value", "index", "found", "reason"}."""
    lv = sorted((x for x in levels if x.get("completed")), key=lambda x: x["value"])
    if not lv:
        return {"found": False, "value": None, "reason": "no level completed a request"}
    for i in range(len(lv) - 1):
        a, b = lv[i], lv[i + 1]
        ta, tb = a["output_throughput"], b["output_throughput"]
        gain = (tb - ta) / ta if ta else math.inf
        fa, fb = _p95(a, "ttft_ms"), _p95(b, "ttft_ms")
        if gain < growth and fa is not None and fb is not None and fb > fa:
            return {
                "found": True,
                "value": a["value"],
                "next": b["value"],
                "throughput_gain": round(gain, 4),
                "ttft_p95_ms": [fa, fb],
                "reason": f"from {a['value']} to {b['value']}: throughput {gain:+.1%}, "
                f"TTFT p95 {fa:.0f} -> {fb:.0f} ms",
            }
    return {
        "found": False,
        "value": lv[-1]["value"],
        "reason": f"throughput still grows by {growth:.0%} or more (or TTFT p95 does not) up to the "
        f"last level {lv[-1]['value']}: the knee is at or beyond it",
    }


def meets(
    level: dict[str, Any], slo_ttft_p95_s: float | None, slo_e2e_p95_s: float | None, max_error_rate: float = 0.01
) -> tuple[bool, str]:
    if not level.get("completed"):
        return False, "no request completed"
    rate = level["failed"] / level["requests"] if level["requests"] else 1.0
    if rate > max_error_rate:
        return False, f"{rate:.1%} of requests failed"
    for key, slo in (("ttft_ms", slo_ttft_p95_s), ("e2e_ms", slo_e2e_p95_s)):
        if slo is not None:
            p = _p95(level, key)
            if p is None or p > slo * 1000:
                return False, f"{key[:-3].upper()} p95 {p:.0f} ms > {slo * 1000:.0f} ms"
    return True, "meets"


def highest_meeting(
    levels: list[dict[str, Any]], slo_ttft_p95_s: float | None, slo_e2e_p95_s: float | None
) -> dict[str, Any] | None:
    if slo_ttft_p95_s is None and slo_e2e_p95_s is None:
        return None
    verdicts = {x["value"]: meets(x, slo_ttft_p95_s, slo_e2e_p95_s) for x in levels}
    ok = [v for v, (good, _) in verdicts.items() if good]
    return {
        "ttft_p95_s": slo_ttft_p95_s,
        "e2e_p95_s": slo_e2e_p95_s,
        "highest_level": max(ok) if ok else None,
        "levels": {str(v): why for v, (_, why) in sorted(verdicts.items())},
    }


def analyse(
    levels: list[dict[str, Any]], n_hosts: int, slo_ttft_p95_s: float | None = None, slo_e2e_p95_s: float | None = None
) -> dict[str, Any]:
    """Per mode (concurrency, rate): the knee, the suggestions and the SLO verdict."""
    out: dict[str, Any] = {}
    for mode in ("concurrency", "rate"):
        lv = [x for x in levels if x["mode"] == mode]
        if not lv:
            continue
        knee = find_knee(lv)
        a: dict[str, Any] = {"knee": knee}
        if knee["value"] is not None:
            at = next(x for x in lv if x["value"] == knee["value"])
            inflight = knee["value"] if mode == "concurrency" else math.ceil(at["mean_inflight"])
            inflight = max(int(inflight), 1)
            a["suggested_client_concurrency"] = inflight
            a["suggested_max_num_seqs"] = max(1, math.ceil(inflight / max(n_hosts, 1)))
            a["lower_bound"] = not knee["found"]
            hosts = ((at.get("server") or {}).get("hosts") or {}).values()
            running = [h["running_max"] for h in hosts if "running_max" in h]
            if running:  # what the server actually batched at the knee (capped by its max_num_seqs)
                a["server_running_max_at_knee"] = max(running)
        slo = highest_meeting(lv, slo_ttft_p95_s, slo_e2e_p95_s)
        if slo is not None:
            a["slo"] = slo
        out[mode] = a
    return out
