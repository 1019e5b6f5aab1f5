"""What a rolling restart records, as typed values: per host (RolloutInfo, RestartTimes,
RestoredUntried) and per run (RolloutSummary, Converged).

Why records rather than dicts under string keys: the rollout's own steps read them back (the
last lines, the hosts left untried, where each host serves from) and a misspelt key read
None silently. Each is also a section of the --report JSON (engine/results.py Reported):
to_dict() gives exactly the keys and values the report always had, absent ones left out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["RestartTimes", "RolloutInfo", "RolloutSummary", "Converged", "RestoredUntried"]


@dataclass(frozen=True)
class RestartTimes:
    """How long one host's restart took: stop (None where it is not measured apart: a
    replica restarts as a whole), until it served, in all."""

    ready_s: float
    restart_s: float
    stop_s: float | None = None


@dataclass
class RolloutInfo:
    """One host's restart in a rollout, filled in as it goes; None: not reached (left out of
    the report). `started` once the venv it served from was read (a host lost before that
    shows {}). `serving` counts once the restart is over (undrained, or rolled back): the
    venv it serves from, None for a host rolled back but still failing."""

    REPORT_KEY: ClassVar[str] = "rollout"

    started: bool = False
    from_venv: str | None = None
    from_version: str | None = None  # what from_venv's marker records: a rollback renders its unit (not reported)
    drain_s: float | None = None
    inflight_wait_s: float | None = None
    stop_s: float | None = None
    ready_s: float | None = None
    restart_s: float | None = None
    error: str | None = None
    waiting_for: str | None = None
    waited_s: float | None = None
    rolled_back: bool = False
    undrain_s: float | None = None
    serving: str | None = None

    @property
    def over(self) -> bool:
        return self.rolled_back or self.undrain_s is not None

    def took(self, times: RestartTimes) -> None:
        """Keep a restart's times, to the hundredth of a second as the report shows them."""
        self.stop_s = None if times.stop_s is None else round(times.stop_s, 2)
        self.ready_s, self.restart_s = round(times.ready_s, 2), round(times.restart_s, 2)

    def to_dict(self) -> dict[str, Any]:
        if not self.started:
            return {}
        d: dict[str, Any] = {"from": self.from_venv}
        for key, value in (
            ("drain_s", self.drain_s),
            ("inflight_wait_s", self.inflight_wait_s),
            ("stop_s", self.stop_s),
            ("ready_s", self.ready_s),
            ("restart_s", self.restart_s),
            ("error", self.error),
            ("waiting_for", self.waiting_for),
            ("waited_s", self.waited_s),
        ):
            if value is not None:
                d[key] = value
        if self.rolled_back:
            d["rolled_back"] = True
        if self.undrain_s is not None:
            d["undrain_s"] = self.undrain_s
        if self.over:
            d["serving"] = self.serving
        return d


@dataclass(frozen=True)
class RolloutSummary:
    """A rollout's outcome: its batches, why it stopped (None: it did not), the drained
    hosts it put back first, where each host serves from, who is left drained, and one
    last line per host (printed after the recap); how long its batches were expected to take
    (None: no host measured yet) and took, in seconds, and the line that says both."""

    REPORT_KEY: ClassVar[str] = "rollout"

    batches: list[list[str]]
    stopped: str | None
    converged: list[str]
    serving: dict[str, str | None]
    drained: list[str]
    lines: list[str] = field(default_factory=list)
    expected_s: float | None = None
    took_s: float | None = None
    total_line: str = ""

    @property
    def closing_lines(self) -> list[str]:
        """What the run prints last: each host's line, then the total."""
        return [*self.lines, *([self.total_line] if self.total_line else [])]

    def to_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "stopped": self.stopped,
            "converged": self.converged,
            "serving": self.serving,
            "drained": self.drained,
            "lines": self.lines,
            "expected_s": self.expected_s,
            "took_s": self.took_s,
        }


@dataclass(frozen=True)
class Converged:
    """Hosts an earlier run left drained that a deploy found healthy and put back."""

    REPORT_KEY: ClassVar[str] = "converged"

    hosts: list[str]

    def to_dict(self) -> list[str]:
        return self.hosts


@dataclass(frozen=True)
class RestoredUntried:
    """The batches stopped before this host's restart: its saved files were put back."""

    REPORT_KEY: ClassVar[str] = "restored_untried"

    def to_dict(self) -> bool:
        return True
