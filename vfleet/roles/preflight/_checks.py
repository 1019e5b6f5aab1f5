"""Host checks: pure functions of (the host's HostConfig, facts) -> list[Check], and host_checks,
which runs them in the order an operator reads them.

Each check says what is wrong in the operator's terms and gives the fix (an inventory change or a
command), so a preflight can stop a deploy *before* vLLM fails at start-up with a traceback.
Version-dependent facts (CC, drivers, flags, metrics) come from vfleet/config/data/vllm_facts.yaml.

Here: tensor parallelism (GPU count, heads) and the installed vLLM. The other checks live in one
module per group: _gpu_checks.py (driver, dtype, quantisation, ECC, persistence),
_topology_checks.py (GPU links, NCCL env, PCIe ACS), _capacity_checks.py (KV cache),
_storage_checks.py (/dev/shm, disk, the model's filesystem), _volta_checks.py, _engine_checks.py,
_model_checks.py, _version_checks.py, _kernel_checks.py, _nccl_conf.py, _unit_checks.py,
_unsafe_checks.py.
"""

from __future__ import annotations

from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.roles.preflight._model_files import config_view

from . import _nccl as nccl
from ._capacity_checks import check_capacity, check_cpu_capacity
from ._check_base import FAIL, PASS, WARN, Check, is_cpu_build
from ._engine_checks import engine_checks
from ._gpu_checks import check_dtype, check_ecc, check_gpu_driver, check_persistence, check_quantization
from ._kernel_checks import check_flashinfer_kernels
from ._model_checks import model_checks
from ._nccl_conf import check_nccl_sources
from ._storage_checks import check_disk, check_model_fs, check_shm
from ._topology_checks import check_nccl_env, check_pcie_acs, check_topology
from ._unit_checks import check_unit_files
from ._unsafe_checks import check_unsafe
from ._version_checks import inventory_flags, upgrade_checks
from ._volta_checks import volta_checks

__all__ = ["Check", "PASS", "WARN", "FAIL", "host_checks", "upgrade_checks", "inventory_flags", "is_cpu_build"]

# --- tensor parallelism -----------------------------------------------------------------------


def _valid_tp_sizes(heads: int, kv: int, gpus: int) -> list[int]:
    return [t for t in range(1, max(1, gpus) + 1) if heads % t == 0 and (kv % t == 0 or t % kv == 0)]


