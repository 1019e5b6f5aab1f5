"""`vfleet bench` against the real vLLM (CPU build) of the shared deployed fleet: two short
concurrency levels through the gateway and one level straight at a host; tokens are the
server's `usage`, the server's own /metrics are sampled, and JSON, CSV and PNG are written."""

from __future__ import annotations

import csv
import json

import pytest

from tests.integration.deploy_env import vfleet
from vfleet.lab.demo import DEPLOY_VARS
from vfleet.lab.profiles import DEFAULT_PROFILE

LAB_GPU = "NVIDIA H200"  # the name in vfleet/lab/profiles/h200-1/query-gpu.csv

pytestmark = pytest.mark.integration


def test_a_sweep_through_the_gateway_writes_its_results(deployed, tmp_path):
    out = tmp_path / "bench"
    p = vfleet(
        "bench",
        "--inventory",
        str(deployed["inv"]),
        "--concurrency",
        "1,2",
        "--requests",
        "4",
        "--warmup",
        "1",
        "--input-len",
        "16",
        "--output-len",
        "8",
        "--out",
        str(out),
        "--name",
        "lab",
        "--metrics-interval",
        "0.2",
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    data = json.loads((out / "lab.json").read_text())
    levels = {lv["value"]: lv for lv in data["levels"]}
    assert sorted(levels) == [1, 2]
    for lv in levels.values():
        assert lv["completed"] == 4 and lv["failed"] == 0, lv
        assert lv["total_output_tokens"] == 32  # 4 x 8 tokens, counted by the server
        assert lv["ttft_ms"]["p50"] > 0 and lv["e2e_ms"]["p50"] >= lv["ttft_ms"]["p50"]
        assert lv["server"]["metric_names"]["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    # the hosts' own /metrics were read during each level (what they showed depends on timing)
    assert all(h["samples"] >= 1 for lv in levels.values() for h in lv["server"]["hosts"].values())
    rows = list(csv.DictReader((out / "lab.csv").open()))
    assert len(rows) == 2
    assert (out / "lab.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (out / "lab.png").stat().st_size > 10_000
    assert "sk-lab" not in (out / "lab.json").read_text()  # the API key is in no result file
    # what was measured: the installed vLLM and the simulated GPUs of both hosts behind the gateway
    assert DEFAULT_PROFILE == "h200-1"
    measured = data["measured"]
    assert measured["vllm_version"].startswith(DEPLOY_VARS["vllm_version"]) and measured["gpu_model"] == LAB_GPU, (
        measured
    )
    assert len(measured["hosts"]) == 2 and all(r["vllm_argv"] for r in measured["hosts"].values()), measured


def test_one_level_straight_at_a_host(deployed, tmp_path):
    p = vfleet(
        "bench",
        "--inventory",
        str(deployed["inv"]),
        "--host",
        "lab1",
        "--concurrency",
        "1",
        "--requests",
        "3",
        "--warmup",
        "0",
        "--output-len",
        "4",
        "--out",
        str(tmp_path),
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    data = json.loads((tmp_path / "bench.json").read_text())
    lv = data["levels"][0]
    assert lv["completed"] == 3 and lv["total_output_tokens"] == 12
    measured = data["measured"]  # lab1's own record
    assert measured["vllm_version"].startswith(DEPLOY_VARS["vllm_version"]) and measured["gpu_model"] == LAB_GPU, (
        measured
    )
    assert measured["model"] == "tiny" and measured["weights_version"].startswith("tiny-") and "hosts" not in measured
