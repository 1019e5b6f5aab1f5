"""The phase table `make demo` prints last, from a real lab deploy's report (trimmed to its
steps: tests/unit/data/demo/deploy_report_lab.json, 154.5 s on the 2-core lab)."""

from __future__ import annotations

import json
from pathlib import Path

from vfleet.lab import demo
from vfleet.lab.demo_phases import PhaseClock, deploy_breakdown, format_phases, mmss

REPORT = json.loads((Path(__file__).parent / "data/demo/deploy_report_lab.json").read_text())


def test_the_deploy_splits_by_step_group_at_its_slowest_host_slowest_first():
    groups = dict(deploy_breakdown(REPORT))
    assert [g for g, _ in deploy_breakdown(REPORT)][:3] == ["install", "service", "gateway"]
    # lab2's install (100.7 s), not lab1 + lab2 (201 s): the hosts install side by side
    assert round(groups["install"], 1) == 100.7
    assert round(groups["service"], 1) == 47.6
    assert round(groups["gateway"], 1) == 1.3  # only on lab3
    assert sum(groups.values()) < REPORT["elapsed_s"]


def test_a_report_without_steps_gives_no_breakdown():
    assert deploy_breakdown({}) == []
    assert deploy_breakdown({"hosts": {"lab1": {"steps": [{"step": "install", "elapsed_s": None}]}}}) == [
        ("install", 0.0)
    ]


def test_the_table_names_each_phase_the_deploy_groups_and_the_total_from_the_start():
    clock = PhaseClock(started=1000.0)
    clock.add("setup (apt, venv)", 42.0)
    clock.add("lab (3 hosts)", 18.4)
    clock.add("deploy and smoke", 154.5)
    text = format_phases(clock, deploy_breakdown(REPORT), now=1000.0 + 230.0)
    lines = text.splitlines()
    assert lines[0] == "== phases"
    assert lines[1].split() == ["setup", "(apt,", "venv)", "0:42", "(42.0s)"]
    assert lines[4].strip().startswith("install 100.7s, service 47.6s, gateway 1.3s")
    assert "preflight" not in lines[4]  # 0.0 s groups say nothing
    assert lines[-1].split() == ["total", "3:50", "(230.0s)"]


def test_mmss_rounds_to_the_second():
    assert [mmss(s) for s in (0, 59.6, 61, 754.2)] == ["0:00", "1:00", "1:01", "12:34"]


def test_the_makefile_start_becomes_the_setup_phase(monkeypatch):
    import time

    monkeypatch.setenv("VFLEET_DEMO_STARTED", str(time.time() - 30))
    clock = demo._clock()
    assert clock.phases[0][0] == "setup (apt, venv)" and 29 < clock.phases[0][1] < 40
    for bad in ("", "yesterday", str(time.time() + 60), "0"):
        monkeypatch.setenv("VFLEET_DEMO_STARTED", bad)
        assert demo._clock().phases == []  # no setup phase from a value that cannot be the start
