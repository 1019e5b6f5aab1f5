"""`vfleet eval.variants`: bf16 against FP8, AWQ and GPTQ from bench results and eval reports
(tests/unit/data/variants/: the bench results are the real H200 Llama-3.1-8B sweep of
docs/evidence/h200-e2e, scaled per variant, each with its `measured` record; the eval reports
have the built-in set's 24 items in the shape EvalReport.to_dict() writes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from tests.unit.cli_run import vfleet_in_process
from vfleet.clients.variants.inputs import VariantSpec, load_variants
from vfleet.clients.variants.judge import judge_all, warnings

DATA = Path(__file__).parent / "data" / "variants"


def spec(name: str, bench: str | Path | None = None, report: str | Path | None = None) -> str:
    return f"{name}={bench or DATA / f'{name}.bench.json'},{report or DATA / f'{name}.eval.json'}"


def run(*variants: str, extra: tuple[str, ...] = ()) -> int:
    return vfleet_in_process("eval.variants", *[w for v in variants for w in ("--variant", v)], *extra)


def test_four_variants_table_png_json_and_verdicts(tmp_path, capsys):
    rc = run(spec("bf16"), spec("fp8"), spec("awq"), spec("gptq"), extra=("--out", str(tmp_path), "--name", "q"))
    out = capsys.readouterr().out
    assert rc == 1  # awq dropped 1 item of 24 more than bf16
    assert "variants at concurrency 128; baseline bf16" in out  # gptq's c=256 lost requests
    assert (
        "fp8: score 0.958 vs 0.958 (drop 0.000 <= 0.03), planned weights 8.5 vs 15.0 GiB (-43%), "
        "throughput +12%, TTFT p95 -5%: ACCEPTED"
    ) in out
    assert "awq: score 0.917 vs 0.958 (drop 0.042 > 0.03)" in out and out.count("REJECTED") == 2  # table + line
    assert "gptq: differs from bf16 in more than dtype, quantization and weights: vLLM version 0.20.0 -> 0.19.1" in out
    assert "fp8: differs" not in out and "awq: differs" not in out  # other weights and dtype are the variant
    table = json.loads((tmp_path / "q.json").read_text())
    assert table["task"] == "eval.variants" and table["level"] == {"mode": "concurrency", "value": 128}
    assert [r["verdict"] for r in table["variants"]] == [None, "accepted", "rejected", "accepted"]
    fp8 = table["variants"][1]
    assert fp8["quantization"] == "fp8" and fp8["planned_weights_gib"] == 8.49 and fp8["passed"] == 23
    assert fp8["output_throughput"] == pytest.approx(9794.8684 * 1.12, rel=1e-4)
    assert fp8["divergence"] == pytest.approx(0.02, abs=0.01) and table["variants"][0]["divergence"] is None
    assert table["accepted"] is False and len(table["verdicts"]) == 3 and len(table["warnings"]) == 1
    with Image.open(tmp_path / "q.png") as png:
        assert png.format == "PNG" and png.size[0] > 800 and png.size[1] > 600
        assert len(png.getcolors(1 << 20)) > 50  # drawn, not a blank canvas


def test_all_accepted_exits_0_at_the_highest_level_both_completed(tmp_path, capsys):
    assert run(spec("bf16"), spec("fp8"), extra=("--out", str(tmp_path))) == 0
    out = capsys.readouterr().out
    assert "variants at concurrency 256" in out and "ACCEPTED" in out and "warning" not in out
    assert (tmp_path / "variants.json").exists() and (tmp_path / "variants.png").stat().st_size > 10_000


def test_level_chosen_by_hand_and_threshold_raised(tmp_path, capsys):
    assert (
        run(spec("bf16"), spec("awq"), extra=("--out", str(tmp_path), "--level", "16", "--max-score-drop", "0.05")) == 0
    )
    out = capsys.readouterr().out
    assert "variants at concurrency 16" in out and "awq: score 0.917 vs 0.958 (drop 0.042 <= 0.05)" in out
    assert json.loads((tmp_path / "variants.json").read_text())["variants"][0]["output_throughput"] == 2729.7212


def report_with(tmp_path: Path, name: str, passed: int, of: int = 100) -> Path:
    """An eval report of `of` items of which `passed` passed (the data's first item repeated)."""
    data = json.loads((DATA / "bf16.eval.json").read_text())
    item = data["items"][0]
    data["items"] = [item | {"id": f"q{i}", "passed": i < passed} for i in range(of)]
    path = tmp_path / f"{name}.eval.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "passed, max_drop, accepted",
    [
        (97, 0.03, True),  # exactly 3 points: accepted (1.0 - 0.97 is 0.030000000000000027 in floats)
        (96, 0.03, False),  # one item more: rejected
        (100, 0.0, True),  # no drop allowed, none happened
        (99, 0.0, False),
    ],
)
def test_verdict_boundaries(tmp_path, passed, max_drop, accepted):
    base = VariantSpec("bf16", str(DATA / "bf16.bench.json"), str(report_with(tmp_path, "base", 100)))
    other = VariantSpec("fp8", str(DATA / "fp8.bench.json"), str(report_with(tmp_path, "other", passed)))
    _, rows = load_variants([base, other], None)
    (j,) = judge_all(rows, max_drop)
    assert j.accepted is accepted and j.line.endswith("ACCEPTED" if accepted else "REJECTED")
    assert j.score_drop == pytest.approx((100 - passed) / 100)


