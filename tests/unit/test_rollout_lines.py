"""A rollout's last lines, one per host, from what the rollout recorded (data, no host): a
restarted host lists each wait, a failed one names what it was waiting for and how long and
where it was left, a host never reached says why. What it recorded is a typed RolloutInfo
whose report section is the dict the report always had."""

from __future__ import annotations

import dataclasses
import json
import time
from types import SimpleNamespace

from vfleet.engine.results import HostResult, Status, StepResult
from vfleet.roles.rollout._lines import failed, host_line, host_lines, waiting
from vfleet.roles.rollout._records import RestartTimes, RolloutInfo, RolloutSummary

DONE_DICT = {
    "from": "/opt/vllm/a",
    "drain_s": 0.02,
    "inflight_wait_s": 3.41,
    "stop_s": 6.0,
    "ready_s": 41.27,
    "restart_s": 47.3,
    "undrain_s": 0.3,
    "serving": "/opt/vllm/a",
}
NOT_READY_DICT = {
    "from": "/opt/vllm/a",
    "drain_s": 0.0,
    "inflight_wait_s": 180.2,
    "stop_s": 31.0,
    "error": "vLLM on lab1: not ready after 600s (last: loading); journal: a\nb",
    "waiting_for": "vLLM to be ready",
    "waited_s": 600.4,
    "rolled_back": True,
    "serving": "/opt/vllm/a",
}
DONE = RolloutInfo(
    started=True,
    from_venv="/opt/vllm/a",
    drain_s=0.02,
    inflight_wait_s=3.41,
    stop_s=6.0,
    ready_s=41.27,
    restart_s=47.3,
    undrain_s=0.3,
    serving="/opt/vllm/a",
)
NOT_READY = RolloutInfo(
    started=True,
    from_venv="/opt/vllm/a",
    drain_s=0.0,
    inflight_wait_s=180.2,
    stop_s=31.0,
    error="vLLM on lab1: not ready after 600s (last: loading); journal: a\nb",
    waiting_for="vLLM to be ready",
    waited_s=600.4,
    rolled_back=True,
    serving="/opt/vllm/a",
)


def test_the_records_are_the_report_sections_the_report_always_had():
    """Same keys, same order, same values: the --report JSON does not change shape."""
    for info, want in ((DONE, DONE_DICT), (NOT_READY, NOT_READY_DICT)):
        assert json.dumps(info.to_dict()) == json.dumps(want)
    assert RolloutInfo().to_dict() == {}  # lost before its current venv was read
    timed = RolloutInfo(started=True)
    timed.took(RestartTimes(ready_s=41.266, restart_s=47.304, stop_s=6.0))
    assert timed.to_dict() == {"from": None, "stop_s": 6.0, "ready_s": 41.27, "restart_s": 47.3}
    refused = RolloutInfo(started=True, from_venv=None, error="last healthy host", waiting_for="x", waited_s=1.0)
    assert list(refused.to_dict()) == ["from", "error", "waiting_for", "waited_s"]  # no "serving": not over
    broken = dataclasses.replace(NOT_READY, serving=None)
    assert broken.to_dict()["serving"] is None
    summary = RolloutSummary(
        [["lab1"]],
        None,
        [],
        {"lab1": "/opt/vllm/a"},
        [],
        ["lab1: restarted"],
        190.0,
        178.4,
        "rollout took 2m58s, 1 host restarted (expected ~3m10s)",
    )
    assert json.dumps(summary.to_dict()) == json.dumps(  # the keys it always had, then the two times
        {
            "batches": [["lab1"]],
            "stopped": None,
            "converged": [],
            "serving": {"lab1": "/opt/vllm/a"},
            "drained": [],
            "lines": ["lab1: restarted"],
            "expected_s": 190.0,
            "took_s": 178.4,
        }
    )
    assert summary.closing_lines == ["lab1: restarted", "rollout took 2m58s, 1 host restarted (expected ~3m10s)"]
    assert RolloutSummary([], None, [], {}, [], ["x"]).closing_lines == ["x"]  # no total line: nothing added


def test_a_host_result_reports_its_records_in_place():
    r = HostResult("lab1")
    r.data["restarts"] = 1
    r.note(DONE)
    assert list(r.to_dict())[-2:] == ["restarts", "rollout"] and r.to_dict()["rollout"] == DONE_DICT
    assert r.get(RolloutInfo) is DONE


def test_a_restarted_host_lists_every_wait_in_order():
    line = host_line("lab1", DONE)
    assert line == (
        "lab1: restarted in 47.3s; waited 0.0s for another host to serve, 3.4s for in-flight "
        "requests to finish, 6.0s for vLLM to stop, 41.3s for vLLM to be ready and answer"
    )


