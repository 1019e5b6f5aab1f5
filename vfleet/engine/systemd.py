"""systemd actions that are not states: restart and start (handlers, rollouts), stop, and
journal tails for error messages. Enabled/started states are planned with
vfleet.engine.changes.service_changes from a vfleet.engine.facts.UnitFact; daemon-reload is
vfleet.engine.changes.daemon_reload. Unit names are passed after `--`, so none is read as an option."""
from __future__ import annotations

import shlex
import time

from vfleet.engine.results import Status, StepResult
from vfleet.engine.runner import HostContext, HostFailed

q = shlex.quote

__all__ = ["restart", "start", "stop", "journal_tail"]


def _start_or_restart(ctx: HostContext, verb: str, done: str, unit: str, no_block: bool) -> StepResult:
    if ctx.check:
        return ctx.record("service", unit, Status.SKIPPED, f"check mode: would {verb}")
    t0 = time.monotonic()
    flag = " --no-block" if no_block else ""
    # a unit that crash-looped into its start limit refuses a plain (re)start: clear that first
    r = ctx.run(f"systemctl reset-failed -- {q(unit)} 2>/dev/null; systemctl {verb}{flag} -- {q(unit)}")
    if not r.ok:
        raise HostFailed(f"systemctl {verb} {unit} failed: {r.tail()} | journal: {journal_tail(ctx, unit)}")
    return ctx.record("service", unit, Status.CHANGED, done, elapsed_s=time.monotonic() - t0)


def restart(ctx: HostContext, unit: str, *, no_block: bool = False) -> StepResult:
    """Restart a unit (a handler). With no_block the caller waits for readiness itself."""
    return _start_or_restart(ctx, "restart", "restarted", unit, no_block)


def start(ctx: HostContext, unit: str, *, no_block: bool = False) -> StepResult:
    """Start a stopped unit, also one that failed before (a rollout's stop, switch, start)."""
    return _start_or_restart(ctx, "start", "started", unit, no_block)


def stop(ctx: HostContext, unit: str, *, timeout: float) -> None:
    """Stop a unit and wait for it (vLLM drains in-flight requests on SIGTERM)."""
    ctx.run(f"systemctl stop -- {q(unit)}", timeout=timeout)


def journal_tail(ctx: HostContext, unit: str, lines: int = 15) -> str:
    """The last journal lines of a unit, joined on one line for a report message."""
    r = ctx.run(f"journalctl -u {q(unit)} -n {int(lines)} --no-pager -o cat 2>/dev/null | tail -n {int(lines)}")
    return " | ".join(line.strip() for line in r.stdout.splitlines() if line.strip())
