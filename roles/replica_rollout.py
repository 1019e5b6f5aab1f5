"""Rolling restarts and upgrades with multi-host replicas: a replica is one unit.

    batches = unit_batches("1,50%", vllm_hosts, replicas)    # [["gpu01"], ["gpu03"]]: unit keys
    members = unit_members("gpu01", replicas)               # ("gpu01", "gpu02"): head first
    steps = restart_steps(replicas["r1"], upgrade=True)      # the order one unit is restarted in

Why separate from roles/rollout.py: the rollout there batches hosts; a replica must be taken
out of the gateways as its one backend (the head: workers serve no HTTP), restarted as a
whole (its ranks only work together) and counted once in a batch. So batches are planned
over *unit keys* (the head of a replica, or a single host), with rollout.plan_batches
unchanged, and the key is the host the rollout drains, waits on and probes for readiness.
Restart order inside a unit: the head's vLLM stops first (it drives the workers), then each
worker (venv switched on upgrade, then its Ray node or headless vLLM restarted), then the
head's Ray node, then the head's vLLM; the unit is ready only when the head serves.
"""
from __future__ import annotations

from typing import Mapping

from roles.replica import Replica
from roles.rollout import plan_batches

__all__ = ["unit_key", "unit_members", "unit_batches", "restart_steps"]


def unit_key(host: str, replicas: Mapping[str, Replica]) -> str:
    """The host that stands for this host's unit: its replica's head, or itself."""
    return next((r.head for r in replicas.values() if host in r.members), host)


def unit_members(key: str, replicas: Mapping[str, Replica]) -> tuple[str, ...]:
    """Every host of a unit, head first."""
    return next((r.members for r in replicas.values() if r.head == key), (key,))


def unit_batches(spec: str, hosts: list[str], replicas: Mapping[str, Replica]) -> list[list[str]]:
    """plan_batches over units: a replica counts once (any of its members selected selects it),
    in the order its first member appears; a percentage is of units, not of hosts."""
    keys: list[str] = []
    for h in hosts:
        k = unit_key(h, replicas)
        if k not in keys:
            keys.append(k)
    return plan_batches(spec, keys)


def restart_steps(replica: Replica, *, upgrade: bool) -> list[tuple[str, str]]:
    """(host, action) in order; actions: stop-vllm, switch-venv, restart-ray, start-vllm,
    wait-ready. The mp backend has no Ray: its workers run a headless vLLM instead."""
    ray = replica.backend == "ray"
    steps: list[tuple[str, str]] = [(replica.head, "stop-vllm")]
    if not ray:
        steps += [(w, "stop-vllm") for w in replica.workers]
    for w in replica.workers:
        if upgrade:
            steps.append((w, "switch-venv"))
        steps.append((w, "restart-ray" if ray else "start-vllm"))
    if upgrade:
        steps.append((replica.head, "switch-venv"))
    if ray:
        steps.append((replica.head, "restart-ray"))
    return steps + [(replica.head, "start-vllm"), (replica.head, "wait-ready")]
