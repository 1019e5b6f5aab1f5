"""What a sweep leaves behind: the terminal table, JSON (everything), CSV (one row a level,
flat columns) and a PNG a person reads at a glance (matplotlib, Agg backend: no display):
top, output-token and request throughput against the level; bottom, TTFT p95 and TPOT p95;
the knee marked on both, the SLO drawn when one was given."""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from roles.bench.stats import LATENCIES, PCTS

CSV_FIXED = ("mode", "value", "requests", "completed", "failed", "errors", "duration_s", "request_throughput",
             "output_throughput", "total_token_throughput", "mean_prompt_tokens", "mean_output_tokens",
             "mean_inflight")
CSV_SERVER = ("running_max", "running_mean", "waiting_max", "waiting_mean", "kv_cache_usage_max", "preemptions")


def csv_columns() -> list[str]:
    cols = list(CSV_FIXED)
    for lat in LATENCIES:
        cols += [f"{lat[:-3]}_{k}_ms" for k in ("mean", *[f"p{p}" for p in PCTS])]
    cols += [f"server_{k}" for k in CSV_SERVER]
    return cols


def csv_row(level: dict[str, Any]) -> dict[str, Any]:
    row = {k: level.get(k) for k in CSV_FIXED}
    row["errors"] = ";".join(f"{k}={v}" for k, v in (level.get("errors") or {}).items())
    for lat in LATENCIES:
        d = level.get(lat) or {}
        for k in ("mean", *[f"p{p}" for p in PCTS]):
            row[f"{lat[:-3]}_{k}_ms"] = d.get(k)
    server = level.get("server") or {}
    for k in CSV_SERVER:
        row[f"server_{k}"] = server.get(k)
    return row


def write_csv(path: str | Path, levels: list[dict[str, Any]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=csv_columns())
    w.writeheader()
    for lv in levels:
        w.writerow({k: ("" if v is None else v) for k, v in csv_row(lv).items()})
    _atomic(path, buf.getvalue())


def write_json(path: str | Path, result: dict[str, Any]) -> None:
    _atomic(path, json.dumps(result, indent=2, sort_keys=False) + "\n")


def _atomic(path: str | Path, text: str) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, p)


def console() -> Console:
    """The terminal, or 200 columns when output goes to a file or pipe (the table is wide)."""
    import sys

    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def _fmt(v: Any, nd: int = 0) -> str:
    return "-" if v is None else f"{v:,.{nd}f}"


def level_table(levels: list[dict[str, Any]], title: str = "") -> Table:
    t = Table(title=title or None, title_justify="left")
    for h in ("level", "ok/sent", "errors", "req/s", "out tok/s", "TTFT p50", "TTFT p95", "TPOT p50", "TPOT p95",
              "ITL p95", "E2E p95", "running", "waiting", "KV max", "preempt"):
        t.add_column(h, justify="left" if h in ("level", "errors") else "right")
    for lv in levels:
        s = lv.get("server") or {}
        kv = s.get("kv_cache_usage_max")
        t.add_row(lv["label"], f"{lv['completed']}/{lv['requests']}",
                  ", ".join(f"{k} {v}" for k, v in lv["errors"].items()) or "-",
                  _fmt(lv["request_throughput"], 2), _fmt(lv["output_throughput"], 1),
                  _fmt(lv["ttft_ms"]["p50"]), _fmt(lv["ttft_ms"]["p95"]),
                  _fmt(lv["tpot_ms"]["p50"], 1), _fmt(lv["tpot_ms"]["p95"], 1), _fmt(lv["itl_ms"]["p95"], 1),
                  _fmt(lv["e2e_ms"]["p95"]), _fmt(s.get("running_max")), _fmt(s.get("waiting_max")),
                  "-" if kv is None else f"{kv:.0%}", _fmt(s.get("preemptions")))
    return t


