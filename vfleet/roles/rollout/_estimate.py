"""How long a rolling restart or upgrade expects to take, said before its first batch, and how long
it took, said last, from each host's last measured restart (vfleet/roles/service/_measured_restart.py).

Batches run one after another and the hosts of a batch in parallel, so a batch costs its slowest
host and the rollout the sum of its batches. A host costs what its last restart kept it out of
service: the restart plus the drain around it (gateway reload, in-flight requests, undrain). A
multi-host replica rolls as one unit keyed by its head, whose record holds the whole unit's
restart, so it costs its measured total. A host never measured counts as the slowest measured one:
an estimate that errs long, not short. Pure functions of the batches and the records (and, at the
end, of each host's RolloutInfo), so they are tested from data without a host."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from vfleet.roles.rollout._records import RolloutInfo
from vfleet.roles.service import MeasuredRestart

__all__ = [
    "LISTED",
    "Estimate",
    "duration",
    "host_cost",
    "estimate",
    "expect_line",
    "measured_of",
    "spent_s",
    "total_line",
]

LISTED = 6  # hosts named in one line: a fleet of hundreds gets "+N more", not a page


def duration(seconds: float) -> str:
    """'0.4s', '41.2s', '3m10s', '2h05m': tenths where a host's restart is short, whole units
    where a fleet's is long."""
    s = max(0.0, seconds) if math.isfinite(seconds) else 0.0
    if s < 59.95:
        return f"{s:.1f}s"
    whole = round(s)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    minutes = round(s / 60)
    return f"{minutes // 60}h{minutes % 60:02d}m"


def host_cost(m: MeasuredRestart) -> float:
    """Seconds a host was out of service in its last restart: the restart and the drain around it."""
    return m.restart_s + sum(s or 0.0 for s in (m.drain_s, m.inflight_wait_s, m.undrain_s))


@dataclass(frozen=True)
class Estimate:
    """`total_s` None: no host of the rollout was ever measured. `costs`: each measured host's
    cost, slowest first; `unmeasured`: the hosts without a record, in batch order."""

    batches: int
    total_s: float | None
    costs: dict[str, float]
    unmeasured: list[str]

    @property
    def stand_in_s(self) -> float | None:
        """What a host never measured counts as: the slowest measured host."""
        return max(self.costs.values(), default=None)


def estimate(batches: Sequence[Sequence[str]], measured: Mapping[str, MeasuredRestart | None]) -> Estimate:
    """Each batch costs its slowest host (unmeasured hosts count as the slowest measured one),
    the rollout the sum of its batches. Linear in the hosts."""
    hosts = [h for batch in batches for h in batch]
    costs = {h: host_cost(m) for h in hosts if (m := measured.get(h)) is not None}
    unmeasured = [h for h in hosts if h not in costs]
    if not costs:
        return Estimate(len(batches), None, {}, unmeasured)
    slowest = max(costs.values())
    total = sum(max(costs.get(h, slowest) for h in batch) for batch in batches if batch)
    ranked = dict(sorted(costs.items(), key=lambda kv: -kv[1]))  # stable: ties keep batch order
    return Estimate(len(batches), total, ranked, unmeasured)


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:LISTED])
    return shown + (f" +{len(items) - LISTED} more" if len(items) > LISTED else "")


def expect_line(est: Estimate) -> str:
    """The line printed before the first batch."""
    if est.total_s is None or est.stand_in_s is None:
        return "no estimate: no host has a measured restart yet (the first rollout records them)"
    n = est.batches
    line = (
        f"expect ~{duration(est.total_s)}: {n} batch{'' if n == 1 else 'es'}; per batch the slowest host's last "
        f"restart, drain included ({_listed([f'{h} {duration(s)}' for h, s in est.costs.items()])})"
    )
    if est.unmeasured:
        line += (
            f"; {_listed(est.unmeasured)} not measured yet: counted as the slowest measured host "
            f"({duration(est.stand_in_s)})"
        )
    return line


def measured_of(info: RolloutInfo) -> MeasuredRestart | None:
    """What a host's restart in this rollout measured, as its record for the next one; None
    when it did not restart (failed, rolled back, not reached)."""
    if info.error is not None or info.restart_s is None:
        return None
    return MeasuredRestart(
        restart_s=info.restart_s,
        ready_s=info.ready_s,
        stop_s=info.stop_s,
        drain_s=info.drain_s,
        inflight_wait_s=info.inflight_wait_s,
        undrain_s=info.undrain_s,
    )


def spent_s(infos: Sequence[RolloutInfo | None]) -> list[float]:
    """Each restarted host's time out of service in this rollout (the hosts not restarted left out)."""
    return [host_cost(m) for info in infos if info is not None and (m := measured_of(info)) is not None]


def total_line(took_s: float, expected_s: float | None, spent: Sequence[float], *, stopped: bool) -> str:
    """The line printed last: the rollout's wall time against what was expected, and what the
    restarted hosts spent out of service added up (above the wall time when batches ran hosts
    side by side)."""
    n = len(spent)
    hosts = "no host restarted" if not n else f"{n} host{'' if n == 1 else 's'} restarted"
    expected = "no estimate" if expected_s is None else f"expected ~{duration(expected_s)}"
    head = (
        f"rollout stopped after {duration(took_s)}, {hosts} ({expected}{'' if expected_s is None else ' for all of it'})"
        if stopped
        else f"rollout took {duration(took_s)}, {hosts} ({expected})"
    )
    return head + (f"; their restarts add up to {duration(sum(spent))}" if n else "")
