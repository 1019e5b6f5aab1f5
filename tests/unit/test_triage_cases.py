"""The triage classifier on real logs from vLLM's issues (tests/unit/data/triage/cases.yaml
names each log's source): the right class, and the right deciding lines, in order, with their
numbers in the file. Adding a case is adding a log and a row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from vfleet.roles.triage._classes import CLASSES
from vfleet.roles.triage._classify import classify_lines
from vfleet.roles.triage._logfile import read_log

DATA = Path(__file__).parent / "data" / "triage"
CASES: list[dict[str, Any]] = yaml.safe_load((DATA / "cases.yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["log"])
def test_each_real_log_gets_its_class_and_deciding_lines(case: dict[str, Any]) -> None:
    text = read_log(DATA / case["log"])
    verdict = classify_lines(text.lines, first_line=text.first_line)
    assert verdict.cls.id == case["class"], [(ln.number, ln.text[:80]) for ln in verdict.lines]
    got = [(ln.number, ln.text) for ln in verdict.lines]
    assert [n for n, _ in got] == [n for n, _ in case["lines"]]
    for (_, text_got), (_, piece) in zip(got, case["lines"]):
        assert piece in text_got
    for label, value in (case.get("numbers") or {}).items():
        assert verdict.numbers.get(label) == str(value), verdict.numbers
    if "where" in case:
        assert verdict.where == case["where"]


def test_every_class_has_real_logs_and_memory_and_nccl_have_several() -> None:
    per_class: dict[str, int] = {}
    for case in CASES:
        assert case["source"].startswith("https://github.com/"), case["log"]
        assert (DATA / case["log"]).is_file()
        per_class[case["class"]] = per_class.get(case["class"], 0) + 1
    assert set(per_class) == {c.id for c in CLASSES}
    for many in ("oom-loading", "oom-after-loading", "kv-cache-too-small", "nccl"):
        assert per_class[many] >= 2, many


def test_the_first_fatal_signal_decides_and_later_ones_are_consequences() -> None:
    """A rank that ran out of memory leaves the others waiting in NCCL: the OOM comes first
    and decides; with the order reversed, NCCL does."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    nccl = "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)"
    assert classify_lines(["Starting to load model x", oom, nccl]).cls.id == "oom-loading"
    assert classify_lines([nccl, oom]).cls.id == "nccl"


def test_a_hang_warning_decides_only_without_a_fatal_line() -> None:
    hang = "WARNING shm_broadcast.py:396] No available block found in 60 second."
    port = "OSError: [Errno 98] Address already in use"
    assert classify_lines([hang]).cls.id == "nccl"
    assert classify_lines([hang, port]).cls.id == "port-in-use"


def test_startup_config_naming_cudagraphs_does_not_make_a_loading_oom_after_loading() -> None:
    """vLLM's start line lists compilation settings (cudagraph sizes) before any weight is
    read: only frames and progress lines tell the phase."""
    lines = [
        "INFO [core.py:71] Initializing a V1 LLM engine with config: compilation_config="
        '{"cudagraph_capture_sizes": [8, 4, 2, 1]}',
        "INFO [gpu_model_runner.py:1] Starting to load model /srv/models/m...",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
    ]
    verdict = classify_lines(lines, first_line=10)
    assert verdict.cls.id == "oom-loading"
    assert [ln.number for ln in verdict.lines] == [12, 11]


def test_nccl_verdict_shows_the_settings_it_asks_about() -> None:
    lines = [
        "export NCCL_P2P_DISABLE=1",
        "NCCL version 2.21.5+cuda12.4",
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    ]
    verdict = classify_lines(lines)
    assert [ln.number for ln in verdict.lines] == [3, 1, 2]
    assert "NCCL_P2P_DISABLE" in verdict.cls.next_step and "/dev/shm" in verdict.cls.next_step


def test_next_steps_name_inventory_variables_that_exist() -> None:
    """The steps tell the operator which inventory variable to turn: each must be one."""
    from vfleet.config.variables import VARIABLES

    names = {v.name for v in VARIABLES}
    steps = {c.id: c.next_step + " " + c.hint for c in CLASSES}
    for class_id, wanted in {
        "oom-loading": ["tensor_parallel_size", "quantization"],
        "oom-after-loading": ["gpu_memory_utilization", "max_model_len"],
        "kv-cache-too-small": ["max_model_len", "gpu_memory_utilization"],
        "nccl": ["nccl_env"],
        "chat-template": ["chat_template", "serve_completions_only"],
        "port-in-use": ["vllm_port"],
        "no-kernel": ["vllm_version", "dtype"],
    }.items():
        for name in wanted:
            assert name in names and name in steps[class_id], (class_id, name)
    after = steps["oom-after-loading"]
    assert after.index("gpu_memory_utilization") < after.index("max_model_len")  # the order: utilization first
    assert "0.02-0.05" in after


def test_the_scan_finds_each_line_holding_a_word_once_in_order() -> None:
    from vfleet.roles.triage._scan import LowerText

    lines = ["NCCL error and nccl again", "nothing", "", "Watchdog NCCL", "watchdog", "last nccl"]
    assert list(LowerText(lines).lines_with(("nccl", "watchdog"))) == [0, 3, 4, 5]
    assert list(LowerText(lines).lines_with(("absent",))) == []
    assert list(LowerText([]).lines_with(("x",))) == []
