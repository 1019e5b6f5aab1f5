"""Which CPUs each lab host runs on: one core per vLLM host, every core for the gateways.

WHY: on a real fleet no host's vLLM can take the CPU another host needs. Lab hosts share
this machine, and with the CPUs shared a serving host's EngineCore and API server took ~1.9
of 2 cores while a restarted host loaded at 0.2-0.5% of one (docs/faults.md). A vLLM host
gets one core of its own (host k of the `vllm` group on core k mod the cores); gateways are
nginx only and share every core with the controller, as the issue that asked for this says."""

from __future__ import annotations

import os


def available() -> list[int]:
    """The CPUs this process may run on (a container or taskset may give fewer than nproc)."""
    return sorted(os.sched_getaffinity(0))


def assign(names: list[str], gateways: int, cpus: list[int]) -> dict[str, list[int]]:
    """{host: its CPUs}: the first len(names) - gateways hosts (the `vllm` group, as
    inventory_writer splits them) one core each, round robin; the gateways every CPU."""
    split = len(names) - gateways
    out = {name: [cpus[k % len(cpus)]] for k, name in enumerate(names[:split])}
    out.update({name: list(cpus) for name in names[split:]})
    return out


def to_list(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5': the kernel's cpulist format (cpuset.cpus, taskset -c,
    VLLM_CPU_OMP_THREADS_BIND all read it)."""
    parts: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def from_list(text: str) -> list[int]:
    """'0-2,5' -> [0, 1, 2, 5] (the inverse of to_list; blank -> [])."""
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.strip().split(","))):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out
