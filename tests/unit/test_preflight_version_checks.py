"""Preflight checks of the pinned vLLM version (vfleet/roles/preflight/_version_checks.py): its wheels vs
the GPU and the driver, the flags the inventory renders, the metric names dashboards read, and
the pre-upgrade audit (`upgrade_checks` with a NEW version in the config)."""

from __future__ import annotations

from tests.unit.preflight_cases import V100, V100_CFG, by_id, config, facts
from vfleet.config import vllm_facts
from vfleet.roles.preflight import host_checks, upgrade_checks

# --- pinned vLLM vs GPU and driver -------------------------------------------------------------


def test_vllm_020_drops_v100() -> None:
    v = config({**V100, "vllm_version": "0.20.0"})
    c = by_id(host_checks(v, facts(v)), "vllm.gpu_support")
    assert c.status == "fail" and "CC 7.0" in c.message and "CUDA 13.0" in c.message
    assert "0.19.x" in c.fix
    ok = by_id(host_checks(V100_CFG, facts(V100_CFG)), "vllm.gpu_support")
    assert ok.status == "pass" and "CUDA 12.1" in ok.message


def test_vllm_v0_only_range_warns_on_v100() -> None:
    v = config({**V100, "vllm_version": "0.9.2"})
    c = by_id(upgrade_checks(v, facts(v)), "vllm.gpu_support")
    assert c.status == "warn" and "V0" in c.message and "VLLM_USE_V1=0" in c.fix


def test_vllm_driver_requirement() -> None:
    # 0.9.0: CUDA 12.8 kernels; the seed box's 535 is below 12.8's 570.26 but above 12.x's 525.60.13.
    v = config({**V100, "vllm_version": "0.9.0"})
    c = by_id(host_checks(v, facts(v)), "vllm.driver")
    assert c.status == "warn" and "minor-version compatibility" in c.message
    assert "535.104.05" in c.message and ">= 570.26" in c.message and ">= 525.60.13" in c.message
    assert c.fix == "upgrade the NVIDIA driver to >= 570.26"
    ok = by_id(host_checks(V100_CFG, facts(V100_CFG)), "vllm.driver")
    assert ok.status == "pass" and "530.30.02" in ok.message


def test_vllm_driver_torch_cuda_counts_and_majors_do_not_mix() -> None:
    # 0.6.6: kernels CUDA 12.1 but torch 2.5.1 brings CUDA 12.4, so 550.54.14 natively.
    v = config({**V100, "vllm_version": "0.6.6"})
    c = by_id(host_checks(v, facts(v)), "vllm.driver")
    assert c.status == "warn" and "CUDA 12.1 kernels, torch 2.5.1 on CUDA 12.4" in c.message
    assert ">= 550.54.14" in c.message
    # 0.20.0 is CUDA 13: a 12.x driver cannot run it, only forward compatibility could.
    v = config({**V100, "vllm_version": "0.20.0"})
    c = by_id(host_checks(v, facts(v)), "vllm.driver")
    assert c.status == "fail" and "VLLM_ENABLE_CUDA_COMPATIBILITY=1" in c.message
    assert "580.65.06" in c.fix and "0.19.x" in c.fix


def test_unknown_release_warns() -> None:
    v = config({**V100, "vllm_version": "0.4.0"})
    c = by_id(host_checks(v, facts(v)), "vllm.driver")
    assert c.status == "warn" and "not in the release table" in c.message and "vllm_releases" in c.fix


# --- flags, metrics, pre-upgrade audit ---------------------------------------------------------


def test_flags_table_api() -> None:
    assert vllm_facts.flag_available("--swap-space", "0.5.4")
    assert vllm_facts.flag_available("swap_space", "0.17.1")  # vllm#36216 removed it in 0.18.0
    assert not vllm_facts.flag_available("swap_space", "0.18.0")
    assert not vllm_facts.flag_available("--shutdown-timeout", "0.17.1")
    assert vllm_facts.flag_available("--shutdown-timeout", "0.18.0")
    assert vllm_facts.flag_available("--shutdown-timeout", "0.32.0")
    assert not vllm_facts.flag_available("--task", "0.13.0") and vllm_facts.flag_available("--task", "0.12.0")
    assert vllm_facts.flag_available("--enable-log-requests", "0.10.1")
    assert not vllm_facts.flag_available("--enable-log-requests", "0.10.0")
    assert vllm_facts.flag_status("--disable-log-requests", "0.12.0") == "deprecated"
    assert vllm_facts.flag_status("--disable-log-requests", "0.19.0") == "removed"
    assert vllm_facts.flag_available("--some-future-flag", "0.5.4")  # unknown: never silently dropped
    s = vllm_facts.flags_supported("0.20.0")
    assert "--shutdown-timeout" in s and "--swap-space" not in s and "--disable-log-requests" not in s
    assert "--disable-log-requests" in vllm_facts.flags_supported("0.5.4")
    assert all(
        r.get("source")
        for key in ("gpus", "cuda_driver", "vllm_releases", "flags", "metrics")
        for r in vllm_facts.data()[key]
    )


