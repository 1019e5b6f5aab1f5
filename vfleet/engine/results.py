"""Per-host, per-operation results: the vocabulary of the recap and of the JSON report.

Statuses follow Ansible's recap so operators read them without a legend: an operation is
ok (already as wanted), changed, failed, unreachable or skipped."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")


@runtime_checkable
class Reported(Protocol):
    """A typed record that is also a section of the JSON report, under `REPORT_KEY`: steps
    pass it on as a value (`get(Type)`), and the report still shows it as plain JSON."""

    REPORT_KEY: ClassVar[str]

    def to_dict(self) -> Any: ...


def keep(record: Any, notes: dict[type, Any], sections: dict[str, Any]) -> None:
    """Note a record by its type; a Reported one also takes its place among the report's
    sections (where it was first noted: a later record of its kind replaces it there)."""
    notes[type(record)] = record
    if isinstance(record, Reported):
        sections[record.REPORT_KEY] = record


def plain(sections: dict[str, Any]) -> dict[str, Any]:
    """The sections as JSON values: each record as its to_dict(), in order."""
    return {k: (v.to_dict() if isinstance(v, Reported) else v) for k, v in sections.items()}


class Status(str, Enum):
    OK = "ok"
    CHANGED = "changed"
    FAILED = "failed"
    UNREACHABLE = "unreachable"
    SKIPPED = "skipped"


# Worst first: a host's overall status is the worst of its operations.
SEVERITY = [Status.UNREACHABLE, Status.FAILED, Status.CHANGED, Status.OK, Status.SKIPPED]


@dataclass
class StepResult:
    """One operation on one host (put a file, run a command, restart a unit...)."""

    step: str
    action: str
    target: str
    status: Status
    message: str = ""
    diff: str = ""
    elapsed_s: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["elapsed_s"] = round(self.elapsed_s, 3)
        if not d["diff"]:
            del d["diff"]
        if not d["data"]:
            del d["data"]
        return d


@dataclass
class HostResult:
    """Everything one run did and learned on one host."""

    host: str
    steps: list[StepResult] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    # The host's sections of the report, in the order they were first set: Reported records
    # (note() puts them here) and plain values; steps read records back with get(), never
    # by key.
    data: dict[str, Any] = field(default_factory=dict)
    # What steps tell later steps about this host, one typed record per kind (the service
    # step's outcome, say).
    notes: dict[type, Any] = field(default_factory=dict, repr=False)

    def note(self, record: Any) -> None:
        keep(record, self.notes, self.data)

    def get(self, kind: type[T]) -> T | None:
        return self.notes.get(kind)

    def add(self, result: StepResult) -> StepResult:
        self.steps.append(result)
        return result

    def counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Status}
        for step in self.steps:
            counts[step.status.value] += 1
        return counts

    @property
    def status(self) -> Status:
        present = {s.status for s in self.steps}
        for status in SEVERITY:
            if status in present:
                return status
        return Status.OK

    @property
    def failed(self) -> bool:
        return self.status in (Status.FAILED, Status.UNREACHABLE)

    @property
    def elapsed_s(self) -> float:
        end = self.finished if self.finished is not None else time.monotonic()
        return end - self.started

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": self.status.value,
            "counts": self.counts(),
            "elapsed_s": round(self.elapsed_s, 3),
            "steps": [s.to_dict() for s in self.steps],
            "facts": self.facts,
            "checks": self.checks,
        }
        d.update(plain(self.data))
        return d
