"""Faults of rolling restarts on the lab's deployed fleet (2 vLLM hosts + 1 gateway): two
clients sending back to back through the gateway during `vfleet restart --batch 1`, and two
controllers restarting the same fleet at once. Each test leaves every host serving."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from tests.integration.deploy_env import API_KEY, run_report, vfleet
from tests.integration.faults_env import GATEWAY, lock_on
from vfleet.clients.loadgen import LoadGenerator

pytestmark = pytest.mark.integration


def restart_lab1_under_two_clients(inv, tmp_path, *, pause_s: float) -> dict:
    """`vfleet restart --batch 1 --limit lab1` while two clients send through the gateway, each
    waiting `pause_s` between requests. No request fails, the restart exits 0, its last lines
    say what lab1 waited for and how long and what the rollout took against its estimate, and
    every host serves after. Returns the load's summary."""
    # answers of 64 tokens keep each client's rate (~1 r/s on the lab) under the gateway's
    # per-address limit (20 r/s): a 429 is that limit, not the restart
    gen = LoadGenerator(GATEWAY, "tiny", API_KEY, concurrency=2, max_tokens=64, pause_s=pause_s).start()
    try:
        code, report, out = run_report(
            "restart", inv, tmp_path / "restart.json", "--batch", "1", "--limit", "lab1", timeout=1500
        )
    finally:
        gen.stop()
    load = gen.summary()
    *last, total = out.strip().splitlines()[-2:]  # lab1's line, then the rollout's total
    print("two clients:", load, *last, total, sep="\n  ")
    assert code == 0, out[-4000:]
    assert load["requests"] >= 20 and load["failed"] == 0 and load["truncated"] == 0, load
    assert [ln.split(":")[0] for ln in last] == ["lab1"], last
    assert all("restarted in" in ln and "for vLLM to be ready" in ln for ln in last), last
    assert report["rollout"]["drained"] == [] and report["rollout"]["lines"] == last
    assert re.fullmatch(
        r"rollout took \S+, 1 host restarted \((expected ~\S+|no estimate)\); their restarts "
        r"add up to \S+",
        total,
    ), total
    assert re.search(r"^(expect ~\S+: 1 batch; |no estimate: no host has a measured restart yet)", out, re.M), out[
        -4000:
    ]
    smoke = vfleet("smoke", "--inventory", str(inv))
    assert smoke.returncode == 0, smoke.stdout[-3000:]
    return load


def test_rolling_restart_under_two_clients_drops_nothing(deployed, tmp_path):
    """The short form of the soak below, for every run: two clients with a pause of half a
    second, so lab1 loads in about the time it takes without load."""
    restart_lab1_under_two_clients(deployed["inv"], tmp_path, pause_s=0.5)


@pytest.mark.soak
@pytest.mark.ci
def test_rolling_restart_under_two_back_to_back_clients_completes(deployed, tmp_path):
    """What a new user tried on the demo fleet: two clients, no pause between requests, while
    `vfleet restart --batch 1` rolls lab1. Under this load a lab host takes 11-15 minutes to
    load (docs/faults.md), so this runs in `make soak`, not in `make test`."""
    restart_lab1_under_two_clients(deployed["inv"], tmp_path, pause_s=0)


def test_a_second_restart_or_upgrade_on_a_fleet_being_restarted_is_refused(deployed, tmp_path):
    """`vfleet restart --limit lab2` runs; a second `restart` and an `upgrade` started meanwhile
    stop at once with one line naming the first run, its pid and when its lock expires, and
    change nothing; the first one finishes and gives the lock back on every host."""
    inv = deployed["inv"]
    first = subprocess.Popen(
        [sys.executable, "-m", "vfleet.cli", "restart", "--inventory", str(inv), "--limit", "lab2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not lock_on(inv, "lab3") and time.monotonic() < deadline:
            time.sleep(0.3)
        assert lock_on(inv, "lab3").split()[1:2] == [str(first.pid)]
        for task in ("restart", "upgrade"):
            second = vfleet(task, "--inventory", str(inv), "--batch", "1", timeout=120)
            assert second.returncode == 2, (task, second.stdout[-2000:] + second.stderr[-2000:])
            lines = second.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: fleet is locked: restart by "), lines
            assert f"pid {first.pid} since " in lines[0] and "(expires in " in lines[0], lines
            assert "drain" not in second.stdout and "install" not in second.stdout, second.stdout[-2000:]
        assert first.poll() is None, "the first restart ended before the second could be refused"
        out, _ = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, out[-3000:]
    assert out.strip().splitlines()[-2].startswith("lab2: restarted in "), out[-1000:]
    assert out.strip().splitlines()[-1].startswith("rollout took "), out[-1000:]
    assert all(lock_on(inv, h) == "" for h in ("lab1", "lab2", "lab3"))
