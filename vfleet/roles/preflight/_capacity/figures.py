"""The figures a plan starts from, refused when no GPU or model could have them.

Why here too: the model's own files are checked where they are read (_model_files.py,
_safetensors_header.py), but a plan also takes figures from elsewhere (a snapshot's GPU rows, the
command line, the inventory). A negative weight size or a NaN utilisation makes a plan that
passes with nonsense figures, and the plan's max concurrency becomes the gateway's max_conns.
So every figure entering `plan` must be a finite number in its range, or the plan refuses with
one line naming it.
"""

from __future__ import annotations

import math
from typing import Any

from vfleet.engine.errors import VfleetError
from vfleet.roles.preflight._model_files import MAX_CONTEXT, MAX_WEIGHT_BYTES

__all__ = ["check_inputs", "check_cpu_space"]

MAX_GPU_MIB = 1 << 24  # 16 TiB of memory on one GPU: far beyond any
MAX_TP = 1024
MAX_SEQS = 10**6
MAX_BLOCK = 1 << 16

# name: (lowest, highest, what it is); None values are left to the planner's defaults.
_INT_RANGES: dict[str, tuple[int, int, str]] = {
    "gpu_memory_mib": (1, MAX_GPU_MIB, "the GPU's memory in MiB (nvidia-smi memory.total, or --gpu-memory-mib)"),
    "tp": (1, MAX_TP, "tensor_parallel_size"),
    "weights_bytes": (
        1,
        MAX_WEIGHT_BYTES,
        "the weights' size in bytes (safetensors index or headers, or model_size_bytes)",
    ),
    "max_model_len": (1, MAX_CONTEXT, "max_model_len"),
    "max_num_seqs": (1, MAX_SEQS, "max_num_seqs"),
    "max_num_batched_tokens": (1, MAX_CONTEXT, "max_num_batched_tokens"),
    "kv_cache_memory_bytes": (1, MAX_GPU_MIB << 20, "kv_cache_memory_bytes"),
    "block_size": (1, MAX_BLOCK, "the KV block size"),
}


def check_inputs(**figures: Any) -> None:
    """Each named figure (see _INT_RANGES, plus gpu_memory_utilization) an integer in its
    range, or None where the planner has a default; a one-line VfleetError otherwise."""
    for name, value in figures.items():
        if name == "gpu_memory_utilization":
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or not 0 < value <= 1
            ):
                raise VfleetError(f"plan: gpu_memory_utilization must be a number in (0, 1], got {value!r:.40}")
            continue
        low, high, what = _INT_RANGES[name]
        if value is None and name not in ("gpu_memory_mib", "tp", "block_size"):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise VfleetError(f"plan: {what} must be an integer from {low} to {high}, got {value!r:.40}")


def check_cpu_space(gib: Any) -> None:
    """cpu_kvcache_space_gib: a finite number of GiB above 0 (at most MAX_GPU_MIB MiB)."""
    if (
        isinstance(gib, bool)
        or not isinstance(gib, (int, float))
        or not math.isfinite(gib)
        or not 0 < gib <= MAX_GPU_MIB / 1024
    ):
        raise VfleetError(
            f"plan: cpu_kvcache_space_gib must be a number of GiB above 0 and at most "
            f"{MAX_GPU_MIB // 1024}, got {gib!r:.40}"
        )
