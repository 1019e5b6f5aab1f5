"""Which hop of a running chain is slow, from the relays' progress reports.

Why not compare each hop's rate with its peers': in a chain every hop runs at the rate of the
slowest one (a hop forwards only as fast as the next takes, and receives only as fast as the
one before sends), so all rates fall together. What tells the slow hop apart is where the
waiting is: the hop before it is blocked sending into it, while it is not blocked sending on
(it has nothing to send: it is the constriction, be it its link in, its CPU or its disk).
A hop is judged slow when, over the last `window_s`:
- the hop before it (or the controller, for the head) spent at least BLOCKED_SHARE of the
  time blocked sending into it;
- it spent at most FREE_SHARE blocked sending on (the tail sends nothing);
- it received less than `slow_share` of the reference rate: the feed's pace when there is
  one, else the best rate any hop of the chain reached in any window so far (a hop that is
  slow from the very start of an unpaced chain sets that best rate itself, and is not told).
A stopped or hung hop reports nothing: its counters stand still, so it reads as receiving 0.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

BLOCKED_SHARE = 0.8
FREE_SHARE = 0.2


@dataclass
class Track:
    """One hop's reports: (controller's clock, bytes received, seconds blocked sending on)."""

    times: list[float] = field(default_factory=list)
    bytes_in: list[int] = field(default_factory=list)
    wait_out: list[float] = field(default_factory=list)

    def add(self, t: float, bytes_in: int, wait_out: float) -> None:
        self.times.append(t)
        self.bytes_in.append(bytes_in)
        self.wait_out.append(wait_out)

    def at(self, t: float) -> tuple[float | None, int, float]:
        """(when, bytes, wait) as last reported at or before t; nothing reported yet: no
        time and zeros."""
        i = bisect.bisect_right(self.times, t) - 1
        return (self.times[i], self.bytes_in[i], self.wait_out[i]) if i >= 0 else (None, 0, 0.0)

    def between(self, then: float, now: float, started: float) -> tuple[float, float]:
        """(bytes/s received, share of time blocked sending on) from the last report at or
        before `then` to the last at or before `now`, over the time between those two reports,
        not over the window: with reports and judging both each second, a 1.5 s window holds
        one report interval or two, and read a hop blocked all along as blocked 67% of the time
        (docs/faults.md). Nothing reported since `then`: it stood still, (0, 0)."""
        (t1, b1, w1), (t0, b0, w0) = self.at(now), self.at(then)
        t0 = started if t0 is None else t0
        if t1 is None or t1 <= t0:
            return 0.0, 0.0
        return (b1 - b0) / (t1 - t0), (w1 - w0) / (t1 - t0)


@dataclass
class Verdict:
    hop: str
    line: str  # one line for the operator: who, what was measured, where it goes


@dataclass
class Watch:
    """The tracks of one chain: `order` the data hops in chain order, `upstream` the name of
    what feeds the head ("controller" or the feeding host)."""

    order: list[str]
    upstream: str
    window_s: float
    slow_share: float
    pace: float | None = None  # bytes/s the feed is paced to
    started: float | None = None  # when the feed began
    tracks: dict[str, Track] = field(default_factory=dict)
    best: float = 0.0

    def report(self, name: str, t: float, bytes_in: int, wait_out: float) -> None:
        self.tracks.setdefault(name, Track()).add(t, bytes_in, wait_out)

    def judge(self, now: float, skip: set[str]) -> Verdict | None:
        """The first hop in chain order that is slow now, if any (hops in `skip`, and any
        after the first of them, are already routed around)."""
        if self.started is None or now - self.started < self.window_s:
            return None
        then = now - self.window_s
        rates: dict[str, float] = {}
        waits: dict[str, float] = {}
        for name in [self.upstream] + self.order:
            rates[name], waits[name] = self.tracks.get(name, Track()).between(then, now, self.started)
        self.best = max([self.best] + [rates[n] for n in self.order])
        ref = self.pace or self.best
        if ref <= 0:
            return None
        before = self.upstream
        for name in self.order:
            if name in skip:
                return None
            if waits[before] >= BLOCKED_SHARE and waits[name] <= FREE_SHARE and rates[name] < self.slow_share * ref:
                return Verdict(
                    name,
                    (
                        f"{name} is slow: it received {rates[name] / 2**20:.2f} MiB/s over {self.window_s:g} s "
                        f"(the chain reached {ref / 2**20:.2f}) while {before} waited to send it "
                        f"{waits[before]:.0%} of the time; routed into a chain of its own, fed after"
                    ),
                )
            before = name
        return None
