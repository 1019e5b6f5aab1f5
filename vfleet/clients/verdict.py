"""The bottleneck verdict: what holds a vLLM host back, read from the server's own numbers.

Why a pure function at the clients layer: the same reasoning is printed by `vfleet bench` (one
verdict per load level), `vfleet status` (one per host) and, as PromQL, by the alert rules
(vfleet/roles/monitoring/_verdict_rules.py), so it lives once, below both. It reads the numbers
vLLM exports on /metrics (https://docs.vllm.ai/en/latest/usage/metrics.html):
vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc (before 0.9.2
vllm:gpu_cache_usage_perc, a fraction 0..1 under both names), vllm:num_preemptions_total and
the vllm:time_to_first_token_seconds histogram; the GPU utilisation from nvidia-smi where the
caller has it; max_num_seqs from the inventory.

The rules, first match wins (the field reports' chains of reasoning, issue 27):
  1. waiting > 0 and the KV cache near full (or preempting): memory-bound.
  2. waiting > 0, the KV cache has room and running at max_num_seqs (where the inventory sets
     it): max_num_seqs is what holds requests back. vLLM's scheduler stops admitting waiting
     requests at max_num_seqs running, or when a step's token budget (max_num_batched_tokens)
     is spent (https://github.com/vllm-project/vllm/blob/main/vllm/v1/core/sched/scheduler.py,
     Scheduler.schedule); below max_num_seqs a waiting request waits for the next steps'
     budget, which is healthy (rule 5).
  3. running at max_num_seqs and TTFT growing: queueing, the host is at capacity.
  4. running low and the GPU (or the offered load) says more could run: not enough load
     reaches the engine.
  5. otherwise healthy (requests running) or idle (none).
Each verdict carries the numbers it read, so an operator can check it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "KV_NEAR_FULL",
    "AT_LIMIT_SHARE",
    "TTFT_GROWTH",
    "RUNNING_LOW_SHARE",
    "GPU_UTIL_LOW",
    "ServerNumbers",
    "Verdict",
    "verdict",
    "MEMORY_BOUND",
    "SEQS_TOO_SMALL",
    "QUEUEING",
    "UNDERFED",
    "HEALTHY",
    "IDLE",
    "UNKNOWN",
    "TEXTS",
]

KV_NEAR_FULL = 0.90
"""KV cache usage (0..1) at which a waiting request is waiting for cache blocks. vLLM's
scheduler admits a waiting request only when the blocks of its prompt fit; at 90% used a
long prompt no longer does, and the field reports saw preemptions start there. Below it, the
cache has room and something else (the sequence limit) holds requests back. The alert
VllmKvCacheNearFull uses the same figure by default (monitoring_kv_cache_usage_max 0.9)."""

AT_LIMIT_SHARE = 0.95
"""running >= 95% of max_num_seqs counts as "at max_num_seqs": a sampled gauge of a full
engine dips by one or two as sequences finish between scheduler steps."""

TTFT_GROWTH = 1.25
"""TTFT "growing": this window's TTFT at least 25% above the window before. Smaller changes
are the noise of prompt lengths and sampling; a queue adds whole request times, so a real
queue passes it quickly."""

RUNNING_LOW_SHARE = 0.5
"""running below half of what the engine could run (max_num_seqs, or the load the client
offered) is "running low": the engine has room for twice the work it has."""

GPU_UTIL_LOW = 50.0
"""GPU utilisation (%) below which a busy engine would not stay: decoding a batch keeps the
SMs busy nearly all the time, so under 50% with requests running means the GPU waits for
work (or for the host), not the other way round."""

MEMORY_BOUND = "memory-bound"
SEQS_TOO_SMALL = "max_num_seqs too small"
QUEUEING = "queueing"
UNDERFED = "not enough load reaches the engine"
HEALTHY = "healthy"
IDLE = "idle"
UNKNOWN = "unknown"

TEXTS: dict[str, str] = {
    MEMORY_BOUND: "requests wait for KV cache: lower max_model_len, quantize (weights or kv_cache_dtype), "
    "or add GPUs (tensor_parallel_size) / hosts",
    SEQS_TOO_SMALL: "requests wait while the KV cache has room: raise max_num_seqs (inventory variable "
    "max_num_seqs) to the planner's figure (`vfleet preflight` prints the suggested max_num_seqs)",
    QUEUEING: "the engine runs at max_num_seqs and TTFT grows: it is at capacity; add hosts or lower the offered load",
    UNDERFED: "the engine has room and the GPU idles: look upstream (client connection pool, gateway "
    "limits gateway_max_conns / gateway_rate_limit)",
    HEALTHY: "requests run and none wait, or a few wait below max_num_seqs with the KV cache free "
    "(admitted over the next scheduler steps, within max_num_batched_tokens)",
    IDLE: "no request running or waiting",
    UNKNOWN: "not enough numbers to judge (no answer from /metrics, or requests wait and no KV cache "
    "usage is exported)",
}
"""What each verdict means and what to do; the alert rules' descriptions use the same texts."""


