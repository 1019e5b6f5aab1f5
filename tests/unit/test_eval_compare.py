"""eval.compare's verdict at its boundaries, the items it names, and the gate file."""

from __future__ import annotations

import pytest

from tests.unit.test_eval_report import item, report
from vfleet.clients.eval.compare import Thresholds, compare
from vfleet.clients.eval.gate_config import load_gate
from vfleet.engine.errors import VfleetError


def scored(n_pass: int, n: int = 100, divergence: float | None = None, **measured):
    return report(*(item(f"i{k}", k < n_pass, divergence) for k in range(n)), **measured)


@pytest.mark.parametrize("b_pass,passed", [(96, True), (93, True), (92, False)])
def test_score_drop_at_the_threshold_passes_and_over_it_fails(b_pass, passed):
    c = compare(scored(96), scored(b_pass), Thresholds(max_score_drop=0.03))
    assert c.passed is passed and c.score_drop == pytest.approx((96 - b_pass) / 100)
    assert c.line().startswith(f"eval gate: {'PASSED' if passed else 'FAILED'}: score 0.96 -> {b_pass / 100:.2f}")


@pytest.mark.parametrize("div,passed", [(0.05, True), (0.10, True), (0.1001, False)])
def test_divergence_at_the_threshold_passes_and_over_it_fails(div, passed):
    c = compare(scored(50), scored(50, divergence=div), Thresholds())
    assert c.passed is passed and c.divergence == pytest.approx(div)
    assert ("> 0.10 nats/token" in c.line()) is not passed


def test_regressed_items_are_named_worst_first_and_setup_changes_listed():
    a = report(
        item("capital-france", True),
        item("add-small", True),
        item("x", True),
        item("y", True),
        vllm_version="0.19.1",
        dtype="bfloat16",
    )
    b = report(
        item("capital-france", False),
        item("add-small", False, error="HTTP 400: too long"),
        item("x", True, 0.9),
        item("y", True, 0.4),
        vllm_version="0.20.0",
        dtype="bfloat16",
    )
    c = compare(a, b, Thresholds())
    assert not c.passed
    assert c.regressed[0].startswith("capital-france: passed -> failed (reply 'reply capital-france')")
    assert c.regressed[1] == "add-small: passed -> failed (HTTP 400: too long)"
    assert c.regressed[2:] == ["x: divergence 0.900 nats/token", "y: divergence 0.400 nats/token"]
    assert c.measured_changes == ["vLLM version 0.19.1 -> 0.20.0"]
    assert c.line().endswith("regressed: capital-france, add-small (+2 more)")


def test_without_a_divergence_the_line_says_how_to_get_one():
    c = compare(scored(10, 10), scored(10, 10), Thresholds())
    assert c.passed and "run B with --reference A" in c.line()


def test_gate_file(tmp_path):
    p = tmp_path / "eval.yaml"
    p.write_text("evalset: sets/mine.jsonl\nmax_score_drop: 0.05\nmax_divergence: 0.2\nseed: 3\nmax_tokens: 32\n")
    g = load_gate(str(p))
    assert g.evalset == str(tmp_path / "sets" / "mine.jsonl") and g.baseline is None
    assert g.thresholds == Thresholds(0.05, 0.2) and (g.settings.seed, g.settings.max_tokens) == (3, 32)
    assert load_gate(str(tmp_path / "eval.yaml")).settings.concurrency == 1
    p.write_text("max_score_dorp: 0.05\n")
    with pytest.raises(VfleetError, match=r"eval.yaml: unknown key 'max_score_dorp'; the keys are evalset"):
        load_gate(str(p))
    p.write_text("max_score_drop: lots\n")
    with pytest.raises(VfleetError, match=r"eval.yaml: key 'max_score_drop': 'lots' is not of type 'number'"):
        load_gate(str(p))
    for key in ("max_divergence", "max_score_drop"):
        for value in (".nan", ".inf"):
            p.write_text(f"{key}: {value}\n")
            with pytest.raises(VfleetError, match=rf"eval.yaml: key '{key}': (nan|inf) is not a finite number"):
                load_gate(str(p))
    p.write_text("- a list\n")
    with pytest.raises(VfleetError, match="a gate file is a mapping"):
        load_gate(str(p))
    p.write_text("a: [unclosed\n")
    with pytest.raises(VfleetError, match="not YAML"):
        load_gate(str(p))


def referenced(n: int, divergences: list[float | None], errors: dict[int, str] | None = None, **more):
    """B run against A over n items: item k has divergences[k] (scored_tokens 0 when None)."""
    errors = errors or {}
    return report(
        *(
            item(f"i{k}", True, d, scored_tokens=0 if d is None else 5, error=errors.get(k))
            for k, d in enumerate(divergences)
        ),
        **more,
    )


@pytest.mark.parametrize(
    "b,words",
    [
        (referenced(4, [None] * 4), "divergence not measured: no item of A could be scored under B"),
        (
            referenced(4, [0.01, 0.01, None, None], {2: "scoring the reference reply: HTTP 400: no prompt_logprobs"}),
            "divergence not measured on 1 item(s): scoring failed (first: i2)",
        ),
        (referenced(4, [0.01, None, None, None]), "divergence measured on only 1 of 4 item(s) (fewer than half)"),
    ],
)
def test_a_divergence_not_measured_fails_when_b_ran_against_a(b, words):
    a = scored(4, 4)
    c = compare(a, b, Thresholds(), reference_required=True)
    assert not c.passed and words in c.line() and c.line().startswith("eval gate: FAILED")
    assert not compare(a, b, Thresholds()).passed  # B carries divergence fields: it ran against A


def test_the_gate_requires_a_divergence_and_half_the_items_are_enough():
    a = scored(4, 4)
    assert not compare(a, scored(4, 4), Thresholds(), reference_required=True).passed
    assert compare(a, referenced(4, [0.01, 0.02, None, None]), Thresholds(), reference_required=True).passed


def test_the_divergence_judged_is_absolute_so_a_sharper_candidate_fails_too():
    a = scored(4, 4)
    b = report(*(item(f"i{k}", True, 0.3, scored_tokens=5, divergence_signed=-0.3) for k in range(4)))
    c = compare(a, b, Thresholds())
    assert not c.passed and c.divergence == pytest.approx(0.3) and c.divergence_signed == pytest.approx(-0.3)
