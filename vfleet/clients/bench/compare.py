"""`vfleet bench.compare A.json B.json`: what changed between two sweeps (before/after a flag
change or an upgrade), level by level for the levels both ran, and the knee and suggestions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from vfleet.clients.measured import differences
from vfleet.engine.errors import VfleetError

# (label, how to read it from a level, higher is better)
METRICS: list[tuple[str, Any, bool]] = [
    ("req/s", lambda x: x.get("request_throughput"), True),
    ("out tok/s", lambda x: x.get("output_throughput"), True),
    ("TTFT p50 ms", lambda x: x["ttft_ms"]["p50"], False),
    ("TTFT p95 ms", lambda x: x["ttft_ms"]["p95"], False),
    ("TPOT p50 ms", lambda x: x["tpot_ms"]["p50"], False),
    ("TPOT p95 ms", lambda x: x["tpot_ms"]["p95"], False),
    ("ITL p95 ms", lambda x: x["itl_ms"]["p95"], False),
    ("E2E p95 ms", lambda x: x["e2e_ms"]["p95"], False),
    ("failed", lambda x: x.get("failed"), False),
]


def load(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise VfleetError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise VfleetError(f"{path}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or data.get("task") != "bench" or not isinstance(data.get("levels"), list):
        raise VfleetError(f"{path}: not a `vfleet bench` result (JSON with task 'bench' and levels)")
    return data


def change(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if a == 0:
        return None if b == 0 else float("inf")
    return (b - a) / a


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    key = lambda x: (x["mode"], float(x["value"]))  # noqa: E731
    la, lb = {key(x): x for x in a["levels"]}, {key(x): x for x in b["levels"]}
    rows = []
    for k in sorted(set(la) & set(lb)):
        row = {"mode": k[0], "value": k[1], "label": la[k]["label"], "metrics": {}}
        for name, get, higher in METRICS:
            va, vb = get(la[k]), get(lb[k])
            c = change(va, vb)
            better = None if c in (None, 0) else (c > 0) == higher
            row["metrics"][name] = {"a": va, "b": vb, "change": c, "better": better}
        rows.append(row)
    sugg = {}
    for mode in ("concurrency", "rate"):
        aa, bb = (a.get("analysis") or {}).get(mode), (b.get("analysis") or {}).get(mode)
        if aa or bb:
            sugg[mode] = {
                f: [
                    (aa or {}).get("knee", {}).get("value") if f == "knee" else (aa or {}).get(f),
                    (bb or {}).get("knee", {}).get("value") if f == "knee" else (bb or {}).get(f),
                ]
                for f in ("knee", "suggested_max_num_seqs", "suggested_client_concurrency")
            }
    return {
        "levels": rows,
        "only_in_a": [la[k]["label"] for k in sorted(set(la) - set(lb))],
        "only_in_b": [lb[k]["label"] for k in sorted(set(lb) - set(la))],
        "analysis": sugg,
    }


def table(result: dict[str, Any], name_a: str, name_b: str) -> Table:
    """One row a (level, metric): readable on an 80-column terminal."""
    t = Table(title=f"A = {name_a}\nB = {name_b}", title_justify="left")
    for h, j in (("level", "left"), ("metric", "left"), ("A", "right"), ("B", "right"), ("change", "right")):
        t.add_column(h, justify=j)
    for row in result["levels"]:
        first = True
        for n, _, _ in METRICS:
            m = row["metrics"][n]
            if m["a"] is None and m["b"] is None:
                continue
            c = m["change"]
            colour = "green" if m["better"] else "red" if m["better"] is False else "default"
            pct = "-" if c is None else "new" if c == float("inf") else f"[{colour}]{c:+.1%}[/]"
            t.add_row(
                row["label"] if first else "",
                n,
                "-" if m["a"] is None else f"{m['a']:,.1f}",
                "-" if m["b"] is None else f"{m['b']:,.1f}",
                pct,
                end_section=(n == METRICS[-1][0]),
            )
            first = False
    return t


def setup_changes(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What changed in the measured setup between two results (vfleet/clients/measured.py).
    Through a gateway each host has its own record under "hosts": a change on every host is
    said once, one on some hosts with their names, and hosts that came or went are named."""
    ma, mb = a.get("measured") or {}, b.get("measured") or {}
    ha, hb = ma.get("hosts") or {}, mb.get("hosts") or {}
    shared = sorted(set(ha) & set(hb))
    if not shared:
        return differences(ma, mb)
    per_host = {h: differences(ha[h], hb[h]) for h in shared}
    everywhere = [c for c in per_host[shared[0]] if all(c in per_host[h] for h in shared)]
    out = everywhere + [f"{h}: {c}" for h in shared for c in per_host[h] if c not in everywhere]
    if set(ha) != set(hb):
        out.append(f"hosts {', '.join(sorted(ha))} -> {', '.join(sorted(hb))}")
    return out


def setup_line(a: dict[str, Any], b: dict[str, Any], name_a: str, name_b: str) -> str:
    """One line under the table: which setup fields changed, "same setup", or which result
    has no measured record (a bench older than the record, or run with --no-measure)."""
    missing = [name for name, r in ((name_a, a), (name_b, b)) if not r.get("measured")]
    if missing:
        return f"setup not compared: no measured record in {' and '.join(missing)}"
    changes = setup_changes(a, b)
    return f"changed between the runs: {', '.join(changes)}" if changes else "same setup"
