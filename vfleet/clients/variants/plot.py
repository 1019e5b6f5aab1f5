"""The variants' PNG: four bar panels a person reads at a glance, one bar a variant in the
table's order: memory (planned and GPU used side by side), output tokens/s and TTFT p95 at the
compared level, and the eval score with the lowest score the threshold accepts drawn across it.
Bars are coloured by verdict: grey the baseline, green accepted, red rejected."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Sequence

from vfleet.clients.bench.output import save_png
from vfleet.clients.variants.inputs import Variant
from vfleet.clients.variants.judge import Judgement

COLOURS = {None: "tab:gray", True: "tab:green", False: "tab:red"}


def _bars(
    ax: Any, xs: Sequence[float], values: Sequence[float | None], colours: Sequence[str], nd: int, **style: Any
) -> None:
    """Bars with their value above them; an unknown value is an empty place labelled '-'."""
    heights = [math.nan if v is None else v for v in values]
    bars = ax.bar(xs, heights, color=colours, **style)
    ax.bar_label(bars, labels=["-" if v is None else f"{v:,.{nd}f}" for v in values], fontsize=8, padding=2)


def write_png(
    path: str | Path, variants: Sequence[Variant], level: int, judgements: Sequence[Judgement], max_score_drop: float
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    accepted = {j.variant: j.accepted for j in judgements}
    colours = [COLOURS[accepted.get(v.name)] for v in variants]
    xs = list(range(len(variants)))
    fig, axes = plt.subplots(2, 2, figsize=(max(9.0, 2.2 * len(variants) + 4), 8))
    mem, thr, ttft, score = axes[0][0], axes[0][1], axes[1][0], axes[1][1]

    _bars(mem, [x - 0.2 for x in xs], [v.planned_weights_gib for v in variants], colours, 1, width=0.4, alpha=0.55)
    _bars(
        mem,
        [x + 0.2 for x in xs],
        [v.gpu_memory_used_gib for v in variants],
        colours,
        1,
        width=0.4,
        hatch="//",
        edgecolor="white",
    )
    mem.set_title("memory (GiB): planned weights (light), GPU used (hatched)", fontsize=10)

    panels: list[tuple[Any, str, Callable[[Variant], float | None], int]] = [
        (thr, f"output tokens/s at concurrency {level}", lambda v: v.output_throughput, 0),
        (ttft, f"TTFT p95 (ms) at concurrency {level}", lambda v: v.ttft_p95_ms, 0),
        (score, "eval score (passed / scored)", lambda v: v.score, 3),
    ]
    for ax, title, get, nd in panels:
        _bars(ax, xs, [get(v) for v in variants], colours, nd, width=0.6)
        ax.set_title(title, fontsize=10)
    floor = variants[0].score - max_score_drop
    score.axhline(floor, color="black", ls="--", lw=1, label=f"lowest accepted: {floor:.3f} (drop {max_score_drop:g})")
    score.set_ylim(0, 1.15)
    score.legend(loc="lower right", fontsize=8)
    for ax in (mem, thr, ttft, score):
        ax.set_xticks(xs, [f"{v.name}\n{v.precision}" for v in variants], fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        if ax is not score:
            ax.set_ylim(bottom=0)
            ax.margins(y=0.15)
    fig.suptitle(f"variants against {variants[0].name} (grey): green accepted, red rejected", fontsize=11)
    fig.tight_layout()
    save_png(fig, path)
