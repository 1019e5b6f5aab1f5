"""The patterns that find each class in a log line, and the ones that add context.

Every pattern is a literal phrase with at most bounded gaps ({0,N}) and no nested
repetition, and every line is cut to MAX_LINE_CHARS before it is matched, so a crafted line
costs linear time (tests/unit/test_triage_hostile.py runs some; benchmarks/triage_scale.py
times them). Each signal also names the lower-case words a line must contain before its
pattern is tried: plain substring tests, so a log of a million lines is scanned in well under
a second. The phrases are vLLM's, PyTorch's and NCCL's own messages as they appear in vLLM's
issues (docs/triage.md cites them).

FATAL signals are errors that end a start; HANG signals are warnings that a start or a server
is stuck (workers waiting on each other), used only when no fatal signal is found. The "oom"
class is split into its phases by _memory.py."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_LINE_CHARS", "Signal", "FATAL", "HANG", "OOM", "NCCL_CONTEXT", "ERROR_LIKE", "first_hit"]

MAX_LINE_CHARS = 4096

_I = re.IGNORECASE

OOM = "oom"


@dataclass(frozen=True)
class Signal:
    class_id: str
    needles: tuple[str, ...]  # lower-case; the line must hold one of them
    pattern: re.Pattern[str]

    def search(self, line: str, lower: str) -> bool:
        return any(n in lower for n in self.needles) and self.pattern.search(line) is not None


def _s(class_id: str, needles: str, pattern: str, flags: int = 0) -> Signal:
    return Signal(class_id, tuple(needles.split("|")), re.compile(pattern, flags))


# Within one line the first signal of this list that matches wins.
FATAL: tuple[Signal, ...] = (
    _s("no-kernel", "kernel image", r"no kernel image is available for execution on the device", _I),
    _s(
        "no-kernel",
        "cuda capability",
        r"CUDA capability sm_\d{2,3} is not compatible with the current PyTorch installation",
    ),
    _s("no-kernel", "compute capability", r"only supported on GPUs with compute capability of at least \d{1,2}\.\d"),
    _s(OOM, "out of memory|outofmemoryerror", r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError"),
    _s(
        "kv-cache-too-small",
        "kv cache",
        r"larger than the maximum number of tokens that can be stored in KV cache"
        r"|KV cache is needed, which is larger than the available KV cache memory",
    ),
    _s("kv-cache-too-small", "cache blocks", r"No available memory for the cache blocks"),
    _s("port-in-use", "already in use|eaddrinuse", r"address already in use|EADDRINUSE", _I),
    _s(
        "chat-template",
        "chat template|chattemplate",
        r"ChatTemplateResolutionError|default chat template is no longer allowed"
        r"|chat template[^\n]{0,300}appears path-like, but doesn't exist",
    ),
    _s("chat-template", "jinja2.exceptions", r"jinja2\.exceptions\.\w{1,40}"),
    _s("nccl", "nccl", r"NCCL error|nccl(?:SystemError|InternalError|UnhandledCudaError|InvalidUsage|RemoteError)"),
    _s("nccl", "watchdog", r"Watchdog caught collective operation timeout"),
    _s("nccl", "shared memory segment", r"Error while creating shared memory segment"),
)

HANG: tuple[Signal, ...] = (
    _s("nccl", "no available", r"No available (?:shared memory broadcast )?block found in \d{1,7} seconds?"),
)

# Lines worth showing beside an NCCL verdict: the settings its next step asks about.
NCCL_CONTEXT = _s(
    "nccl",
    "nccl_|/dev/shm|nccl version|driver version",
    r"NCCL_(?:P2P|IB|SHM)_DISABLE|/dev/shm|NCCL version \d|[Dd]river [Vv]ersion",
)

# The unknown class shows the last of these.
ERROR_LIKE = _s(
    "unknown",
    "error|exception|traceback|fatal|killed|fail",
    r"\b(?:error|exception|traceback|fatal|killed|failed|failure)\b",
    _I,
)


def first_hit(line: str, signals: tuple[Signal, ...]) -> Signal | None:
    lower = line.lower()
    return next((s for s in signals if s.search(line, lower)), None)
