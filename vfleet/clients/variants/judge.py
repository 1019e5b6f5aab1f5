"""The variants against the baseline (the first): a verdict line each, the warnings about
setups that differ in more than the variant itself, the terminal table and its JSON.

The gate is the eval score only: a variant is accepted when its score is at most
`max_score_drop` below the baseline's (absolute, as `eval.compare`'s Thresholds.max_score_drop:
0.03 = 3 points). Memory, throughput and TTFT are reported, not gated: what a smaller or faster
variant is worth is the reader's call; what it may cost in answers is the threshold's.
Divergence is shown, not gated either: a quantized model diverges from the 16-bit one by
construction, the question is whether its answers still pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from rich.table import Table

from vfleet.clients.bench.compare import change
from vfleet.clients.measured import differences
from vfleet.clients.variants.inputs import Variant

DEFAULT_MAX_SCORE_DROP = 0.03
# Scores are fractions k/n: 1.0 - 0.97 is 0.030000000000000027 in floating point, and a drop of
# exactly the threshold is accepted.
EPSILON = 1e-9
# measured fields that make a variant what it is: expected to differ from the baseline
VARIANT_FIELDS = frozenset(
    {"model", "weights_version", "dtype", "quantization", "kv_cache_dtype", "vllm_argv", "planned_weights_gib"}
)


@dataclass(frozen=True)
class Judgement:
    variant: str
    accepted: bool
    score_drop: float
    line: str


def _pct(c: float | None) -> str:
    return "unknown" if c is None else "new" if c == float("inf") else f"{c:+.0%}"


def memory_phrase(base: Variant, v: Variant) -> str:
    """The planned weights when both have it (what the weights and cache are planned to take),
    else the GPU memory used, else that it is unknown."""
    for label, get in (
        ("planned weights", lambda x: x.planned_weights_gib),
        ("GPU memory used", lambda x: x.gpu_memory_used_gib),
    ):
        a, b = get(base), get(v)
        if a is not None and b is not None:
            return f"{label} {b:.1f} vs {a:.1f} GiB ({_pct(change(a, b))})"
    return "memory unknown"


def judge(base: Variant, v: Variant, max_score_drop: float) -> Judgement:
    drop = base.score - v.score
    ok = drop <= max_score_drop + EPSILON
    line = (
        f"{v.name}: score {v.score:.3f} vs {base.score:.3f} (drop {drop:.3f} {'<=' if ok else '>'} "
        f"{max_score_drop:g}), {memory_phrase(base, v)}, "
        f"throughput {_pct(change(base.output_throughput, v.output_throughput))}, "
        f"TTFT p95 {_pct(change(base.ttft_p95_ms, v.ttft_p95_ms))}: {'ACCEPTED' if ok else 'REJECTED'}"
    )
    return Judgement(v.name, ok, drop, line)


def judge_all(variants: Sequence[Variant], max_score_drop: float) -> list[Judgement]:
    return [judge(variants[0], v, max_score_drop) for v in variants[1:]]


def _setup(measured: Any) -> dict[str, Any]:
    return {k: val for k, val in dict(measured).items() if k not in VARIANT_FIELDS}


def warnings(variants: Sequence[Variant]) -> list[str]:
    """A line per variant whose setup differs from the baseline's in more than the variant
    (another vLLM version, GPU model or count), and per variant whose bench and eval were run
    against different setups: its figures are then not all of one server."""
    base = variants[0]
    out = [
        f"{v.name}: the bench ({v.bench_path}) and the eval report ({v.eval_path}) measured different setups: "
        + "; ".join(v.mismatch)
        for v in variants
        if v.mismatch
    ]
    for v in variants[1:]:
        other = differences(_setup(base.measured), _setup(v.measured))
        if other:
            out.append(
                f"{v.name}: differs from {base.name} in more than dtype, quantization and weights: "
                + "; ".join(other)
                + ": the comparison mixes those changes in"
            )
    return out


def _fmt(v: float | None, nd: int) -> str:
    return "-" if v is None else f"{v:,.{nd}f}"


def table(variants: Sequence[Variant], level: int, judgements: Sequence[Judgement]) -> Table:
    """One row a variant, the baseline first; the last column is its verdict."""
    t = Table(title=f"variants at concurrency {level}; baseline {variants[0].name}", title_justify="left")
    for h in (
        "variant",
        "dtype / quantization",
        "weights GiB",
        "GPU used GiB",
        "out tok/s",
        "TTFT p95 ms",
        "score",
        "drop",
        "divergence",
        "verdict",
    ):
        t.add_column(h, justify="left" if h in ("variant", "dtype / quantization", "verdict") else "right")
    verdicts = {j.variant: j for j in judgements}
    for v in variants:
        j = verdicts.get(v.name)
        t.add_row(
            v.name,
            v.precision,
            _fmt(v.planned_weights_gib, 1),
            _fmt(v.gpu_memory_used_gib, 1),
            _fmt(v.output_throughput, 1),
            _fmt(v.ttft_p95_ms, 0),
            f"{v.score:.3f} ({v.passed}/{v.scored})",
            "-" if j is None else f"{j.score_drop:+.3f}",
            _fmt(v.divergence, 3),
            "baseline" if j is None else "[green]ACCEPTED[/]" if j.accepted else "[red]REJECTED[/]",
        )
    return t


def result_dict(
    variants: Sequence[Variant],
    level: int,
    max_score_drop: float,
    judgements: Sequence[Judgement],
    warned: Sequence[str],
) -> dict[str, Any]:
    """The table as JSON, with the verdicts and warnings (what --out writes as NAME.json)."""
    verdicts = {j.variant: j for j in judgements}
    rows = [
        {
            "variant": v.name,
            "bench": v.bench_path,
            "eval": v.eval_path,
            "dtype": v.measured.get("dtype"),
            "quantization": v.measured.get("quantization"),
            "planned_weights_gib": v.planned_weights_gib,
            "gpu_memory_used_gib": v.gpu_memory_used_gib,
            "output_throughput": v.output_throughput,
            "ttft_p95_ms": v.ttft_p95_ms,
            "score": v.score,
            "passed": v.passed,
            "scored": v.scored,
            "score_drop": verdicts[v.name].score_drop if v.name in verdicts else None,
            "divergence": v.divergence,
            "measured": dict(v.measured),
            "verdict": None if v.name not in verdicts else "accepted" if verdicts[v.name].accepted else "rejected",
        }
        for v in variants
    ]
    return {
        "task": "eval.variants",
        "format": 1,
        "baseline": variants[0].name,
        "level": {"mode": "concurrency", "value": level},
        "max_score_drop": max_score_drop,
        "variants": rows,
        "verdicts": [j.line for j in judgements],
        "warnings": list(warned),
        "accepted": all(j.accepted for j in judgements),
    }
