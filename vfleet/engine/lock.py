"""One controller at a time on a fleet: a lock file on each host a changing run touches.

Two controllers deploying the same hosts at once would interleave drains, restarts and file
writes. Each changing run takes /run/vfleet/fleet.lock on every host of its play (created
with noclobber, so exactly one taker wins), holding one line: owner (user@controller), pid,
since (epoch seconds), ttl, task. A second run stops before changing anything, with one line
naming the holder. A lock outlives a killed controller until its TTL passes, except that the
same controller sees its holder's pid is gone and takes it over at once. /run is a tmpfs:
a reboot clears it."""

from __future__ import annotations

import getpass
import os
import shlex
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from vfleet.engine.errors import VfleetError
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, Play

__all__ = [
    "LOCK_PATH",
    "LOCK_TTL_S",
    "Holder",
    "owner_id",
    "acquire_command",
    "release_command",
    "parse_holder",
    "acquire",
    "release",
    "locked",
]

LOCK_PATH = "/run/vfleet/fleet.lock"
LOCK_TTL_S = 3600  # longer than a deploy; a lock older than this is taken over
q = shlex.quote


@dataclass(frozen=True)
class Holder:
    owner: str
    pid: int
    since: int
    ttl: int
    task: str

    def line(self) -> str:
        return f"{self.owner} {self.pid} {self.since} {self.ttl} {self.task}"

    def describe(self, now: float) -> str:
        started = time.strftime("%H:%M:%S UTC", time.gmtime(self.since))
        return (
            f"{self.task} by {self.owner} pid {self.pid} since {started} "
            f"(expires in {max(0, int(self.since + self.ttl - now))}s)"
        )


def owner_id() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


def acquire_command(mine: Holder, *, force: bool = False) -> str:
    """Take the lock unless someone else holds it and it has not expired; prints 'taken
    [previous holder line]' or 'held <holder line>'."""
    f, line = q(LOCK_PATH), q(mine.line())
    take = f"printf '%s\\n' {line} > {f}.new && mv -f {f}.new {f}"
    return (
        f"mkdir -p {q(os.path.dirname(LOCK_PATH))}; "
        f"if (set -C; printf '%s\\n' {line} > {f}) 2>/dev/null; then echo taken; exit 0; fi; "
        f"cur=$(head -n1 {f} 2>/dev/null); set -- $cur; now=$(date +%s); "
        f'if {"true" if force else "false"} || [ "$1 $2" = {q(mine.owner + " " + str(mine.pid))} ] || '
        f'[ $(( ${{3:-0}} + ${{4:-0}} )) -lt "$now" ]; then {take}; echo "taken $cur"; exit 0; fi; '
        f'echo "held $cur"'
    )


def release_command(mine: Holder) -> str:
    """Remove the lock only while it is still ours."""
    f = q(LOCK_PATH)
    return f'[ "$(head -n1 {f} 2>/dev/null)" = {q(mine.line())} ] && rm -f {f}; true'


def parse_holder(text: str) -> Holder | None:
    parts = text.split()
    if len(parts) < 5 or not (parts[1].isdigit() and parts[2].isdigit() and parts[3].isdigit()):
        return None
    return Holder(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), " ".join(parts[4:]))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def acquire(play: Play, task: str, ttl: int = LOCK_TTL_S) -> tuple[Holder, list[str]]:
    """Take the lock on every active host of the play, or raise one line naming the holder
    (after giving back the hosts taken); returns our holder and the hosts it was taken on."""
    mine = Holder(owner_id(), os.getpid(), int(time.time()), ttl, task)
    held: dict[str, Holder] = {}
    taken: list[str] = []

    def take(ctx: HostContext) -> None:
        out = ctx.must(acquire_command(mine), what="take the fleet lock").stdout.strip()
        if out.startswith("held "):
            other = parse_holder(out[5:])
            if other and other.owner == mine.owner and not _pid_alive(other.pid):  # our own dead run
                out = ctx.must(acquire_command(mine, force=True), what="take the fleet lock").stdout.strip()
            elif other:
                held[ctx.name] = other
                return
        taken.append(ctx.name)
        prev = parse_holder(out[6:]) if out.startswith("taken ") else None
        if prev:
            ctx.record(
                "lock",
                LOCK_PATH,
                Status.OK,
                f"took over the lock of {prev.describe(time.time())}: expired, or its controller process is gone",
            )

    play.run_step("fleet lock", take)
    if held:
        name, other = sorted(held.items())[0]
        release(play, mine, taken)
        raise VfleetError(
            f"fleet is locked: {other.describe(time.time())} holds {LOCK_PATH} on {name}"
            + (f" and {len(held) - 1} more host(s)" if len(held) > 1 else "")
            + "; wait for it, or remove that file if that run is dead"
        )
    return mine, taken


def release(play: Play, mine: Holder, names: list[str]) -> None:
    """Give the lock back on the hosts it was taken on, failed ones too (in parallel: one
    round trip each, never stopping at a host that went away)."""

    def give(name: str) -> None:
        try:
            play.contexts[name].run(release_command(mine), timeout=30)
        except (VfleetError, OSError):
            pass

    if names:
        with ThreadPoolExecutor(max_workers=max(1, min(play.options.forks, len(names)))) as pool:
            list(pool.map(give, names))


@contextmanager
def locked(play: Play) -> Iterator[None]:
    """The fleet lock around a changing run (not in check mode: it changes nothing); given
    back even when the run stops with an error."""
    if play.options.check:
        yield
        return
    mine, taken = acquire(play, play.task)
    try:
        yield
    finally:
        release(play, mine, taken)
