"""Deploy step for multi-host replicas: write each member's files, then start the replica in
order (workers, then the head) and wait until the head serves.

    replica_deploy.run(play, fleet)    # after install and weights; instead of the service step

Why a step of its own rather than the single-host service step: a member's files depend on
the other members (the head's address, its node rank, the route to the head, a fact read
here), and the members start as one: a Ray worker joins the head's cluster, a headless mp
worker waits for the head's master port, and only the head answers HTTP. Files are written
the service step's way (vfleet.engine.changes: only what differs, unit files checked by
`systemd-analyze verify`, env files 0600); a member whose files changed, or whose units are
not running, is (re)started; nothing changed and everything active: nothing restarts.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, ClassVar

from vfleet.config.fleet import Fleet
from vfleet.config.replicas import Replica
from vfleet.config.vllm_facts import flag_available
from vfleet.engine.changes import apply, command, daemon_reload, file_change, service_changes
from vfleet.engine.facts import CommandOk, FileFact, UnitFact, gather
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, Play
from vfleet.engine.systemd import restart
from vfleet.roles.replica._facts import Route, RouteFact
from vfleet.roles.replica._preflight import peer_of
from vfleet.roles.replica._ray_render import render_member
from vfleet.roles.service import RESTART, readiness, user_change

__all__ = ["Placement", "configure_member", "run"]

q = shlex.quote
CHANGED = "replica member changed"


@dataclass(frozen=True)
class Placement:
    """A member's replica and its route to the others (the host's "replica" report section)."""

    REPORT_KEY: ClassVar[str] = "replica"

    replica: Replica
    route: Route

    def to_dict(self) -> dict[str, Any]:
        return {**self.replica.as_dict(), "route": {"dev": self.route.dev, "src": self.route.src}}


def _units(cfg: Any, replica: Replica, host: str) -> list[str]:
    """Units of a member in start order: its Ray node, then vLLM where it runs one."""
    ray = [cfg.ray_unit] if replica.backend == "ray" else []
    vllm = [cfg.unit] if (replica.backend == "mp" or host == replica.head) else []
    return ray + vllm


def configure_member(ctx: HostContext, fleet: Fleet, replica: Replica) -> None:
    """Files and enabled units of one member (nothing started here: `run` orders that)."""
    cfg = ctx.config
    address = {h: fleet.config(h).address for h in replica.members}
    route = gather(ctx, {"r": RouteFact(peer_of(replica, ctx.name, address))})["r"]
    files = render_member(replica, cfg, fleet.config(replica.head), flag_available, route=route)
    facts = gather(
        ctx,
        {f.path: FileFact(f.path, with_content=ctx.diff) for f in files}
        | {u: UnitFact(u) for u in _units(cfg, replica, ctx.name)}
        | {"user": CommandOk(f"id -u -- {q(cfg.vllm_user)}")},
    )
    changes = [] if facts["user"] else [user_change(cfg)]
    written = []
    for f in files:
        written += file_change(
            f.path,
            f.text,
            facts[f.path],
            mode=f.mode,
            owner="root",
            group="root",
            sensitive=f.mode == "0600",
            action="unit" if f.mode == "0644" else "env",
            notify=CHANGED,
        )
    if written:
        dirs = " ".join(q(d) for d in sorted({f.path.rsplit("/", 1)[0] for f in files}))
        changes += [command("dir", dirs, "make the directories", f"mkdir -p -- {dirs}"), *written, daemon_reload()]
    for u in _units(cfg, replica, ctx.name):
        changes += service_changes(u, facts[u], enabled=True, started=None)
        if facts[u].active != "active":
            ctx.notify(CHANGED)
    apply(ctx, changes)
    ctx.result.note(Placement(replica, route))


def _start(ctx: HostContext, replica: Replica) -> None:
    cfg = ctx.config
    pending = [n for n in (CHANGED, RESTART) if n in ctx.notified]  # RESTART: weights or venv changed
    if not pending or ctx.check:
        ctx.record("replica", ctx.name, Status.OK, "nothing changed: not restarted")
        return
    for u in _units(cfg, replica, ctx.name):
        restart(ctx, u)  # blocking (Type=exec): the old process is gone before readiness is probed
    for n in pending:
        ctx.notified.remove(n)
    if ctx.name == replica.head:
        waited = readiness.wait_ready(ctx)
        ctx.record("ready", cfg.unit, Status.OK, f"replica {replica.name} serving after {waited:.0f}s")


def run(play: Play, fleet: Fleet) -> None:
    """Every replica whose members are all in the play: files, then workers, then heads."""
    replicas = [r for r in fleet.replicas.values() if all(h in play.contexts for h in r.members)]
    if not replicas:
        return
    by_host = {h: r for r in replicas for h in r.members}
    play.run_step("replica: files", lambda ctx: configure_member(ctx, fleet, by_host[ctx.name]), hosts=list(by_host))
    for r in replicas:
        broken = [h for h in r.members if h not in play.active]
        if broken:
            for h in r.members:
                if h in play.active:
                    play.contexts[h].record("replica", r.name, Status.FAILED, f"member(s) {', '.join(broken)} failed")
                    play.active.remove(h)
    play.run_step(
        "replica: workers", lambda ctx: _start(ctx, by_host[ctx.name]), hosts=[h for r in replicas for h in r.workers]
    )
    play.run_step("replica: heads", lambda ctx: _start(ctx, by_host[ctx.name]), hosts=[r.head for r in replicas])
