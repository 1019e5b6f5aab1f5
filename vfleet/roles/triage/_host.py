"""Triage on a host: its vLLM unit's state and the end of its journal, in ONE round trip (two
facts gathered together), then the classifier on the journal when the unit failed or keeps
restarting. The facts are a command plus a parser each, tested from data files
(tests/unit/data/triage/host/)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vfleet.config.quoting import shell_quote
from vfleet.engine.facts import gather
from vfleet.engine.runner import HostContext
from vfleet.engine.systemd import journal_command, journal_lines, one_line

from ._classify import Verdict, classify_lines, printable

__all__ = [
    "JOURNAL_LINES",
    "FAILURE_LINES",
    "UnitHealth",
    "UnitHealthFact",
    "JournalFact",
    "HostTriage",
    "triage_host",
    "FailureJournal",
    "failure_journal",
]

# Enough for a start's whole traceback on 8 ranks and the lines before it that tell its phase.
JOURNAL_LINES = 1000
# What a failure message reads (the journal tail it already fetched): the last start's error.
FAILURE_LINES = 200


@dataclass(frozen=True)
class UnitHealth:
    active: str  # systemd's ActiveState: active, failed, activating, inactive...
    sub: str  # SubState: running, failed, auto-restart, dead...
    restarts: int  # NRestarts since the unit was last started by hand
    result: str  # Result: success, exit-code, signal, oom-kill, timeout...

    @property
    def read(self) -> bool:
        """Whether systemctl named a state at all: without systemd, or when `systemctl show`
        fails, it prints nothing, and such a host is not known to be up (its own result)."""
        return self.active != "unknown"

    @property
    def down(self) -> bool:
        """Failed, or between restarts, or started again after a crash (what triage is for)."""
        return (
            self.active == "failed" or self.sub == "auto-restart" or (self.active == "activating" and self.restarts > 0)
        )

    def describe(self) -> str:
        return f"{self.active} ({self.sub}), {self.restarts} restarts, result {self.result}"


@dataclass(frozen=True)
class UnitHealthFact:
    unit: str

    def command(self) -> str:
        return f"systemctl show -p ActiveState,SubState,NRestarts,Result -- {shell_quote(self.unit)}"

    def process(self, lines: list[str]) -> UnitHealth:
        props = dict(ln.strip().partition("=")[::2] for ln in lines if "=" in ln)
        restarts = props.get("NRestarts", "")
        return UnitHealth(
            props.get("ActiveState") or "unknown",
            props.get("SubState") or "unknown",
            int(restarts) if restarts.isdigit() else 0,
            props.get("Result") or "unknown",
        )


@dataclass(frozen=True)
class JournalFact:
    """The unit's last journal lines, as vLLM printed them (-o cat: no journal prefixes)."""

    unit: str
    lines: int = JOURNAL_LINES

    def command(self) -> str:
        return journal_command(self.unit, self.lines)

    def process(self, lines: list[str]) -> list[str]:
        return lines


@dataclass(frozen=True)
class HostTriage:
    unit: str
    health: UnitHealth
    verdict: Verdict | None  # None: the unit is not down (or its state unread), nothing to classify


def triage_host(ctx: HostContext) -> HostTriage:
    """The unit's state and, when it is down, the class of its journal (one round trip)."""
    unit = ctx.config.unit
    facts = gather(ctx, {"health": UnitHealthFact(unit), "journal": JournalFact(unit)})
    health: UnitHealth = facts["health"]
    if not health.read or not health.down:
        return HostTriage(unit, health, None)
    note = f"the last {JOURNAL_LINES} journal lines of {unit}"
    return HostTriage(unit, health, classify_lines(facts["journal"], note=note))


@dataclass(frozen=True)
class FailureJournal:
    """The journal tail a failure message fetches anyway, and its class: one round trip gives
    the message's tail, the report's and the triage (no extra trip in the rollout path)."""

    lines: list[str]
    verdict: Verdict

    def tail(self, n: int = 15) -> str:
        return printable(one_line(self.lines[-n:]))

    def seen(self) -> str:
        """'; <class>: <short next step>' for the message, nothing when the class is unknown."""
        return "" if self.verdict.cls.id == "unknown" else f"; {self.verdict.one_line()}"

    def data(self) -> dict[str, Any]:
        return {"journal": self.tail(40), "triage": self.verdict.to_dict()}


def failure_journal(ctx: HostContext, unit: str) -> FailureJournal:
    lines = journal_lines(ctx, unit, FAILURE_LINES)
    return FailureJournal(lines, classify_lines(lines, note=f"the last {FAILURE_LINES} journal lines of {unit}"))
