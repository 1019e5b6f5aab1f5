"""The bottleneck verdict (vfleet/clients/verdict.py), case by case from
tests/unit/data/verdict/cases.yaml: each rule, and each threshold from both sides."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vfleet.clients import verdict as v

CASES = yaml.safe_load((Path(__file__).parent / "data" / "verdict" / "cases.yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_verdict_of_each_case(case):
    got = v.verdict(v.ServerNumbers(**case["numbers"]))
    assert got.kind == case["verdict"]
    # every verdict names only numbers it was given
    assert set(got.numbers) <= set(case["numbers"])


def test_a_verdict_names_the_numbers_it_read_and_the_fix():
    got = v.verdict(v.ServerNumbers(running=40, waiting=12, kv_cache_usage=0.97))
    assert got.line() == (
        "memory-bound (waiting 12, running 40, KV 97%): requests wait for KV cache: lower "
        "max_model_len, quantize (weights or kv_cache_dtype), or add GPUs "
        "(tensor_parallel_size) / hosts"
    )
    assert got.to_dict()["numbers"] == {"waiting": 12, "running": 40, "kv_cache_usage": 0.97}


def test_too_few_seqs_names_the_inventory_variable():
    got = v.verdict(v.ServerNumbers(running=16, waiting=3, kv_cache_usage=0.3, max_num_seqs=16))
    assert "max_num_seqs 16" in got.because() and "inventory variable max_num_seqs" in got.advice


def test_every_verdict_has_a_text():
    kinds = {v.MEMORY_BOUND, v.SEQS_TOO_SMALL, v.QUEUEING, v.UNDERFED, v.HEALTHY, v.IDLE, v.UNKNOWN}
    assert kinds == set(v.TEXTS)
