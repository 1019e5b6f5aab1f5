"""Every selected gateway's access log lines for the window, all gateways at once (one round
trip each, --forks), through the runner's Play: a gateway that cannot be reached or read
becomes a result saying why instead of an exception."""

from __future__ import annotations

from typing import Sequence

from vfleet.config.access_log import ACCESS_LOG
from vfleet.engine.facts import gather
from vfleet.engine.runner import HostContext, HostFailed, Play
from vfleet.roles.usage._logread import AccessLogLines, LogLines
from vfleet.roles.usage._window import Window

__all__ = ["read_logs"]


def read_logs(play: Play, gateways: Sequence[str], win: Window) -> dict[str, LogLines]:
    """{gateway: its lines}; a gateway whose log could not be read is left out (the play's
    result for it says why)."""
    fact = AccessLogLines(win.since, win.until, path=ACCESS_LOG)

    def one(ctx: HostContext) -> LogLines:
        got: LogLines = gather(ctx, {"log": fact})["log"]
        if got.error:
            raise HostFailed(got.error if got.error.startswith("cannot ") else f"{ACCESS_LOG}: {got.error}")
        return got

    return play.run_step("usage", one, hosts=list(gateways))