def check_tp_count(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    tp, pp = cfg.tensor_parallel_size, cfg.pipeline_parallel_size
    n = int(facts.get("gpu_count") or 0)
    want = nccl.tp_gpu_indices(cfg)
    if cfg.replica.name:  # a multi-host replica's share is judged across members (replica.gpus)
        return Check(
            "tp.gpu_count",
            PASS,
            f"member of replica {cfg.replica.name}: TP {tp} x PP {pp} over its "
            f"hosts ({n} GPU(s) here; see replica.gpus)",
        )
    if tp * pp > n:
        return Check(
            "tp.gpu_count",
            FAIL,
            f"tensor_parallel_size {tp} x pipeline_parallel_size {pp} needs {tp * pp} GPUs; the host has {n}",
            f"set tensor_parallel_size <= {n}",
        )
    missing = [i for i in want if i >= n]
    if missing:
        return Check(
            "tp.gpu_count",
            FAIL,
            f"cuda_visible_devices names GPU(s) {missing} the host lacks (GPUs 0-{n - 1})",
            "fix `cuda_visible_devices` in the inventory",
        )
    return Check("tp.gpu_count", PASS, f"tensor_parallel_size {tp} on {n} GPU(s)")


def check_tp_heads(tp: int, facts: dict[str, Any]) -> Check:
    """Whether `tp` divides the model's attention and KV heads (also `plan --config`'s check)."""
    model = facts.get("model_config")
    if not model:
        return Check(
            "tp.heads", PASS, "not checked yet: no config.json in the model directory (re-run after the weights step)"
        )
    c = config_view(model)  # keys already held to model_files' bounds when the facts were assembled
    heads = c.get("num_attention_heads")
    if not heads:
        return Check(
            "tp.heads", WARN, "not checked: config.json has no num_attention_heads", "use the model's own config.json"
        )
    kv = c.get("num_key_value_heads") or heads
    valid = _valid_tp_sizes(heads, kv, max(int(facts.get("gpu_count") or 0), tp))
    fix = f"set tensor_parallel_size to one of {valid}"
    if heads % tp:
        return Check(
            "tp.heads",
            FAIL,
            f"tensor_parallel_size {tp} does not divide num_attention_heads {heads}: vLLM refuses to start",
            fix,
        )
    if kv % tp == 0:
        return Check("tp.heads", PASS, f"tensor_parallel_size {tp} divides {heads} attention and {kv} KV heads")
    if tp % kv == 0:
        return Check(
            "tp.heads",
            WARN,
            f"tensor_parallel_size {tp} > num_key_value_heads {kv}: vLLM replicates "
            "each KV head on several GPUs, so KV cache per GPU does not shrink with TP",
            fix,
        )
    return Check(
        "tp.heads",
        FAIL,
        f"tensor_parallel_size {tp} and num_key_value_heads {kv} do not divide each other: vLLM refuses to start",
        fix,
    )


# --- installed vLLM ---------------------------------------------------------------------------


def check_installed(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    inst = facts.get("vllm_installed")
    want_pkg = cfg.vllm_package
    want = cfg.vllm_version
    if not inst:
        return Check(
            "vllm.installed",
            PASS,
            "no vLLM in the venv yet" + (f"; {want_pkg}=={want} will be installed" if want else ""),
        )
    if inst["package"] != want_pkg:
        return Check(
            "vllm.installed",
            WARN,
            f"venv has {inst['package']} {inst['version']}, the inventory wants {want_pkg}=={want}",
            "check `vllm_package`; the install step replaces the venv",
        )
    if inst["version"] != str(want):
        return Check(
            "vllm.installed", PASS, f"{inst['package']} {inst['version']} installed; upgrade to {want} pending"
        )
    return Check("vllm.installed", PASS, f"{inst['package']} {want} installed")


# --- entry points -----------------------------------------------------------------------------


def host_checks(cfg: HostConfig, facts: dict[str, Any]) -> list[Check]:
    """Every host check, in the order an operator reads them. GPU checks are skipped for the CPU
    build, and after a failed gpu.driver (nothing to check them against)."""
    checks = [check_gpu_driver(cfg, facts)]
    gpu_ok = not is_cpu_build(cfg) and facts.get("gpu_state") == "ok" and facts.get("gpu_count")
    if gpu_ok:
        checks += [
            check_dtype(cfg, facts),
            check_quantization(cfg, facts),
            *volta_checks(cfg, facts),
            check_tp_count(cfg, facts),
            check_tp_heads(cfg.tensor_parallel_size, facts),
            check_topology(cfg, facts),
            check_nccl_env(cfg, facts),
            check_nccl_sources(cfg, facts),
            check_pcie_acs(cfg, facts),
            check_ecc(cfg, facts),
            check_persistence(cfg, facts),
        ]
    checks += [check_shm(cfg, facts), check_disk(cfg, facts), check_model_fs(cfg, facts)]
    checks += model_checks(cfg, facts)
    checks.append(check_installed(cfg, facts))
    if gpu_ok:
        checks.append(check_flashinfer_kernels(cfg, facts))
    checks += upgrade_checks(cfg, facts)
    checks.append(check_unsafe(cfg))
    checks += engine_checks(cfg, facts)
    if gpu_ok:
        checks.append(check_capacity(cfg, facts))
    elif is_cpu_build(cfg):
        checks.append(check_cpu_capacity(cfg, facts))
    checks.append(check_unit_files(cfg, facts))
    return [c for c in checks if c is not None]