@dataclass(frozen=True)
class ServerNumbers:
    """What a verdict reads; None: not known (the verdict then does not rely on it).
    `preemptions` counts those during the window judged (not vLLM's counter since start);
    `ttft_s` and `ttft_before_s` are the TTFT of this window and of the one before it (any
    one statistic, the same for both); `offered` is the load the client kept in flight."""

    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    preemptions: float | None = None
    ttft_s: float | None = None
    ttft_before_s: float | None = None
    gpu_util_pct: float | None = None
    max_num_seqs: int | None = None
    offered: float | None = None

    def read(self) -> dict[str, float | int]:
        """The numbers that are known, by name."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Verdict:
    """A verdict, what to do about it, and the numbers it was read from."""

    kind: str
    numbers: dict[str, Any] = field(default_factory=dict)

    @property
    def advice(self) -> str:
        return TEXTS[self.kind]

    def because(self) -> str:
        """The numbers read, as `running 12, waiting 3, KV 97%`."""
        parts = []
        for k, v in self.numbers.items():
            if k == "kv_cache_usage":
                parts.append(f"KV {v:.0%}")
            elif k == "gpu_util_pct":
                parts.append(f"GPU {v:.0f}%")
            elif k in ("ttft_s", "ttft_before_s"):
                parts.append(f"{'TTFT before' if k == 'ttft_before_s' else 'TTFT'} {v * 1000:.0f} ms")
            else:
                parts.append(f"{k} {v:g}")  # the metric's or the variable's own name
        return ", ".join(parts)

    def line(self) -> str:
        return f"{self.kind} ({self.because()}): {self.advice}" if self.numbers else f"{self.kind}: {self.advice}"

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.kind, "advice": self.advice, "numbers": dict(self.numbers)}


def _pick(n: ServerNumbers, *names: str) -> dict[str, Any]:
    known = n.read()
    return {k: known[k] for k in names if k in known}


def _ttft_growing(n: ServerNumbers) -> bool:
    return (
        n.ttft_s is not None
        and n.ttft_before_s is not None
        and n.ttft_before_s > 0
        and n.ttft_s >= TTFT_GROWTH * n.ttft_before_s
    )


def _room(n: ServerNumbers) -> float | None:
    """How many requests the engine could run: max_num_seqs, else the offered load."""
    return n.max_num_seqs or n.offered


def verdict(n: ServerNumbers) -> Verdict:
    """The first of the module's rules that the numbers meet."""
    if n.running is None and n.waiting is None:
        return Verdict(UNKNOWN)
    running, waiting = n.running or 0.0, n.waiting or 0.0
    kv_full = n.kv_cache_usage is not None and n.kv_cache_usage >= KV_NEAR_FULL
    if waiting > 0 and (kv_full or (n.preemptions or 0) > 0):
        return Verdict(MEMORY_BOUND, _pick(n, "waiting", "running", "kv_cache_usage", "preemptions"))
    if waiting > 0 and n.kv_cache_usage is None:
        return Verdict(UNKNOWN, _pick(n, "waiting", "running"))
    at_limit = n.max_num_seqs is not None and running >= AT_LIMIT_SHARE * n.max_num_seqs
    if waiting > 0 and (at_limit or n.max_num_seqs is None):
        return Verdict(SEQS_TOO_SMALL, _pick(n, "waiting", "running", "max_num_seqs", "kv_cache_usage"))
    if waiting > 0:  # below max_num_seqs, KV room: the next steps' token budget admits them
        return Verdict(HEALTHY, _pick(n, "running", "waiting", "max_num_seqs", "kv_cache_usage"))
    if at_limit and _ttft_growing(n):
        return Verdict(QUEUEING, _pick(n, "running", "waiting", "max_num_seqs", "ttft_s", "ttft_before_s"))
    room = _room(n)
    low = room is not None and running < RUNNING_LOW_SHARE * room
    gpu_idle = n.gpu_util_pct is not None and n.gpu_util_pct < GPU_UTIL_LOW
    # without a GPU figure, an offered load the engine never saw says the same
    starved = gpu_idle or (n.gpu_util_pct is None and n.offered is not None)
    if running > 0 and low and starved:
        return Verdict(UNDERFED, _pick(n, "running", "max_num_seqs", "offered", "gpu_util_pct"))
    if running > 0:
        return Verdict(HEALTHY, _pick(n, "running", "waiting", "kv_cache_usage"))
    return Verdict(IDLE, _pick(n, "running", "waiting"))