def print_analysis(console: Console, analysis: dict[str, Any]) -> None:
    for mode, a in analysis.items():
        knee = a["knee"]
        unit = "" if mode == "concurrency" else " req/s"
        if knee["value"] is None:
            console.print(f"[bold]{mode}[/]: no knee ({knee['reason']})")
            continue
        word = "knee at" if knee["found"] else "no knee yet; highest level"
        console.print(f"[bold]{mode}[/]: {word} {knee['value']:g}{unit}: {knee['reason']}")
        bound = " (at least: the knee was not reached)" if a.get("lower_bound") else ""
        console.print(f"  suggested max_num_seqs per vLLM host: [bold]{a['suggested_max_num_seqs']}[/]{bound}; "
                      f"client concurrency limit: [bold]{a['suggested_client_concurrency']}[/]")
        if "slo" in a:
            slo = a["slo"]
            want = ", ".join(f"{k} <= {slo[k + '_p95_s']:g} s" for k in ("ttft", "e2e") if slo[k + "_p95_s"] is not None)
            best = slo["highest_level"]
            console.print(f"  SLO p95 {want}: " + (f"highest level meeting it: [bold]{best:g}{unit}[/]" if best is not None
                                                  else "[red]no level meets it[/]"))


def write_png(path: str | Path, result: dict[str, Any]) -> list[str]:
    """One figure per sweep: a column per mode (concurrency, rate). Returns the modes drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [m for m in ("concurrency", "rate") if any(x["mode"] == m for x in result["levels"])]
    fig, axes = plt.subplots(2, len(modes), figsize=(7.5 * len(modes), 8), squeeze=False, sharex="col")
    slo = (result.get("settings") or {}).get("slo") or {}
    for col, mode in enumerate(modes):
        lv = sorted((x for x in result["levels"] if x["mode"] == mode), key=lambda x: x["value"])
        xs = [x["value"] for x in lv]
        top, bottom = axes[0][col], axes[1][col]
        top.plot(xs, [x["output_throughput"] for x in lv], "o-", color="tab:blue", label="output tokens/s")
        top.set_ylabel("output tokens/s", color="tab:blue")
        top.set_ylim(bottom=0)
        r = top.twinx()
        r.plot(xs, [x["request_throughput"] for x in lv], "s--", color="tab:green", label="requests/s")
        r.set_ylabel("requests/s", color="tab:green")
        r.set_ylim(bottom=0)
        top.grid(True, alpha=0.3)
        top.set_title(f"{result.get('model', '')} via {result.get('target', {}).get('url', '')}: "
                      f"{'concurrency' if mode == 'concurrency' else 'Poisson rate'} sweep", fontsize=10)

        def ms(key: str, p: str = "p95") -> list[float]:
            return [float("nan") if x[key][p] is None else x[key][p] for x in lv]

        bottom.plot(xs, ms("ttft_ms"), "o-", color="tab:red", label="TTFT p95")
        bottom.plot(xs, ms("e2e_ms"), "^:", color="tab:purple", alpha=0.6, label="E2E p95")
        bottom.set_ylabel("TTFT / E2E p95 (ms)")
        bottom.set_ylim(bottom=0)
        b2 = bottom.twinx()
        b2.plot(xs, ms("tpot_ms"), "d-", color="tab:orange", label="TPOT p95")
        b2.set_ylabel("TPOT p95 (ms/token)", color="tab:orange")
        b2.set_ylim(bottom=0)
        bottom.grid(True, alpha=0.3)
        bottom.set_xlabel("concurrent requests" if mode == "concurrency" else "requests/s offered (Poisson)")
        if slo.get("ttft_p95_s"):
            bottom.axhline(slo["ttft_p95_s"] * 1000, color="tab:red", ls="--", lw=0.8, label="TTFT SLO")
        if slo.get("e2e_p95_s"):
            bottom.axhline(slo["e2e_p95_s"] * 1000, color="tab:purple", ls="--", lw=0.8, label="E2E SLO")
        if len(xs) > 2 and min(xs) > 0 and max(xs) / min(xs) >= 8:
            top.set_xscale("log", base=2)
            top.set_xticks(xs, [f"{x:g}" for x in xs])
        a = (result.get("analysis") or {}).get(mode) or {}
        knee = a.get("knee") or {}
        if knee.get("found"):
            for ax in (top, bottom):
                ax.axvline(knee["value"], color="black", ls="--", lw=1.2)
            top.annotate(f"knee: {knee['value']:g}\nmax_num_seqs {a.get('suggested_max_num_seqs')}",
                         xy=(knee["value"], top.get_ylim()[1] * 0.5), xytext=(6, 0), textcoords="offset points",
                         fontsize=9, fontweight="bold")
        h1, l1 = top.get_legend_handles_labels()
        h2, l2 = r.get_legend_handles_labels()
        top.legend(h1 + h2, l1 + l2, loc="lower right", fontsize=8)
        h1, l1 = bottom.get_legend_handles_labels()
        h2, l2 = b2.get_legend_handles_labels()
        bottom.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, p)
    return modes
