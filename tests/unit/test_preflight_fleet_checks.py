"""Preflight cross-host checks (vfleet/roles/preflight/_fleet_checks.py): per serving group, the majority
driver, CUDA and GPU model pass, the odd hosts warn, a tie warns everyone; hosts with no driver
are left to their own gpu.driver check."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.preflight_cases import V100_CFG, _no_gpu, a100_profile, facts
from vfleet.roles.preflight import fleet_checks


@pytest.fixture
def a100(tmp_path: Path) -> Path:
    """4x A100 SXM4 (real nvidia-smi), NVLink between all four (preflight_cases.a100_profile)."""
    return a100_profile(tmp_path)


def test_fleet_two_drivers_in_a_group(a100: Path) -> None:
    base = facts(V100_CFG)
    other = {**base, "driver_version": "550.90.07", "cuda_version": "12.4"}
    hosts = {"gpu01": base, "gpu02": base, "gpu03": other, "cpu01": _no_gpu("no-driver")}
    out = fleet_checks(hosts, {"v100": ["gpu01", "gpu02", "gpu03", "cpu01"], "solo": ["gpu01"]})
    d3 = {c.id: c for c in out["gpu03"]}
    assert d3["fleet.driver:v100"].status == "warn"
    assert "535.104.05 on gpu01, gpu02" in d3["fleet.driver:v100"].message
    assert "550.90.07 on gpu03" in d3["fleet.driver:v100"].message
    assert d3["fleet.driver:v100"].fix == "bring this host to driver 535.104.05 like the rest of v100"
    assert d3["fleet.cuda:v100"].status == "warn"
    d1 = {c.id: c for c in out["gpu01"]}
    assert d1["fleet.driver:v100"].status == "pass" and d1["fleet.gpu_model:v100"].status == "pass"
    assert out["cpu01"] == []


def test_fleet_consistent_group_passes() -> None:
    f = facts(V100_CFG)
    out = fleet_checks({"a": f, "b": f}, {"g": ["a", "b"]})
    assert all(c.status == "pass" for cs in out.values() for c in cs) and len(out["a"]) == 3


def test_fleet_tie_warns_both() -> None:
    f = facts(V100_CFG)
    g = {**f, "driver_version": "570.86.15"}
    out = fleet_checks({"a": f, "b": g}, {"g": ["a", "b"]})
    assert {c.status for c in out["a"] + out["b"] if c.id.startswith("fleet.driver")} == {"warn"}
