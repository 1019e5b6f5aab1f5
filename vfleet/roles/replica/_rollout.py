"""Rolling restarts and upgrades with multi-host replicas: a replica is one unit.

    batches = unit_batches("1,50%", vllm_hosts, replicas)    # [["gpu01"], ["gpu03"]]: unit keys
    members = unit_members("gpu01", replicas)               # ("gpu01", "gpu02"): head first
    steps = restart_steps(replicas["r1"], upgrade=True)      # the order one unit is restarted in

Why separate from vfleet/roles/rollout/_rolling.py: the rollout there batches hosts; a replica must be taken
out of the gateways as its one backend (the head: workers serve no HTTP), restarted as a
whole (its ranks only work together) and counted once in a batch. So batches are planned
over *unit keys* (the head of a replica, or a single host), with rollout.plan_batches
unchanged, and the key is the host the rollout drains, waits on and probes for readiness.
Restart order inside a unit: the head's vLLM stops first (it drives the workers), then each
worker (venv switched on upgrade, then its Ray node or headless vLLM restarted), then the
head's Ray node, then the head's vLLM; the unit is ready only when the head serves.
"""

from __future__ import annotations

import shlex
import time
from typing import Any, Mapping

from vfleet.config.fleet import Fleet
from vfleet.config.replicas import Replica
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext
from vfleet.engine.systemd import start
from vfleet.roles.install import venv as vllm_install
from vfleet.roles.replica import _deploy as replica_deploy
from vfleet.roles.rollout import RestartTimes, Rollout, plan_batches
from vfleet.roles.service import readiness

__all__ = ["unit_key", "unit_members", "unit_batches", "restart_steps", "unit_keys", "ReplicaRollout"]

q = shlex.quote


def unit_key(host: str, replicas: Mapping[str, Replica]) -> str:
    """The host that stands for this host's unit: its replica's head, or itself."""
    return next((r.head for r in replicas.values() if host in r.members), host)


def unit_members(key: str, replicas: Mapping[str, Replica]) -> tuple[str, ...]:
    """Every host of a unit, head first."""
    return next((r.members for r in replicas.values() if r.head == key), (key,))


def unit_keys(hosts: list[str], replicas: Mapping[str, Replica]) -> list[str]:
    """The units these hosts belong to, once each, in order of first appearance."""
    keys: list[str] = []
    for h in hosts:
        k = unit_key(h, replicas)
        if k not in keys:
            keys.append(k)
    return keys


def unit_batches(spec: str, hosts: list[str], replicas: Mapping[str, Replica]) -> list[list[str]]:
    """plan_batches over units: a replica counts once (any of its members selected selects it),
    in the order its first member appears; a percentage is of units, not of hosts."""
    return plan_batches(spec, unit_keys(hosts, replicas))


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


class ReplicaRollout(Rollout):
    """Rollout whose `vllm_hosts` are unit keys: a replica's head stands for the replica and
    restarting it runs `restart_steps` over every member; single hosts roll as before. The
    drain, in-flight wait, readiness and smoke of vfleet/roles/rollout/_rolling.py apply to the head, the
    replica's one backend. A failed member fails the head's unit and the rollback of
    vfleet/roles/rollout/_rolling.py then restarts the head on its previous venv."""

    def __init__(self, *args: Any, fleet: Fleet, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.fleet = fleet

    def restart_host(self, ctx: HostContext, new_venv: str | None) -> RestartTimes:
        replica = next((r for r in self.fleet.replicas.values() if r.head == ctx.name), None)
        if replica is None:
            return super().restart_host(ctx, new_venv)
        t0 = time.monotonic()
        for host, action in restart_steps(replica, upgrade=bool(new_venv)):
            self._member_step(self.play.contexts[host], replica, action)
        total = time.monotonic() - t0
        return RestartTimes(ready_s=total, restart_s=total)

    def _member_step(self, mctx: HostContext, replica: Replica, action: str) -> None:
        cfg = mctx.config
        mctx.step_name = ctx_step = f"replica {replica.name}: {action}"
        if action == "stop-vllm":
            mctx.must(
                f"systemctl stop -- {q(cfg.unit)}", what=f"stop {cfg.unit}", timeout=float(cfg.shutdown_timeout) + 120
            )
        elif action == "switch-venv":
            vllm_install.link_current(mctx, cfg, cfg.venv_path)
            replica_deploy.configure_member(mctx, self.fleet, replica)
        elif action == "restart-ray":
            mctx.must(f"systemctl restart -- {q(cfg.ray_unit)}", what=f"restart {cfg.ray_unit}", timeout=120)
        elif action == "start-vllm":
            start(mctx, cfg.unit, no_block=True)
        elif action == "wait-ready":
            readiness.wait_ready(mctx)
        mctx.record("replica", mctx.name, Status.CHANGED, ctx_step)
