"""The slow-hop rule of a running chain (chain_watch.py), on made-up progress reports: where
the waiting is tells the slow hop, not its rate alone (in a chain every rate falls together)."""

from __future__ import annotations

from vfleet.roles.weights._chain_watch import Watch

MIB = 1 << 20


def _watch(pace: float | None = 4 * MIB) -> Watch:
    w = Watch(["h0", "h1", "h2"], "controller", window_s=5, slow_share=0.5, pace=pace)
    w.started = 0.0
    return w


def _report(w: Watch, t: float, rates: dict[str, float], waits: dict[str, float]) -> None:
    """Every hop's counters at time t, had it kept `rates` (bytes/s) and `waits` (share blocked)."""
    for name in ["controller", "h0", "h1", "h2"]:
        w.report(name, t, int(rates.get(name, 0) * t), waits.get(name, 0.0) * t)


def test_a_healthy_chain_is_left_alone():
    w = _watch()
    for t in range(0, 11):
        _report(w, t, {n: 3.8 * MIB for n in ("h0", "h1", "h2")}, {"controller": 0.05, "h0": 0.1, "h1": 0.1})
    assert w.judge(10, set()) is None


def test_the_hop_its_upstream_waits_on_is_slow_not_the_ones_it_starves():
    w = _watch()
    for t in range(0, 11):  # h1 takes 1 MiB/s: h0 blocked sending into it, h2 starved behind it
        _report(w, t, {"h0": 1 * MIB, "h1": 1 * MIB, "h2": 1 * MIB}, {"controller": 0.9, "h0": 0.95})
    v = w.judge(10, set())
    assert v is not None and v.hop == "h1" and v.line.startswith("h1 is slow: it received 1.00 MiB/s over 5 s")
    assert "h0 waited to send it 95% of the time" in v.line and "\n" not in v.line
    assert w.judge(10, {"h1"}) is None  # routed already: nothing after it is judged


def test_a_silent_hop_reads_as_receiving_nothing():
    w = _watch(pace=None)
    for t in range(0, 6):  # all well, then h2 stops reporting and h1 blocks sending into it
        _report(w, t, {n: 4 * MIB for n in ("h0", "h1", "h2")}, {})
    for t in range(6, 13):
        w.report("controller", t, 0, 0.0)
        w.report("h0", t, 4 * MIB * 5, 0.0)
        w.report("h1", t, 4 * MIB * 5, float(t - 5))
    assert w.judge(5.5, set()) is None  # the best rate is learnt while all is well
    v = w.judge(12, set())
    assert v is not None and v.hop == "h2" and "received 0.00 MiB/s" in v.line


def test_no_verdict_before_a_whole_window_nor_without_a_reference_rate():
    w = _watch(pace=None)
    for t in range(0, 4):
        _report(w, t, {}, {"controller": 1.0})
    assert w.judge(3, set()) is None  # not a window yet
    for t in range(4, 11):
        _report(w, t, {}, {"controller": 1.0})
    assert w.judge(10, set()) is None  # nothing ever moved, no pace: slow against what?


def test_a_stopped_hop_is_found_whatever_the_phase_of_reports_and_judging():
    """Hops report each second and the controller judges each second over 1.5 s: a window
    that holds one report interval must still read a hop blocked all the time as blocked
    (it read 1 s in 1.5, under the 0.8 bar, and a stopped relay went unrouted for minutes)."""
    for phase in (0.1, 0.3, 0.5, 0.7, 0.9):
        w = Watch(["h0", "h1"], "controller", window_s=1.5, slow_share=0.5, pace=2 * MIB)
        w.started = 0.0
        for t in range(0, 4):  # all well up to t=3, then h1 stops: no report, h0 blocked into it
            w.report("h0", t, t * 2 * MIB, 0.0)
            w.report("h1", t, t * 2 * MIB, 0.0)
        for t in range(4, 11):
            w.report("h0", t, 6 * MIB, float(t - 3))
        for k in range(4, 11):
            w.report("controller", k + phase, 0, float(k + phase - 3))
        v = w.judge(10 + phase, set())
        assert v is not None and v.hop == "h1" and "received 0.00 MiB/s" in v.line, phase
