"""What a sweep leaves behind: the terminal table, JSON (everything), CSV (one row a level,
flat columns) and a PNG a person reads at a glance (matplotlib, Agg backend: no display):
output-token throughput, TTFT p95 and TPOT p95 (with E2E p95) against the level, the knee
marked through all of them, the SLO drawn when one was given."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from vfleet.clients.bench.stats import LATENCIES, PCTS
from vfleet.clients.verdict import ServerNumbers, Verdict, verdict

CSV_FIXED = (
    "mode",
    "value",
    "requests",
    "completed",
    "failed",
    "errors",
    "duration_s",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_prompt_tokens",
    "mean_output_tokens",
    "mean_inflight",
)
CSV_SERVER = ("running_max", "running_mean", "waiting_max", "waiting_mean", "kv_cache_usage_max", "preemptions")


def csv_columns() -> list[str]:
    cols = list(CSV_FIXED)
    for lat in LATENCIES:
        cols += [f"{lat[:-3]}_{k}_ms" for k in ("mean", *[f"p{p}" for p in PCTS])]
    cols += [f"server_{k}" for k in CSV_SERVER]
    return cols + ["verdict"]


def level_numbers(level: dict[str, Any], before: dict[str, Any] | None) -> ServerNumbers:
    """A level as the verdict reads it: the server's running (its peak: the most the engine
    took on), waiting (its mean: "stays above 0", not a blip), KV cache peak and preemptions
    during the level, TTFT p95 against the level below (same mode), max_num_seqs of the
    hosts behind the target when the inventory sets it, and what the client kept in flight."""
    s = level.get("server") or {}

    def ttft(lv: dict[str, Any] | None) -> float | None:
        p95 = ((lv or {}).get("ttft_ms") or {}).get("p95")
        return None if p95 is None else p95 / 1000

    return ServerNumbers(
        running=s.get("running_max"),
        waiting=s.get("waiting_mean"),
        kv_cache_usage=s.get("kv_cache_usage_max"),
        preemptions=s.get("preemptions"),
        ttft_s=ttft(level),
        ttft_before_s=ttft(before),
        max_num_seqs=level.get("max_num_seqs"),
        offered=level.get("mean_inflight"),
    )


def level_verdicts(levels: list[dict[str, Any]]) -> list[Verdict]:
    """The bottleneck verdict of each level (vfleet/clients/verdict.py), in the levels' order;
    "the level below" is the next lower value of the same mode, wherever it ran."""
    out = []
    for lv in levels:
        lower = [x for x in levels if x["mode"] == lv["mode"] and x["value"] < lv["value"]]
        before = max(lower, key=lambda x: x["value"]) if lower else None
        out.append(verdict(level_numbers(lv, before)))
    return out


def csv_row(level: dict[str, Any], judged: Verdict | None = None) -> dict[str, Any]:
    row = {k: level.get(k) for k in CSV_FIXED}
    row["errors"] = ";".join(f"{k}={v}" for k, v in (level.get("errors") or {}).items())
    for lat in LATENCIES:
        d = level.get(lat) or {}
        for k in ("mean", *[f"p{p}" for p in PCTS]):
            row[f"{lat[:-3]}_{k}_ms"] = d.get(k)
    server = level.get("server") or {}
    for k in CSV_SERVER:
        row[f"server_{k}"] = server.get(k)
    row["verdict"] = judged.line() if judged else None
    return row


def write_csv(path: str | Path, levels: list[dict[str, Any]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=csv_columns())
    w.writeheader()
    for lv, judged in zip(levels, level_verdicts(levels)):
        w.writerow({k: ("" if v is None else v) for k, v in csv_row(lv, judged).items()})
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
    """One row a level; the last column is its bottleneck verdict with the numbers it read."""
    t = Table(title=title or None, title_justify="left")
    for h in (
        "level",
        "ok/sent",
        "errors",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p95",
        "TPOT p50",
        "TPOT p95",
        "ITL p95",
        "E2E p95",
        "running",
        "waiting",
        "KV max",
        "preempt",
        "verdict",
    ):
        t.add_column(h, justify="left" if h in ("level", "errors", "verdict") else "right")
    for lv, judged in zip(levels, level_verdicts(levels)):
        s = lv.get("server") or {}
        kv = s.get("kv_cache_usage_max")
        t.add_row(
            lv["label"],
            f"{lv['completed']}/{lv['requests']}",
            ", ".join(f"{k} {v}" for k, v in lv["errors"].items()) or "-",
            _fmt(lv["request_throughput"], 2),
            _fmt(lv["output_throughput"], 1),
            _fmt(lv["ttft_ms"]["p50"]),
            _fmt(lv["ttft_ms"]["p95"]),
            _fmt(lv["tpot_ms"]["p50"], 1),
            _fmt(lv["tpot_ms"]["p95"], 1),
            _fmt(lv["itl_ms"]["p95"], 1),
            _fmt(lv["e2e_ms"]["p95"]),
            _fmt(s.get("running_max")),
            _fmt(s.get("waiting_max")),
            "-" if kv is None else f"{kv:.0%}",
            _fmt(s.get("preemptions")),
            f"{judged.kind} ({judged.because()})" if judged.numbers else judged.kind,
        )
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
        console.print(
            f"  suggested max_num_seqs per vLLM host: [bold]{a['suggested_max_num_seqs']}[/]{bound}; "
            f"client concurrency limit: [bold]{a['suggested_client_concurrency']}[/]"
            + (
                f" (the server ran at most {a['server_running_max_at_knee']:g} at once per host there)"
                if "server_running_max_at_knee" in a
                else ""
            )
        )
        if "slo" in a:
            slo = a["slo"]
            want = ", ".join(
                f"{k} <= {slo[k + '_p95_s']:g} s" for k in ("ttft", "e2e") if slo[k + "_p95_s"] is not None
            )
            best = slo["highest_level"]
            console.print(
                f"  SLO p95 {want}: "
                + (
                    f"highest level meeting it: [bold]{best:g}{unit}[/]"
                    if best is not None
                    else "[red]no level meets it[/]"
                )
            )


def write_png(path: str | Path, result: dict[str, Any]) -> list[str]:
    """One column per mode (concurrency, rate), three panels sharing the x axis: output
    tokens/s (each point labelled with its requests/s), TTFT p95 (and p50) with the TTFT SLO,
    TPOT p95 with E2E p95 on a second axis and the E2E SLO. The knee is a dashed line through
    all three. Returns the modes drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [m for m in ("concurrency", "rate") if any(x["mode"] == m for x in result["levels"])]
    fig, axes = plt.subplots(
        3,
        len(modes),
        figsize=(7.5 * len(modes), 10),
        squeeze=False,
        sharex="col",
        gridspec_kw={"height_ratios": [1.2, 1, 1]},
    )
    slo = (result.get("settings") or {}).get("slo") or {}
    for col, mode in enumerate(modes):
        lv = sorted((x for x in result["levels"] if x["mode"] == mode), key=lambda x: x["value"])
        xs = [x["value"] for x in lv]
        thr, ttft, tpot = axes[0][col], axes[1][col], axes[2][col]

        def ms(key: str, p: str = "p95") -> list[float]:
            return [float("nan") if x[key][p] is None else x[key][p] for x in lv]

        thr.plot(xs, [x["output_throughput"] for x in lv], "o-", color="tab:blue", lw=2, label="output tokens/s")
        for x in lv:
            thr.annotate(
                f"{x['output_throughput']:,.0f}\n{x['request_throughput']:.2f} req/s",
                (x["value"], x["output_throughput"]),
                textcoords="offset points",
                xytext=(0, 8),
                ha="center",
                fontsize=7.5,
                color="tab:blue",
            )
        thr.set_ylabel("output tokens/s")
        thr.set_ylim(0, max([x["output_throughput"] for x in lv] + [1]) * 1.3)
        thr.set_title(
            f"{result.get('model', '')} via {result.get('target', {}).get('url', '')}: "
            f"{'concurrency' if mode == 'concurrency' else 'Poisson rate'} sweep",
            fontsize=10,
        )

        ttft.plot(xs, ms("ttft_ms"), "o-", color="tab:red", lw=2, label="TTFT p95")
        ttft.plot(xs, ms("ttft_ms", "p50"), "o:", color="tab:red", alpha=0.5, label="TTFT p50")
        if slo.get("ttft_p95_s"):
            ttft.axhline(slo["ttft_p95_s"] * 1000, color="tab:red", ls="--", lw=0.8, label="TTFT p95 target")
        ttft.set_ylabel("TTFT (ms)")
        ttft.set_ylim(bottom=0)

        tpot.plot(xs, ms("tpot_ms"), "d-", color="tab:orange", lw=2, label="TPOT p95")
        tpot.set_ylabel("TPOT p95 (ms/token)", color="tab:orange")
        tpot.set_ylim(bottom=0)
        e2e = tpot.twinx()
        e2e.plot(xs, ms("e2e_ms"), "^:", color="tab:purple", alpha=0.7, label="E2E p95")
        if slo.get("e2e_p95_s"):
            e2e.axhline(slo["e2e_p95_s"] * 1000, color="tab:purple", ls="--", lw=0.8, label="E2E p95 target")
        e2e.set_ylabel("E2E p95 (ms)", color="tab:purple")
        e2e.set_ylim(bottom=0)
        tpot.set_xlabel("concurrent requests" if mode == "concurrency" else "requests/s offered (Poisson)")
        for ax in (thr, ttft, tpot):
            ax.grid(True, alpha=0.3)
        if len(xs) > 2 and min(xs) > 0 and max(xs) / min(xs) >= 8:
            thr.set_xscale("log", base=2)
        thr.set_xticks(xs, [f"{x:g}" for x in xs])
        a = (result.get("analysis") or {}).get(mode) or {}
        knee = a.get("knee") or {}
        if knee.get("found"):
            for ax in (thr, ttft, tpot):
                ax.axvline(knee["value"], color="black", ls="--", lw=1.2)
            thr.text(
                0.02,
                0.95,
                f"knee at {knee['value']:g}: suggested max_num_seqs {a.get('suggested_max_num_seqs')}"
                f" per host, client limit {a.get('suggested_client_concurrency')}",
                transform=thr.transAxes,
                va="top",
                fontsize=9,
                fontweight="bold",
            )
        elif knee.get("value") is not None:
            thr.text(
                0.02,
                0.95,
                f"no knee up to {knee['value']:g}: throughput still grows",
                transform=thr.transAxes,
                va="top",
                fontsize=9,
            )
        best = (a.get("slo") or {}).get("highest_level", "none")
        if best != "none":
            thr.text(
                0.02,
                0.86,
                "target met up to: " + ("no level" if best is None else f"{best:g}"),
                transform=thr.transAxes,
                va="top",
                fontsize=9,
                color="darkgreen",
            )
        thr.legend(loc="lower right", fontsize=8)
        ttft.legend(loc="upper left", fontsize=8)
        h1, l1 = tpot.get_legend_handles_labels()
        h2, l2 = e2e.get_legend_handles_labels()
        tpot.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    fig.tight_layout()
    save_png(fig, path)
    return modes


def save_png(fig: Any, path: str | Path) -> None:
    """The figure as a PNG, written whole or not at all (tmp + rename), and closed: pyplot
    keeps every open figure alive."""
    import matplotlib.pyplot as plt

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, p)
