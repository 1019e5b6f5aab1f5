"""systemd operations: unit enabled/started state, daemon-reload, restart, journal tails.
Restarts are meant to be handlers: they run only when a unit or its environment changed."""
from __future__ import annotations

import shlex
import time

from fleet.results import Status, StepResult
from fleet.runner import HostContext, HostFailed

q = shlex.quote


def unit_state(ctx: HostContext, unit: str) -> tuple[str, str]:
    """(is-enabled, is-active) words, e.g. ("enabled", "active") or ("not-found", "inactive")."""
    r = ctx.run(f"systemctl is-enabled {q(unit)} 2>/dev/null || true; systemctl is-active {q(unit)} 2>/dev/null || true")
    words = r.stdout.split()
    enabled = words[0] if len(words) > 1 else "not-found"
    active = words[-1] if words else "unknown"
    return enabled, active


def service(ctx: HostContext, unit: str, *, enabled: bool = True, started: bool = True) -> StepResult:
    """Ensure a unit is enabled (or not) and running (or stopped). Starting a stopped unit is a
    change; a running one is left alone (restarts are a handler's job)."""
    t0 = time.monotonic()
    is_enabled, is_active = unit_state(ctx, unit)
    todo: list[str] = []
    if enabled and is_enabled not in ("enabled", "static", "alias"):
        todo.append("enable")
    if not enabled and is_enabled == "enabled":
        todo.append("disable")
    if started and is_active != "active":
        todo.append("start")
    if not started and is_active in ("active", "activating", "reloading"):
        todo.append("stop")
    if not todo:
        return ctx.record("service", unit, Status.OK, f"{is_enabled}, {is_active}", elapsed_s=time.monotonic() - t0)
    if ctx.check:
        return ctx.record("service", unit, Status.CHANGED, "would " + ", ".join(todo))
    for verb in todo:
        r = ctx.run(f"systemctl {verb} {q(unit)}")
        if not r.ok:
            raise HostFailed(f"systemctl {verb} {unit} failed: {r.tail()} | journal: {journal_tail(ctx, unit)}")
    return ctx.record("service", unit, Status.CHANGED, ", ".join(todo), elapsed_s=time.monotonic() - t0)


def daemon_reload(ctx: HostContext) -> StepResult:
    if ctx.check:
        return ctx.record("systemd", "daemon-reload", Status.SKIPPED, "check mode")
    ctx.must("systemctl daemon-reload", what="systemctl daemon-reload")
    return ctx.record("systemd", "daemon-reload", Status.CHANGED)


def _start_or_restart(ctx: HostContext, verb: str, done: str, unit: str, no_block: bool) -> StepResult:
    if ctx.check:
        return ctx.record("service", unit, Status.SKIPPED, f"check mode: would {verb}")
    t0 = time.monotonic()
    flag = " --no-block" if no_block else ""
    # a unit that crash-looped into its start limit refuses a plain (re)start: clear that first
    r = ctx.run(f"systemctl reset-failed {q(unit)} 2>/dev/null; systemctl {verb}{flag} {q(unit)}")
    if not r.ok:
        raise HostFailed(f"systemctl {verb} {unit} failed: {r.tail()} | journal: {journal_tail(ctx, unit)}")
    return ctx.record("service", unit, Status.CHANGED, done, elapsed_s=time.monotonic() - t0)


def restart(ctx: HostContext, unit: str, *, no_block: bool = False) -> StepResult:
    """Restart a unit (a handler). With no_block the caller waits for readiness itself."""
    return _start_or_restart(ctx, "restart", "restarted", unit, no_block)


def start(ctx: HostContext, unit: str, *, no_block: bool = False) -> StepResult:
    """Start a stopped unit, also one that failed before (a rollout's stop, switch, start)."""
    return _start_or_restart(ctx, "start", "started", unit, no_block)


def journal_tail(ctx: HostContext, unit: str, lines: int = 15) -> str:
    """The last journal lines of a unit, joined on one line for a report message."""
    r = ctx.run(f"journalctl -u {q(unit)} -n {int(lines)} --no-pager -o cat 2>/dev/null | tail -n {int(lines)}")
    return " | ".join(line.strip() for line in r.stdout.splitlines() if line.strip())
