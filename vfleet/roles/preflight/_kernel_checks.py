"""Whether the installed vLLM starts without fetching FlashInfer kernels.

Why a preflight check: from vLLM 0.32 (vllm_facts.yaml flashinfer_kernels), a Hopper or newer
host whose venv has flashinfer-python but not its precompiled kernels (flashinfer-cubin, and
flashinfer-jit-cache where torch is built for CUDA >= 12.9) fetches them from NVIDIA's
artifactory and compiles at start. An air-gapped host waits on that, then serves with slower
kernels, and nothing says so but a line in the journal. Kernels of another FlashInfer version
are worse: FlashInfer refuses to import them. `vllm download-kernels` installs them on a host
with network; an offline fleet needs them in the wheelhouse and in `vllm_extra_pins`."""

from __future__ import annotations

from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig

from ._check_base import FAIL, PASS, WARN, Check, is_cpu_build, min_cc_gpu

CHECK_ID = "vllm.flashinfer_kernels"


def _public(version: str) -> str:
    """'0.6.15+cu129' -> '0.6.15': jit-cache wheels carry the CUDA build as a local label."""
    return version.split("+", 1)[0]


def wanted_packages(row: dict[str, Any], torch_cuda: str | None) -> list[str]:
    """The kernel packages `row`'s vLLM looks for beside flashinfer-python, given torch's CUDA."""
    jit = (
        [row["jit_cache"]] if torch_cuda and vllm_facts.version_ge(torch_cuda, row["jit_cache_from_torch_cuda"]) else []
    )
    return [*row["packages"], *jit]


def check_flashinfer_kernels(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """None where it does not apply: the CPU build, no vLLM in the venv yet, a vLLM before the
    table's first row, GPUs below the row's compute capability."""
    installed = facts.get("vllm_installed") or {}
    row = vllm_facts.flashinfer_kernels(installed.get("version"))
    gpu = min_cc_gpu(facts)
    if (
        is_cpu_build(cfg)
        or row is None
        or gpu is None
        or vllm_facts.cc_tuple(gpu["compute_capability"]) < vllm_facts.cc_tuple(row["min_cc"])
    ):
        return None
    venv = facts.get("flashinfer_kernels") or {}
    base = venv.get("flashinfer-python")
    if not base:
        return Check(
            CHECK_ID,
            PASS,
            f"vLLM {installed['version']}: no flashinfer-python in the venv, no FlashInfer kernels to fetch at start",
        )
    want = wanted_packages(row, venv.get("torch-cuda"))
    missing = [p for p in want if not venv.get(p)]
    other = [f"{p} {venv[p]}" for p in want if venv.get(p) and _public(venv[p]) != _public(base)]
    pins = ", ".join(f"{p}=={_public(base)}" for p in want)
    fix = (
        f"add {pins} to `vllm_extra_pins` and their wheels to the wheelhouse, then deploy "
        f"(with network on the host: `{cfg.current_link}/bin/vllm download-kernels`)"
    )
    if other:
        return Check(
            CHECK_ID,
            FAIL,
            f"venv has flashinfer-python {base} with kernels of another version "
            f"({', '.join(other)}): FlashInfer refuses to import them",
            fix,
        )
    if missing:
        cuda = f", torch on CUDA {venv['torch-cuda']}" if venv.get("torch-cuda") else ""
        return Check(
            CHECK_ID,
            WARN,
            f"vLLM {installed['version']} on {gpu.get('name')} (CC {gpu['compute_capability']}"
            f"{cuda}) lacks {', '.join(missing)} for flashinfer-python {base}: it fetches "
            "kernels from NVIDIA's artifactory and compiles at start (an air-gapped "
            "host waits on it, then serves without them)",
            fix,
        )
    return Check(
        CHECK_ID,
        PASS,
        f"flashinfer-python {base} with {', '.join(f'{p} {venv[p]}' for p in want)}: no kernel download at start",
    )
