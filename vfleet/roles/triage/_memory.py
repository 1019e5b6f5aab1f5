"""What an out-of-memory line and its neighbours say: the phase (loading the weights, or after
them: memory profiling, KV cache allocation, CUDA graph capture) and the numbers.

Why the phase matters: the next steps are opposite. Weights that do not fit need more GPUs or
fewer bytes; memory that runs out after them needs a smaller gpu_memory_utilization (CUDA
graphs and other processes live outside vLLM's share) or a shorter max_model_len.

How the phase is told, most specific first (docs/triage.md):
1. the traceback around the out-of-memory line: frames of graph capture or of the KV cache /
   memory profiling -> after loading; frames of the weight loader -> loading;
2. else the nearest progress line before it: "Model loading took" (vLLM's line once the
   weights are in) or "Capturing cudagraphs" -> after loading; "Starting to load model" / "Loading safetensors
   checkpoint shards" -> loading;
3. else the phase is not in the lines read (class oom-phase-unknown)."""

from __future__ import annotations

import re
from typing import Sequence

__all__ = ["Phase", "oom_phase", "numbers"]

# How far around the out-of-memory line a traceback frame still counts, and how far back a
# progress line is looked for (a start's progress lines come well within it; the bound keeps a
# long log's scan short).
FRAMES_BEFORE, FRAMES_AFTER = 150, 150
PROGRESS_LOOKBACK = 5000

# Frames are matched as frames (`File "...", line N, in NAME`) or as the line that failed,
# never as free text: vLLM's start-up config line names cudagraph settings before any loading.
_AFTER_FRAMES = re.compile(
    r", in (?:capture_model|capture_end|determine_num_available_blocks|determine_available_memory|"
    r"profile_run|_dummy_run|_dummy_sampler_run|initialize_kv_cache|_initialize_kv_caches|"
    r"_allocate_kv_cache|initialize_cache)\b|with torch\.cuda\.graph\("
)
_LOADING_FRAMES = re.compile(
    r", in (?:load_weights|weight_loader|create_weights|make_layers|get_model|load_model|"
    r"process_weights_after_loading)\b|Failed to create unquantized linear weights|"
    # the model being built (its layers' weights allocated): only ever while loading
    r"/model_executor/models/[\w/]{1,80}\.py\", line \d{1,6}, in (?:__init__|<listcomp>|<lambda>)"
)
_LOADED = re.compile(
    r"Model loading took|Loading model weights took|Loading weights took|"
    r"Capturing cudagraphs|Capturing CUDA graph|Capturing the model for CUDA graphs"
)
_LOADING = re.compile(r"Starting to load model|Loading safetensors checkpoint shards")
_GRAPHS = re.compile(r"capture_model|capture_end|torch\.cuda\.graph")


class Phase:
    LOADING = "oom-loading"
    AFTER = "oom-after-loading"
    UNKNOWN = "oom-phase-unknown"


def _first(pattern: re.Pattern[str], lines: Sequence[str], indexes: range) -> int | None:
    return next((i for i in indexes if pattern.search(lines[i])), None)


def oom_phase(lines: Sequence[str], at: int) -> tuple[str, list[int], str]:
    """(class id, indexes of the lines that decided the phase, a few words on where), for the
    out-of-memory line `lines[at]`."""
    near = range(max(0, at - FRAMES_BEFORE), min(len(lines), at + FRAMES_AFTER + 1))
    after = _first(_AFTER_FRAMES, lines, near)
    if after is not None:
        where = "at CUDA graph capture" if _GRAPHS.search(lines[after]) else "at memory profiling / KV cache allocation"
        return Phase.AFTER, [after], where
    loading = _first(_LOADING_FRAMES, lines, near)
    if loading is not None:
        return Phase.LOADING, [loading], "in the weight loader"
    for i in range(at - 1, max(-1, at - 1 - PROGRESS_LOOKBACK), -1):
        if _LOADED.search(lines[i]):
            return Phase.AFTER, [i], "after the weights had loaded"
        if _LOADING.search(lines[i]):
            return Phase.LOADING, [i], "while the weights were loading"
    return Phase.UNKNOWN, [], ""


_SIZE = r"(\d{1,9}(?:\.\d{1,4})?) ?([KMGT]iB|[KMGT]B|bytes)"
_NUMBERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("tried to allocate", re.compile(r"Tried to allocate " + _SIZE)),
    ("GPU", re.compile(r"GPU (\d{1,3}) has a total capac|\(GPU (\d{1,3});")),
    ("total", re.compile(r"total capacity of " + _SIZE)),
    ("free", re.compile(r"of which " + _SIZE + r" is free")),
    ("total", re.compile(_SIZE + r" total capacity")),
    ("free", re.compile(_SIZE + r" free;")),
    ("weights took", re.compile(r"(?:Model loading|Loading model weights|Loading weights) took " + _SIZE)),
    ("max_model_len", re.compile(r"max seq len \((\d{1,9})\)")),
    ("KV cache tokens", re.compile(r"can be stored in KV cache \((\d{1,12})\)")),
    ("KV cache needed", re.compile(r"\(" + _SIZE + r" KV cache is needed")),
    ("KV cache available", re.compile(r"available KV cache memory \(" + _SIZE + r"\)")),
    ("estimated max_model_len", re.compile(r"estimated maximum model length is (\d{1,9})")),
    ("port", re.compile(r"bind on address \(\S{1,64} (\d{1,5})\)")),
    ("compute capability", re.compile(r"compute capability (\d{1,2}\.\d)\.?$|sm_(\d{2,3}) is not compatible")),
)


def numbers(lines: Sequence[str]) -> dict[str, str]:
    """The figures the deciding lines give ("Tried to allocate 2.00 GiB", "1.2 GiB free"...),
    first found wins, in the order of the lines."""
    found: dict[str, str] = {}
    for line in lines:
        for label, pattern in _NUMBERS:
            m = pattern.search(line)
            if m and label not in found:
                found[label] = " ".join(g for g in m.groups() if g)
    return found