def test_a_failed_host_names_what_it_waited_for_how_long_and_where_it_was_left():
    line = host_line("lab1", NOT_READY, status="failed")
    assert line.startswith("lab1: failed after waiting 600.4s for vLLM to be ready (after 0.0s for another host"), line
    assert "180.2s for in-flight requests to finish" in line and "not ready after 600s (last: loading)" in line
    assert line.endswith("; rolled back and serving again") and "journal" not in line and "\n" not in line


def test_a_host_left_broken_says_it_is_out_of_the_gateways():
    broken = dataclasses.replace(NOT_READY, serving=None)
    assert host_line("lab1", broken).endswith("rolled back but still failing: left out of the gateways")


def test_the_last_healthy_host_refusal_has_no_waits_before_it():
    info = RolloutInfo(
        started=True,
        from_venv="/opt/vllm/a",
        error="lab2 is the last healthy host of model 'tiny' behind the gateways: "
        "waited 180s for another to serve, not taking it out",
        waiting_for="another host of its model to serve",
        waited_s=180.0,
    )
    line = host_line("lab2", info, status="failed")
    assert line.startswith("lab2: failed after waiting 180.0s for another host of its model to serve: lab2 is the")
    assert line.endswith("; not rolled back"), line


def test_hosts_never_restarted_say_why():
    stopped = "batch 1: 1 of 1 hosts failed (> 0%): not starting the next batch"
    lines = host_lines(
        ["lab1", "lab2", "lab4"],
        {
            "lab1": _result("lab1", Status.FAILED, "did not come back ready", NOT_READY),
            "lab2": _result("lab2", Status.OK, ""),
            "lab4": _result("lab4", Status.FAILED, "install failed: pip exit 1"),
        },
        stopped,
    )
    assert [ln.split(":")[0] for ln in lines] == ["lab1", "lab2", "lab4"]
    assert lines[1] == f"lab2: not restarted: {stopped}"
    assert lines[2] == "lab4: failed before its restart: install failed: pip exit 1"


def _result(name: str, status: Status, message: str, info: RolloutInfo | None = None) -> HostResult:
    r = HostResult(name)
    r.add(StepResult("rollout", "rollout", name, status, message))
    if info is not None:
        r.note(info)
    return r


def test_a_long_error_is_cut_to_one_line():
    info = dataclasses.replace(NOT_READY, error="x" * 1000)
    line = host_line("lab1", info)
    assert "x" * 200 in line and "x" * 300 not in line and "x..." in line, line


def test_failed_records_the_phase_the_host_was_in_and_how_long():
    ctx = SimpleNamespace(result=HostResult("lab1"))
    info = RolloutInfo(started=True)
    waiting(ctx, "vLLM to be ready")
    time.sleep(0.05)
    failed(ctx, info, RuntimeError("not ready"))
    assert info.error == "not ready" and info.waiting_for == "vLLM to be ready"
    assert info.waited_s >= 0.0
    assert "since" not in info.to_dict()  # the monotonic clock stays out of the report


def _loading_host(monkeypatch, probe_state: str):
    """A host whose first readiness wait times out; the second one returns 12 s."""
    from vfleet.engine.runner import HostFailed
    from vfleet.roles.rollout import _rolling as rollout

    waits = iter([HostFailed("vLLM on lab1: not ready after 600s (last: loading)"), 12.0])

    def wait_ready(ctx):
        w = next(waits)
        if isinstance(w, Exception):
            raise w
        return w

    monkeypatch.setattr(rollout.readiness, "wait_ready", wait_ready)
    monkeypatch.setattr(rollout.readiness, "probe", lambda ctx: probe_state)
    records = []
    ctx = SimpleNamespace(
        config=SimpleNamespace(ready_timeout=600, unit="vllm.service"), record=lambda *a, **kw: records.append(a)
    )
    return rollout.Rollout.wait_loaded, ctx, records


def test_a_plain_restart_still_loading_at_the_deadline_gets_one_more_instead_of_a_restart(monkeypatch):
    wait_loaded, ctx, records = _loading_host(monkeypatch, "loading")
    assert wait_loaded(ctx, plain=True) == 612.0
    assert "still loading after 600s" in records[0][-1] and "instead of restarting it" in records[0][-1]


def test_an_upgrade_or_a_dead_unit_fails_at_the_deadline(monkeypatch):
    import pytest

    from vfleet.engine.runner import HostFailed

    for plain, state in ((False, "loading"), (True, "dead (failed)")):
        wait_loaded, ctx, records = _loading_host(monkeypatch, state)
        with pytest.raises(HostFailed, match="not ready after 600s"):
            wait_loaded(ctx, plain=plain)
        assert records == []
