"""Preflight against real lab hosts replaying captured GPU profiles: the V100 box refuses
bf16 with a float16 fix, a group that mixes drivers is flagged fleet-wide, and an audit from
a snapshot gives the same report as the live one."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.integration.deploy_env import vfleet

pytestmark = pytest.mark.integration

MIXED = {"lab1": "v100-8-pcie", "lab2": "a100-8-sxm", "lab3": "h200-1"}


@pytest.fixture(scope="module")
def mixed_fleet(lab, tmp_path_factory):
    lab_inv = lab.ensure(3, profiles=MIXED)
    data = yaml.safe_load(lab_inv.read_text())
    data["all"]["vars"].update(
        {
            "vllm_package": "vllm",
            "vllm_version": "0.11.0",
            "dtype": "bfloat16",
            "tensor_parallel_size": 4,
            "model_name": "qwen",
            "model_dir": "/srv/pf-models",
        }
    )
    inv = tmp_path_factory.mktemp("preflight") / "inv.yaml"
    inv.write_text(yaml.safe_dump(data))
    yield inv
    lab.ensure(3, profiles={name: "h200-1" for name in MIXED})


def checks(report: dict, host: str) -> dict[str, dict]:
    return {c["id"]: c for c in report["hosts"][host]["checks"]}


def test_v100_with_bf16_fails_with_float16_fix(mixed_fleet, tmp_path):
    out = tmp_path / "r.json"
    p = vfleet("preflight", "--inventory", str(mixed_fleet), "--report", str(out))
    assert p.returncode == 1  # failed checks fail the run
    report = json.loads(out.read_text())
    v100 = checks(report, "lab1")
    assert v100["gpu.dtype"]["status"] == "fail"
    assert "float16" in v100["gpu.dtype"]["fix"]
    # 0.11 is a CUDA 12.8 build (driver >= 570 natively); the box has 535: CUDA 12.x minor-version
    # compatibility runs it (>= 525.60.13) with limits, so a warning that says so, not a failure
    assert v100["vllm.driver"]["status"] == "warn"
    assert "minor-version compatibility" in v100["vllm.driver"]["message"]
    assert checks(report, "lab2")["gpu.dtype"]["status"] == "pass"  # A100 does bf16
    # 4 V100s across two sockets: PCIe across host bridges -> P2P off in the unit's environment
    topo = report["hosts"]["lab1"]["facts"]["topology"]
    assert topo["nccl_env"].get("NCCL_P2P_DISABLE") == "1"
    assert report["hosts"]["lab2"]["facts"]["topology"]["nvlink_between_tp"] is True


def test_group_with_two_drivers_is_flagged(mixed_fleet, tmp_path):
    out = tmp_path / "r.json"
    vfleet(
        "preflight", "--inventory", str(mixed_fleet), "--limit", "vllm", "--set", "dtype=float16", "--report", str(out)
    )
    report = json.loads(out.read_text())
    for host in ("lab1", "lab2"):
        c = checks(report, host)["fleet.driver:vllm"]
        assert c["status"] == "warn" and "535.104.05" in c["message"] and "555.42.02" in c["message"]


def test_snapshot_audit_equals_live_audit(mixed_fleet, tmp_path):
    live, snap = tmp_path / "live.json", tmp_path / "snap.json"
    vfleet("preflight", "--inventory", str(mixed_fleet), "--report", str(live))
    assert vfleet("preflight.capture", "--inventory", str(mixed_fleet), "--dest", str(tmp_path / "s")).returncode == 0
    assert (tmp_path / "s" / "lab1" / "query-gpu.csv").is_file()
    vfleet("preflight", "--inventory", str(mixed_fleet), "--snapshot", str(tmp_path / "s"), "--report", str(snap))
    a, b = json.loads(live.read_text()), json.loads(snap.read_text())
    for host in MIXED:
        assert a["hosts"][host]["checks"] == b["hosts"][host]["checks"], host
        assert a["hosts"][host]["status"] == b["hosts"][host]["status"]


def test_pre_upgrade_audit_names_what_breaks(mixed_fleet, tmp_path):
    out = tmp_path / "u.json"
    vfleet(
        "preflight",
        "--inventory",
        str(mixed_fleet),
        "--limit",
        "lab1",
        "--set",
        "dtype=float16",
        "--set",
        "vllm_version=0.20.0",
        "--report",
        str(out),
    )
    c = checks(json.loads(out.read_text()), "lab1")
    assert c["vllm.gpu_support"]["status"] == "fail"  # no sm_70 in CUDA 13 builds
    assert c["vllm.driver"]["status"] == "fail"