def test_bench_and_eval_of_other_setups_are_named(tmp_path):
    data = json.loads((DATA / "fp8.eval.json").read_text())
    data["measured"]["vllm_version"] = "0.19.1"
    data["measured"]["gpu_model"] = "NVIDIA H100 80GB HBM3"
    path = tmp_path / "fp8.eval.json"
    path.write_text(json.dumps(data))
    _, rows = load_variants(
        [
            VariantSpec("bf16", str(DATA / "bf16.bench.json"), str(DATA / "bf16.eval.json")),
            VariantSpec("fp8", str(DATA / "fp8.bench.json"), str(path)),
        ],
        None,
    )
    assert warnings(rows) == [
        f"fp8: the bench ({DATA / 'fp8.bench.json'}) and the eval report ({path}) measured "
        "different setups: vLLM version 0.20.0 -> 0.19.1; GPU model NVIDIA H200 -> NVIDIA H100 "
        "80GB HBM3"
    ]


def test_a_bench_without_measured_takes_the_eval_reports(tmp_path):
    """Bench results written before benches recorded `measured` still compare: the memory comes
    from the eval report of the same variant."""
    bench = json.loads((DATA / "fp8.bench.json").read_text())
    del bench["measured"]
    (tmp_path / "fp8.bench.json").write_text(json.dumps(bench))
    _, rows = load_variants(
        [
            VariantSpec("bf16", str(DATA / "bf16.bench.json"), str(DATA / "bf16.eval.json")),
            VariantSpec("fp8", str(tmp_path / "fp8.bench.json"), str(DATA / "fp8.eval.json")),
        ],
        None,
    )
    assert rows[1].planned_weights_gib == 8.49 and rows[1].precision == "bfloat16 / fp8" and not rows[1].mismatch
    assert "planned weights 8.5 vs 15.0 GiB (-43%)" in judge_all(rows, 0.03)[0].line


def write_bad_files(tmp: Path) -> None:
    (tmp / "notjson.json").write_text("{levels: [")
    bench = json.loads((DATA / "fp8.bench.json").read_text())
    bench["measured"]["gpu_memory_used_mib"] = "129418 MiB"
    (tmp / "text-memory.json").write_text(json.dumps(bench))
    no_expectations = json.loads((DATA / "fp8.eval.json").read_text())
    for item in no_expectations["items"]:
        item["passed"] = None
    (tmp / "free.eval.json").write_text(json.dumps(no_expectations))
    tampered = json.loads((DATA / "fp8.eval.json").read_text())
    tampered["items"][0]["reply"] = 5
    (tmp / "tampered.eval.json").write_text(json.dumps(tampered))


def bad_inputs(tmp: Path) -> dict[str, tuple[list[str], tuple[str, ...], str]]:
    """case -> (--variant values, other flags, what the one error line must say); the files
    under `tmp` are write_bad_files'."""
    missing = tmp / "nope.json"
    return {
        "missing file": (
            [spec("bf16"), spec("fp8", bench=missing)],
            (),
            f"--variant fp8: {missing}: no such file; give the NAME.json that `vfleet bench",
        ),
        "not JSON": (
            [spec("bf16"), spec("fp8", report=tmp / "notjson.json")],
            (),
            f"--variant fp8: {tmp / 'notjson.json'}: not valid JSON",
        ),
        "files swapped": (
            [spec("bf16"), f"fp8={DATA / 'fp8.eval.json'},{DATA / 'fp8.bench.json'}"],
            (),
            f"--variant fp8: {DATA / 'fp8.eval.json'}: not a `vfleet bench` result",
        ),
        "bench as eval": (
            [spec("bf16"), spec("fp8", report=DATA / "fp8.bench.json")],
            (),
            f"--variant fp8: {DATA / 'fp8.bench.json'}: a `vfleet bench` result, not a `vfleet eval` "
            "report; give a report written by `vfleet eval`; the order is NAME=BENCH.json,EVAL.json",
        ),
        "eval without expectations": (
            [spec("bf16"), spec("fp8", report=tmp / "free.eval.json")],
            (),
            "no item has an expectation (answer, regex or schema)",
        ),
        "tampered eval": (
            [spec("bf16"), spec("fp8", report=tmp / "tampered.eval.json")],
            (),
            f"--variant fp8: {tmp / 'tampered.eval.json'}: not a `vfleet eval` report: items/0/reply: "
            "expected string, found an integer",
        ),
        "memory as text": (
            [spec("bf16"), spec("fp8", bench=tmp / "text-memory.json")],
            (),
            f"--variant fp8: {tmp / 'text-memory.json'}: measured: key 'gpu_memory_used_mib': "
            "expected a positive number",
        ),
        "named twice": ([spec("bf16"), spec("bf16")], (), "--variant bf16 is given twice"),
        "one variant": ([spec("bf16")], (), "give --variant NAME=BENCH.json,EVAL.json at least twice"),
        "no comma": ([spec("bf16"), f"fp8={DATA / 'fp8.bench.json'}"], (), "expected NAME=BENCH.json,EVAL.json"),
        "level missing": (
            [spec("bf16"), spec("fp8")],
            ("--level", "32"),
            f"--level 32: {DATA / 'bf16.bench.json'} (variant bf16) has no concurrency level 32 "
            "(it ran 1, 4, 16, 64, 128, 256)",
        ),
        "level not a number": ([spec("bf16"), spec("fp8")], ("--level", "high"), "--level high: expected"),
        "drop out of range": (
            [spec("bf16"), spec("fp8")],
            ("--max-score-drop", "3"),
            "--max-score-drop 3: expected a fraction from 0 to 1",
        ),
    }


@pytest.mark.parametrize("case", list(bad_inputs(Path("/nonexistent"))))
def test_bad_input_is_one_line_naming_the_file_and_exit_2(tmp_path, capsys, case):
    write_bad_files(tmp_path)
    variants, flags, says = bad_inputs(tmp_path)[case]
    assert run(*variants, extra=(*flags, "--out", str(tmp_path / "out"))) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert says in err, err
    assert not (tmp_path / "out").exists()  # nothing written on bad input
