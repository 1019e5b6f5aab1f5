"""`vfleet status` on the shared deployed lab fleet (lab1, lab2 serve tiny; lab3 is the
gateway): a drained host, a host under load and a stopped host, each shown as it is, on the
screen and in the JSON report. Everything changed here is put back (undrain, start and wait)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.deploy_env import API_KEY, vfleet
from vfleet.clients.loadgen import LoadGenerator

pytestmark = pytest.mark.integration

UNIT = "vllm.service"  # the lab deploy's service_name (vfleet/lab/demo.py keeps the default)


def status(inv: Path, report: Path) -> tuple[dict, str]:
    p = vfleet("status", "--inventory", str(inv), "--report", str(report), timeout=120)
    assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    return json.loads(report.read_text()), p.stdout


def status_until(inv: Path, report: Path, ok, what: str, tries: int = 30) -> tuple[dict, str]:
    """Status rounds until one where every host answered and `ok(report)` holds.

    Why "every host answered": under the test's load the lab's CPU vLLM keeps both of this
    machine's cores busy, and a host's status script can take longer than status allows it
    (probes.SCRIPT_TIMEOUT_S); status then rightly shows that host as `no answer` (its unit
    unknown). Such a round says nothing about the states asserted here (CI once took the
    first round with a request running on lab2 while lab1 had not answered)."""
    unanswered: list[list[str]] = []
    for _ in range(tries):
        data, out = status(inv, report)
        missing = [name for name, row in {**data["hosts"], **data["gateways"]}.items() if row["error"]]
        if not missing and ok(data):
            return data, out
        unanswered.append(missing)
        time.sleep(2)
    pytest.fail(f"status never showed {what} (unanswered per round: {unanswered}): {json.dumps(data)[-3000:]}")


def gateway_url(inv: Path) -> str:
    data = json.loads(vfleet("inventory", "--inventory", str(inv)).stdout)
    gw = data["gateways"]["hosts"][0]
    return f"http://{data['_meta']['hostvars'][gw]['ansible_host']}:80"


def on_host(inv: Path, host: str, command: str) -> None:
    p = vfleet("run", "--inventory", str(inv), "--limit", host, "--command", command, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_status_shows_a_drained_host_a_host_under_load_and_a_stopped_host(deployed, tmp_path):
    inv = deployed["inv"]
    report = tmp_path / "status.json"
    data, out = status(inv, report)
    assert data["hosts"]["lab1"]["gateways"] == {"lab3": "in"}, data["hosts"]["lab1"]
    assert data["gateways"]["lab3"]["nginx"] == "active"
    assert vfleet("drain", "--inventory", str(inv), "--host", "lab1").returncode == 0
    # Two back-to-back clients keep a request running on lab2. Four (max_tokens 128) starved the
    # controller, which shares this machine's 2 cores with the lab's CPU vLLM: one `vfleet status`
    # process then ran past the 120 s this test gives it (fresh-clone make test, stop 37).
    gen = LoadGenerator(gateway_url(inv), "tiny", API_KEY, concurrency=2, max_tokens=64, pause_s=0.0).start()
    try:
        # lab1 drained: still running, out of the gateway; lab2 takes the whole load
        data, out = status_until(
            inv, report, lambda d: (d["hosts"]["lab2"]["server"].get("running") or 0) >= 1, "requests running on lab2"
        )
        lab1, lab2 = data["hosts"]["lab1"], data["hosts"]["lab2"]
        assert lab1["gateways"] == {"lab3": "drained"} and lab1["unit"]["active"] == "active", lab1
        assert data["gateways"]["lab3"]["drained"] == ["lab1"]
        assert lab2["gateways"] == {"lab3": "in"} and lab2["unit"]["sub"] == "running"
        assert lab2["verdict"] not in ("idle", "unknown") and "running" in lab2["numbers"], lab2
        assert lab2["served"] == ["tiny"] and lab2["vllm_version"] and lab2["weights"].startswith("tiny-")
        assert lab2["drift"]["changed"] == [], lab2["drift"]  # as deployed
        row = next(line for line in out.splitlines() if line.startswith("lab1 "))
        assert "lab3:drained" in row and "active/running" in row
    finally:
        gen.stop()
        assert vfleet("undrain", "--inventory", str(inv), "--host", "lab1").returncode == 0
    # lab2 stopped (lab1 serves again): inactive, down on the gateway, no server numbers
    on_host(inv, "lab2", f"systemctl stop {UNIT}")
    try:
        data, out = status_until(
            inv, report, lambda d: d["hosts"]["lab2"]["unit"]["active"] in ("inactive", "failed"), "lab2 stopped"
        )
        lab2 = data["hosts"]["lab2"]
        assert lab2["gateways"] == {"lab3": "down"} and lab2["server"] == {} and lab2["verdict"] == "unknown"
        assert data["gateways"]["lab3"]["down"] == ["lab2"] and data["gateways"]["lab3"]["drained"] == []
        assert data["hosts"]["lab1"]["gateways"] == {"lab3": "in"}
        row = next(line for line in out.splitlines() if line.startswith("lab2 "))
        assert "inactive" in row and "lab3:down" in row
    finally:
        on_host(inv, "lab2", f"systemctl start {UNIT}")
        # serving again means vLLM answers (its numbers are read), not only nginx's "in": a fresh-clone
        # run (stop 37) saw lab2 still down minutes later, in the tests after this one
        try:
            status_until(
                inv,
                report,
                lambda d: (
                    d["hosts"]["lab2"]["gateways"] == {"lab3": "in"}
                    and d["hosts"]["lab2"]["unit"]["sub"] == "running"
                    and bool(d["hosts"]["lab2"]["server"])
                ),
                "lab2 serving again",
                tries=60,
            )
            # and it answers: the restarted worker's first inference, here, not in the next test's
            # (stop 37: lab2's restarted worker died with SIGILL, exit -4, on its first request, made
            # while test_monitor deployed monitoring beside it; not understood yet)
            hostvars = json.loads(vfleet("inventory", "--inventory", str(inv)).stdout)["_meta"]["hostvars"]
            for _ in range(2):
                r = httpx.post(
                    f"http://{hostvars['lab2']['ansible_host']}:8000/v1/chat/completions",
                    json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
                    headers={"Authorization": f"Bearer {API_KEY}"},
                    timeout=120,
                )
                assert r.status_code == 200, r.text[:300]
        except (pytest.fail.Exception, AssertionError):
            journal = vfleet(
                "run",
                "--inventory",
                str(inv),
                "--limit",
                "lab2",
                "--command",
                f"systemctl status --no-pager {UNIT} | head -5; journalctl -u {UNIT} -n 40 --no-pager -o cat",
            )
            pytest.fail(f"lab2 did not serve again after `systemctl start`:\n{journal.stdout[-6000:]}")
