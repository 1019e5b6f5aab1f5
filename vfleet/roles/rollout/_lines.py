"""The last lines of a rolling restart or upgrade: one per host it was to restart, saying what
it waited for and how long. A rollout that ends non-zero after half an hour must say why in
its last lines, host by host, not only in a recap row further up.

Pure functions of what the rollout recorded per host (its RolloutInfo: the waits in seconds,
and on a failure the phase it was in and how long it waited there) and of the run's summary
(`stopped`), so they are tested from data without a host; plus `waiting` and `failed`, which
the rollout calls to note the phase a host is in and, on a failure, write it into that
host's info."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping

from vfleet.engine.results import HostResult, Status
from vfleet.engine.runner import HostContext
from vfleet.roles.rollout._records import RolloutInfo

__all__ = ["Waiting", "waiting", "failed", "host_line", "host_lines"]


def _waits(info: RolloutInfo) -> list[tuple[float, str]]:
    """What each of a host's recorded waits was for, in the order a restart does them."""
    waits = (
        (info.drain_s, "another host to serve"),
        (info.inflight_wait_s, "in-flight requests to finish"),
        (info.stop_s, "vLLM to stop"),
        (info.ready_s, "vLLM to be ready and answer"),
    )
    return [(s, what) for s, what in waits if s is not None]


def _short(error: str, limit: int = 240) -> str:
    """The error without its journal tail (the report has it): a line, not a page."""
    head = error.split("; journal:", 1)[0].replace("\n", " ")
    return head if len(head) <= limit else head[: limit - 3] + "..."


def host_line(
    name: str, info: RolloutInfo | None, *, status: str = "ok", message: str = "", stopped: str | None = None
) -> str:
    """One host's line: restarted (with each wait), failed (what it was waiting for, how long,
    and where it was left), or never started (the batches stopped, or the host failed before)."""
    if info is None or not info.started:
        if status in ("failed", "unreachable"):
            return f"{name}: {status} before its restart: {_short(message)}"
        return f"{name}: not restarted: {stopped or 'not reached'}"
    waits = ", ".join(f"{s:.1f}s for {what}" for s, what in _waits(info))
    if info.error is None:
        return f"{name}: restarted in {info.restart_s or 0:.1f}s; waited {waits}"
    where = (
        ("rolled back and serving again" if info.serving else "rolled back but still failing: left out of the gateways")
        if info.rolled_back
        else "not rolled back"
    )
    phase = info.waiting_for or "its restart"
    done = f" (after {waits})" if waits else ""
    return f"{name}: failed after waiting {info.waited_s or 0:.1f}s for {phase}{done}: {_short(info.error)}; {where}"


def host_lines(hosts: list[str], results: Mapping[str, HostResult], stopped: str | None) -> list[str]:
    """Each host's line from its result: its status, its last failure, its RolloutInfo."""

    def line(name: str) -> str:
        r = results[name]
        last = next((s for s in reversed(r.steps) if s.status in (Status.FAILED, Status.UNREACHABLE)), None)
        return host_line(
            name, r.get(RolloutInfo), status=r.status.value, message=last.message if last else "", stopped=stopped
        )

    return [line(h) for h in hosts]


@dataclass(frozen=True)
class Waiting:
    """What a host's restart waits for right now, since when: a failure names it, with how
    long it waited (host_line turns that into the host's last line)."""

    what: str
    since: float


def waiting(ctx: HostContext, what: str) -> None:
    ctx.result.note(Waiting(what, time.monotonic()))


def failed(ctx: HostContext, info: RolloutInfo, exc: Exception) -> None:
    """Record the failure with the phase it happened in and how long that phase had waited."""
    info.error = str(exc)
    w = ctx.result.get(Waiting)
    if w is not None:
        info.waiting_for, info.waited_s = w.what, round(time.monotonic() - w.since, 1)
