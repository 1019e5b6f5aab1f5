"""`eval.compare A B` and the gate: is B (after a change) as good as A (before)?

Two figures, each with a threshold: the score drop (A's score minus B's, as a fraction: the
field's rule of thumb accepts at most 3 points for a quantized variant) and B's divergence from A
(B run with --reference A: nats/token, docs/eval.md for the noise floor). Over either, the
comparison fails and names the items that regressed: flipped from pass to fail, newly erroring,
or diverging more than the threshold, worst first.

When B was run against A (`--reference`, and always in a gate), a divergence that was not
measured fails too: otherwise a server that rejects the scoring request (no prompt logprobs,
an error) would pass on the score alone. Measured means: on at least half the items A answered,
with no item whose scoring failed."""

from __future__ import annotations

from dataclasses import dataclass, field

from vfleet.clients.eval.report import SCORING_FAILED, EvalReport
from vfleet.clients.eval.scoring import quoted
from vfleet.clients.measured import differences

EPS = 1e-9  # 0.96 - 0.93 is 0.030000000000000027: a drop equal to the threshold passes
SHOWN = 2  # regressed items named in the verdict line before "(+N more)"


@dataclass(frozen=True)
class Thresholds:
    max_score_drop: float = 0.03  # absolute drop of the score fraction (0.03 = 3 points)
    max_divergence: float = 0.10  # nats/token, mean over items


@dataclass
class Comparison:
    passed: bool
    score_a: float | None
    score_b: float | None
    score_drop: float | None
    divergence: float | None
    regressed: list[str]  # "capital-france: passed -> failed (reply 'Lyon.')", worst divergence items too
    measured_changes: list[str]  # vfleet.clients.measured.differences(a.measured, b.measured)
    thresholds: Thresholds = field(default_factory=Thresholds)
    unmeasured: str | None = None  # B ran against A yet its divergence was not measured: why (fails)
    divergence_signed: float | None = None  # informational: which way B moved (report's divergence_signed)

    @property
    def score_over(self) -> bool:
        return self.score_drop is not None and self.score_drop - self.thresholds.max_score_drop > EPS

    @property
    def divergence_over(self) -> bool:
        return self.divergence is not None and self.divergence - self.thresholds.max_divergence > EPS

    def line(self) -> str:
        """One line verdict, e.g. "eval gate: FAILED: score 0.96 -> 0.71 (drop 0.25 > 0.03);
        divergence 0.84 > 0.10 nats/token; regressed: capital-france, add-small (+3 more)"."""
        t = self.thresholds
        parts = []
        if self.score_drop is None:
            parts.append("score not comparable (no item with an expectation on one side)")
        else:
            op = ">" if self.score_over else "<="
            parts.append(
                f"score {self.score_a:.2f} -> {self.score_b:.2f} (drop {self.score_drop:.2f} {op} "
                f"{t.max_score_drop:.2f})"
            )
        if self.unmeasured:
            parts.append(self.unmeasured)
        elif self.divergence is None:
            parts.append("divergence not measured (run B with --reference A)")
        else:
            op = ">" if self.divergence_over else "<="
            parts.append(f"divergence {self.divergence:.3f} {op} {t.max_divergence:.2f} nats/token")
        if self.regressed:
            names = [r.split(":", 1)[0] for r in self.regressed]
            more = f" (+{len(names) - SHOWN} more)" if len(names) > SHOWN else ""
            parts.append(f"regressed: {', '.join(names[:SHOWN])}{more}")
        return f"eval gate: {'PASSED' if self.passed else 'FAILED'}: " + "; ".join(parts)


def regressions(a: EvalReport, b: EvalReport, thresholds: Thresholds) -> list[str]:
    """Items worse in B than in A: flipped to failed, newly erroring, then over the divergence
    threshold (worst first); one phrase each, the item id first."""
    out = []
    for ib in b.items:
        ia = a.item(ib.id)
        if ia is None:
            continue
        if ia.passed and ib.passed is False:
            out.append(f"{ib.id}: passed -> failed ({ib.error or 'reply ' + quoted(ib.reply, 30)})")
        elif ib.error and not ia.error:
            out.append(f"{ib.id}: error in B ({ib.error[:80]})")
    diverging = sorted(
        (i for i in b.items if i.divergence is not None and i.divergence - thresholds.max_divergence > EPS),
        key=lambda i: -i.divergence,
    )
    out += [
        f"{i.id}: divergence {i.divergence:.3f} nats/token"
        for i in diverging
        if not any(r.startswith(i.id + ":") for r in out)
    ]
    return out


def referenced(b: EvalReport) -> bool:
    """B was run with a reference (its settings say so, or an item carries divergence fields)."""
    return "reference" in b.settings or any(i.divergence is not None or i.scored_tokens is not None for i in b.items)


def unmeasured(a: EvalReport, b: EvalReport) -> str | None:
    """Why B's divergence from A does not count as measured (None: it does): none at all, an
    item whose scoring failed, or fewer than half of the items A answered scored."""
    answered = {i.id for i in a.items if i.token_ids and not i.error}
    failed = [i.id for i in b.items if i.error and i.error.startswith(SCORING_FAILED)]
    scored = [i for i in b.items if i.id in answered and i.divergence is not None and i.scored_tokens != 0]
    if b.divergence is None:
        return "divergence not measured: no item of A could be scored under B"
    if failed:
        return f"divergence not measured on {len(failed)} item(s): scoring failed (first: {failed[0]})"
    if 2 * len(scored) < len(answered):
        return f"divergence measured on only {len(scored)} of {len(answered)} item(s) (fewer than half)"
    return None


def compare(a: EvalReport, b: EvalReport, thresholds: Thresholds, *, reference_required: bool = False) -> Comparison:
    """A against B. `reference_required` (the gate): B must have been run against A, and its
    divergence measured; otherwise that is required only when B says it was run with one."""
    sa, sb = a.score, b.score
    drop = None if sa is None or sb is None else sa - sb
    c = Comparison(
        passed=True,
        score_a=sa,
        score_b=sb,
        score_drop=drop,
        divergence=b.divergence,
        regressed=regressions(a, b, thresholds),
        measured_changes=differences(a.measured, b.measured),
        thresholds=thresholds,
        divergence_signed=b.divergence_signed,
        unmeasured=unmeasured(a, b) if reference_required or referenced(b) else None,
    )
    c.passed = not (c.score_over or c.divergence_over or c.unmeasured)
    return c
