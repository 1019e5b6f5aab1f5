"""The last measured restart of a vLLM unit, kept on its host, so that a later rolling restart or
upgrade can say before its first batch how long it expects to take.

Why on the host and not on the controller: vfleet keeps no state on the controller between runs
(a run is an inventory, a play and a report), the next run may start from another machine (a
laptop, CI), and a load time belongs to the host that measured it (its disks, its GPUs, its copy
of the weights): a host re-imaged or replaced loses its record along with its old load time. It
sits beside vfleet's other host state (the rollback point, the gateways' drained hosts) under
/var/lib/vfleet, one file per unit: <ROOT>/<unit>.json.

Written after each restart that ended serving (a rollout's; deploy's start of a host that was
not serving), atomically: a temporary file beside it, then a rename, so a reader sees the old
record or the new one, never half of one. Read back as a fact (a command plus a pure parser,
tested from data files). A file that is missing, cut short, edited into something else or holding
a value no restart takes reads as "not measured": an estimate is a courtesy, it never stops a
rollout nor ends in a traceback."""

from __future__ import annotations

import dataclasses
import json
import math
import posixpath
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.config.quoting import shell_quote as q
from vfleet.engine.errors import VfleetError
from vfleet.engine.facts import gather
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext
from vfleet.engine.strict_json import loads_strict

__all__ = [
    "ROOT",
    "MAX_BYTES",
    "MAX_S",
    "MeasuredRestart",
    "MeasuredRestartFact",
    "path_for",
    "save_command",
    "read",
    "save",
]

ROOT = "/var/lib/vfleet/restarts"
MAX_BYTES = 4096  # a record is ~200 bytes: more is not one of ours, and is not read whole
MAX_S = 86400.0  # no restart takes a day: a larger value was edited in, and would skew every estimate
_SECONDS = ("restart_s", "ready_s", "stop_s", "drain_s", "inflight_wait_s", "undrain_s")
_TEXTS = ("task", "at")


@dataclass(frozen=True)
class MeasuredRestart:
    """One restart that ended serving, in seconds: in all (stop, start, until it served) and its
    parts where measured (None: not measured apart; deploy has no drain, a replica restarts
    as a whole). `task` and `at` say which run measured it and when (UTC), for whoever reads the
    file on the host."""

    restart_s: float
    ready_s: float | None = None
    stop_s: float | None = None
    drain_s: float | None = None
    inflight_wait_s: float | None = None
    undrain_s: float | None = None
    task: str = ""
    at: str = ""

    def text(self) -> str:
        """The file's content: the measured values only, one JSON object."""
        return (
            json.dumps({k: v for k, v in dataclasses.asdict(self).items() if v not in (None, "")}, sort_keys=True)
            + "\n"
        )

    @classmethod
    def parse(cls, text: str) -> MeasuredRestart | None:
        """The record a file holds; None for an empty, cut or edited file (module doc). Keys
        it does not know are ignored: a newer vfleet may record more."""
        try:
            data: Any = loads_strict(text, "measured restart")  # no NaN, no 1e400, no "[[[[..." recursion
        except ValueError:
            return None
        if not isinstance(data, dict) or not _seconds(data.get("restart_s")):
            return None
        if not all(data.get(k) is None or _seconds(data[k]) for k in _SECONDS):
            return None
        if not all(isinstance(data.get(k, ""), str) for k in _TEXTS):
            return None
        seconds = {k: float(data[k]) for k in _SECONDS if data.get(k) is not None}
        return cls(**seconds, **{k: data[k] for k in _TEXTS if k in data})


def _seconds(value: Any) -> bool:
    """A duration a restart can take: a number (not a bool), finite, 0 to MAX_S."""
    return (
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= MAX_S
    )


@dataclass(frozen=True)
class MeasuredRestartFact:
    """The record at `path`: its first MAX_BYTES, nothing when there is no file."""

    path: str

    def command(self) -> str:
        p = q(self.path)
        return f"if [ -f {p} ]; then head -c {MAX_BYTES} -- {p}; fi"

    def process(self, lines: list[str]) -> MeasuredRestart | None:
        return MeasuredRestart.parse("\n".join(lines))


def path_for(cfg: HostConfig) -> str:
    return posixpath.join(ROOT, f"{cfg.unit}.json")


def save_command(path: str) -> str:
    """Write stdin to `path`: beside it first, then renamed over it (module doc)."""
    tmp = path + ".vfleet-tmp"
    return f"set -e; umask 022; mkdir -p -- {q(posixpath.dirname(path))}; cat > {q(tmp)}; mv -f -- {q(tmp)} {q(path)}"


def read(ctx: HostContext) -> MeasuredRestart | None:
    """This host's last measured restart (one round trip), None when it has none."""
    return gather(ctx, {"restart": MeasuredRestartFact(path_for(ctx.config))})["restart"]


def save(ctx: HostContext, record: MeasuredRestart) -> None:
    """Keep `record` as this host's last restart, stamped with the task and the time. It never
    fails the host: the restart it measures succeeded, and a record not written only makes the
    next estimate count this host as not measured (the step says so in the report)."""
    path = path_for(ctx.config)
    stamped = dataclasses.replace(
        record, task=ctx.play.task, at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    try:
        r = ctx.run(save_command(path), stdin=stamped.text(), timeout=30)
        why = None if r.ok else f"exit {r.exited}: {r.tail()}"
    except VfleetError as exc:
        why = str(exc)
    if why is not None:
        ctx.record(
            "measured restart",
            path,
            Status.OK,
            f"not recorded ({why}): the next rollout counts {ctx.name} as not measured",
        )
