"""systemd actions that are not states: restart and start (handlers, rollouts), stop, and
journal tails for error messages. Enabled/started states are planned with
vfleet.engine.changes.service_changes from a vfleet.engine.facts.UnitFact; daemon-reload is
vfleet.engine.changes.daemon_reload. Unit names are passed after `--` (or, for journalctl, as
the argument of -u, which getopt takes whatever it starts with), and proven not to start with
'-' first, so none is read as an option."""

from __future__ import annotations

import shlex
import time

from vfleet.engine.owned_paths import plain_operand
from vfleet.engine.results import Status, StepResult
from vfleet.engine.runner import HostContext, HostFailed

q = shlex.quote

__all__ = [
    "restart",
    "start",
    "stop",
    "journal_tail",
    "journal_lines",
    "one_line",
    "start_command",
    "stop_command",
    "journal_command",
]


def _unit(unit: str) -> str:
    return q(plain_operand(unit, "unit"))


def start_command(verb: str, unit: str, no_block: bool = False) -> str:
    """`systemctl restart|start` of a unit, clearing a crash loop's start limit first."""
    flag = " --no-block" if no_block else ""
    return f"systemctl reset-failed -- {_unit(unit)} 2>/dev/null; systemctl {verb}{flag} -- {_unit(unit)}"


def stop_command(unit: str) -> str:
    return f"systemctl stop -- {_unit(unit)}"


def journal_command(unit: str, lines: int) -> str:
    """The unit is the argument of -u (journalctl has no unit operand to put after `--`)."""
    return f"journalctl -u {_unit(unit)} -n {int(lines)} --no-pager -o cat 2>/dev/null | tail -n {int(lines)}"


def _start_or_restart(ctx: HostContext, verb: str, done: str, unit: str, no_block: bool) -> StepResult:
    if ctx.check:
        return ctx.record("service", unit, Status.SKIPPED, f"check mode: would {verb}")
    t0 = time.monotonic()
    # a unit that crash-looped into its start limit refuses a plain (re)start: clear that first
    r = ctx.run(start_command(verb, unit, no_block))
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
    ctx.run(stop_command(unit), timeout=timeout)


def journal_lines(ctx: HostContext, unit: str, lines: int) -> list[str]:
    """The last journal lines of a unit, as printed (-o cat)."""
    return ctx.run(journal_command(unit, lines)).stdout.splitlines()


def one_line(lines: list[str]) -> str:
    """Journal lines joined on one line for a report message."""
    return " | ".join(line.strip() for line in lines if line.strip())


def journal_tail(ctx: HostContext, unit: str, lines: int = 15) -> str:
    """The last journal lines of a unit, joined on one line for a report message."""
    return one_line(journal_lines(ctx, unit, lines))
