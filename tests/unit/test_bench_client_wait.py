"""A level whose load generator waited for a CPU is marked (vfleet/clients/bench/sweep.starved), from
the numbers of a real lab level: 36 requests, 2.583 s waiting, E2E p50 78 ms (the stream read
in one burst at the end), and the same level under SCHED_FIFO (1 ms waiting in all)."""

from __future__ import annotations

from vfleet.clients.bench.sweep import cpu_and_wait, starved


def level(wait_s: float, e2e_p50_ms: float) -> dict:
    return {"label": "c=1", "e2e_ms": {"p50": e2e_p50_ms}, "client": {"cpu_s": 0.23, "runqueue_wait_s": wait_s}}


def test_a_client_kept_off_the_cpu_is_marked():
    lv = level(2.583, 78.0)
    starved(lv, 36)
    assert lv["client"] == {"cpu_s": 0.23, "runqueue_wait_s": 2.583, "wait_per_request_ms": 71.75, "starved": True}


def test_a_client_with_a_cpu_is_not():
    lv = level(0.001, 76.0)
    starved(lv, 36)
    assert lv["client"]["starved"] is False and lv["client"]["wait_per_request_ms"] == 0.028


def test_nothing_to_judge_leaves_the_level_alone():
    for lv, n in ((level(1.0, 0), 10), (level(1.0, 50), 0), ({"label": "c=1", "e2e_ms": {"p50": 5}}, 3)):
        before = repr(lv)
        starved(lv, n)
        assert repr(lv) == before


def test_this_thread_has_schedstat_on_linux():
    got = cpu_and_wait()
    assert got is not None and got[0] > 0 and got[1] >= 0
