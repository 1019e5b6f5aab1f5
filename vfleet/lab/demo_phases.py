"""How long each phase of `make demo` took, printed at its end.

Why: the demo from a bare machine went from 5:19 to 12:00 in a week and nobody could say
which phase grew. The clock times the phases the demo runs itself (setup, measured by the
Makefile from before apt and pip; lab; model; wheelhouse; deploy) and splits the deploy by
its report's steps, so the slow part is named on the last screen of every run."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator


@dataclass
class PhaseClock:
    """Phases in the order they ran, with their wall times; `started` is when the whole run
    began (the Makefile's clock where it passed one, else this object's creation)."""

    started: float = field(default_factory=time.time)
    phases: list[tuple[str, float]] = field(default_factory=list)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.time()
        try:
            yield
        finally:
            self.phases.append((name, time.time() - t0))

    def add(self, name: str, seconds: float) -> None:
        self.phases.append((name, seconds))


def deploy_breakdown(report: dict[str, Any]) -> list[tuple[str, float]]:
    """The deploy's time by step group (the part of a step's name before ':', e.g. install,
    service, gateway), slowest first. Hosts run a group side by side, so a group costs its
    slowest host's sum, not the sum over hosts."""
    slowest: dict[str, float] = {}
    for host in (report.get("hosts") or {}).values():
        per_group: dict[str, float] = {}
        for step in host.get("steps") or []:
            group = str(step.get("step", "")).split(":", 1)[0].strip() or "?"
            per_group[group] = per_group.get(group, 0.0) + float(step.get("elapsed_s") or 0.0)
        for group, seconds in per_group.items():
            slowest[group] = max(slowest.get(group, 0.0), seconds)
    return sorted(slowest.items(), key=lambda kv: -kv[1])


def mmss(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}:{secs:02d}"


def format_phases(clock: PhaseClock, deploy: list[tuple[str, float]], now: float | None = None) -> str:
    """The table printed last: a line per phase, the deploy's largest step groups under it,
    and the total from the run's start (which includes what no phase covers)."""
    width = max([len(name) for name, _ in clock.phases] + [len("total")])
    lines = ["== phases"]
    for name, seconds in clock.phases:
        lines.append(f"  {name:<{width}}  {mmss(seconds):>6}  ({seconds:.1f}s)")
        if name.startswith("deploy") and deploy:
            lines.append(
                " " * (width + 4) + "  " + ", ".join(f"{group} {secs:.1f}s" for group, secs in deploy if secs >= 0.05)
            )
    total = (time.time() if now is None else now) - clock.started
    lines.append(f"  {'total':<{width}}  {mmss(total):>6}  ({total:.1f}s)")
    return "\n".join(lines)
