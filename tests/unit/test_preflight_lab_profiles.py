"""Preflight checks against the lab's GPU profiles (vfleet/lab/profiles/, another developer's; tested
when present): the seed V100 box, the A100 NVLink box, and the broken-driver and no-GPU hosts read
back through facts_from_snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.preflight_cases import by_id, config, facts
from vfleet.roles.preflight import host_checks, upgrade_checks

LAB = Path(__file__).resolve().parents[2] / "vfleet" / "lab" / "profiles"


def _lab(name: str) -> Path:
    d = LAB / name
    assert d.is_dir(), f"lab profile {name} missing"
    return d


def test_lab_v100_profile_bf16_fails_with_float16_fix() -> None:
    v = {"vllm_version": "0.5.4", "dtype": "bfloat16", "tensor_parallel_size": 2}
    f = facts(config(v), _lab("v100-8-pcie"))
    assert f["gpu_count"] == 8 and f["driver_version"] == "535.104.05"
    c = by_id(host_checks(config(v), f), "gpu.dtype")
    assert c.status == "fail" and "dtype: float16" in c.fix and "compute capability of at least 8.0" in c.message
    assert f["topology"]["nccl_env"] == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    up = {c.id: c.status for c in upgrade_checks(config({**v, "vllm_version": "0.20.0"}), f)}
    assert up["vllm.gpu_support"] == "fail" and up["vllm.driver"] == "fail"


def test_lab_a100_profile_nvlink() -> None:
    v = config({"vllm_version": "0.8.5", "dtype": "bfloat16", "tensor_parallel_size": 8})
    f = facts(v, _lab("a100-8-sxm"))
    assert f["topology"]["nvlink_between_tp"] is True and f["topology"]["nccl_env"] == {}
    assert by_id(host_checks(v, f), "topology.tp_links").status == "pass"


@pytest.mark.parametrize("name,state", [("broken-driver", "broken-driver"), ("no-gpu", "no-driver")])
def test_lab_failure_profiles(name: str, state: str) -> None:
    from vfleet.roles.preflight import facts_from_snapshot

    f = facts_from_snapshot(_lab(name), config())
    assert f["gpu_state"] == state and f["gpus"] == []
    assert by_id(host_checks(config({"vllm_version": "0.5.4"}), f), "gpu.driver").status == "fail"
