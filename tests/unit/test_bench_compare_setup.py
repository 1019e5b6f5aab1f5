"""bench.compare says which setup fields changed between two results (their measured records,
vfleet/clients/measured.py): tests/unit/data/bench/measured_a.json and measured_b.json are two
runs through a gateway to two hosts, before and after a vLLM upgrade that also copied new
weights to lab2 only."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

from vfleet.clients.bench import compare as cmp

DATA = Path(__file__).parent / "data" / "bench"
A, B = cmp.load(str(DATA / "measured_a.json")), cmp.load(str(DATA / "measured_b.json"))


def test_a_change_on_every_host_is_said_once_and_one_on_some_hosts_with_their_name():
    assert cmp.setup_changes(A, B) == [
        "vLLM version 0.19.1 -> 0.20.0",
        "vLLM command line changed",
        "lab2: weights copy qwen2.5-7b-3f2a9c0d1e4b -> qwen2.5-7b-77aa01bc9d2e",
    ]
    assert cmp.setup_line(A, B, "a.json", "b.json") == (
        "changed between the runs: vLLM version 0.19.1 -> 0.20.0, vLLM command line changed, "
        "lab2: weights copy qwen2.5-7b-3f2a9c0d1e4b -> qwen2.5-7b-77aa01bc9d2e"
    )


def test_memory_used_moves_between_runs_of_one_setup_and_is_no_change():
    assert cmp.setup_line(A, copy.deepcopy(A), "a.json", "a2.json") == "same setup"
    again = copy.deepcopy(A)
    for rec in again["measured"]["hosts"].values():
        rec["gpu_memory_used_mib"] += 512
    assert cmp.setup_line(A, again, "a.json", "a2.json") == "same setup"


def test_a_host_that_came_or_went_is_named():
    fewer = copy.deepcopy(A)
    del fewer["measured"]["hosts"]["lab2"]
    assert cmp.setup_changes(A, fewer) == ["hosts lab1, lab2 -> lab1"]


def test_one_host_records_compare_at_the_top_level():
    one_a = {"measured": A["measured"]["hosts"]["lab1"]}
    one_b = {"measured": B["measured"]["hosts"]["lab1"]}
    assert cmp.setup_changes(one_a, one_b) == ["vLLM version 0.19.1 -> 0.20.0", "vLLM command line changed"]


def test_a_result_without_a_record_is_not_called_the_same_setup():
    old = {k: v for k, v in A.items() if k != "measured"}
    assert cmp.setup_line(old, B, "old.json", "b.json") == "setup not compared: no measured record in old.json"


def test_the_command_prints_the_line():
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "vfleet.cli",
            "bench.compare",
            str(DATA / "measured_a.json"),
            str(DATA / "measured_b.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert p.returncode == 0, p.stderr
    assert "changed between the runs: vLLM version 0.19.1 -> 0.20.0, vLLM command line changed" in " ".join(
        p.stdout.split()
    )