def test_flags_check() -> None:
    v = config({**V100, "vllm_version": "0.18.0", "vllm_extra_args": ["--swap-space", "4"]})
    c = by_id(host_checks(v, facts(v)), "vllm.flags")
    assert c.status == "fail" and "--swap-space (vllm_extra_args.--swap-space) was removed in vLLM 0.18.0" in c.message
    assert "remove `vllm_extra_args.--swap-space`" in c.fix
    # shutdown_timeout's default asks 0.5.4 for no --shutdown-timeout; set, it is reported (the next case)
    v = config({**V100, "vllm_version": "0.5.4", "vllm_extra_args": ["--swap-space 4", "--enforce-eager"]})
    assert by_id(host_checks(v, facts(v)), "vllm.flags").status == "pass"
    v = config({**V100, "vllm_version": "0.5.4", "shutdown_timeout": 30})
    c = by_id(host_checks(v, facts(v)), "vllm.flags")
    assert c.status == "warn" and "needs vLLM >= 0.18.0" in c.message and "the unit will omit it" in c.message
    v = config({**V100, "vllm_version": "0.12.0", "vllm_extra_args": ["--disable-log-requests"]})
    c = by_id(host_checks(v, facts(v)), "vllm.flags")
    assert c.status == "warn" and "deprecated since 0.10.1" in c.message and "--no-enable-log-requests" in c.fix


def test_metrics_check() -> None:
    v = config({**V100, "vllm_version": "0.12.0"})
    c = by_id(host_checks(v, facts(v, vllm_installed={"package": "vllm", "version": "0.5.4"})), "vllm.metrics")
    assert c.status == "warn" and "vllm:gpu_cache_usage_perc -> vllm:kv_cache_usage_perc" in c.message
    assert "vllm:time_per_output_token_seconds -> vllm:inter_token_latency_seconds" in c.message
    assert "accept both names" in c.fix
    c = by_id(host_checks(v, facts(v, vllm_installed={"package": "vllm", "version": "0.11.1"})), "vllm.metrics")
    assert c.status == "pass"
    # 0.9.2 on a V100 runs V0 (no V1 below CC 8.0 until 0.10.2): V0 names, nothing renamed.
    v = config({**V100, "vllm_version": "0.9.2"})
    c = by_id(host_checks(v, facts(v, vllm_installed={"package": "vllm", "version": "0.5.4"})), "vllm.metrics")
    assert c.status == "pass"


def test_pre_upgrade_audit_of_the_seed_box() -> None:
    """The seed deployment (0.5.4 on 8x V100 PCIe, driver 535) asked to move to 0.20.0."""
    new = config({**V100, "vllm_version": "0.20.0", "swap_space": 4, "vllm_extra_args": ["--disable-log-requests"]})
    f = facts(new, vllm_installed={"package": "vllm", "version": "0.5.4"})
    got = {c.id: c for c in upgrade_checks(new, f)}
    assert got["vllm.driver"].status == "fail" and "580.65.06" in got["vllm.driver"].fix
    assert got["vllm.gpu_support"].status == "fail"
    assert got["vllm.flags"].status == "fail" and "--disable-log-requests" in got["vllm.flags"].message
    assert "--swap-space (swap_space) was removed" in got["vllm.flags"].message
    assert got["vllm.metrics"].status == "warn"
    assert by_id(host_checks(new, f), "vllm.installed").message == "vllm 0.5.4 installed; upgrade to 0.20.0 pending"
    # The same audit against the version it runs now is clean.
    cur = config({**V100, "swap_space": 4})
    assert all(
        c.status == "pass"
        for c in upgrade_checks(cur, facts(cur, vllm_installed={"package": "vllm", "version": "0.5.4"}))
    )
