"""Faults of the service on the lab's deployed fleet (2 vLLM hosts + 1 gateway, the `deployed`
session fixture): a new unit that fails in `deploy --batch`, vLLM killed while serving, the
stop check, two controllers and a killed one. For each fault the other hosts finish, the
report says what happened to which host, and a re-run converges with nothing left half done.
Each test puts the fleet back as it found it (the tests after this module reuse it)."""

from __future__ import annotations

import json
import time

import pytest

from tests.integration.deploy_env import API_KEY, changed_targets, restarts, run_report, vfleet, write_deploy_inventory
from tests.integration.faults_env import (
    chat_through_gateway,
    lock_on,
    on_host,
    run_watching_argv,
    step_messages,
    wait_serving,
)

pytestmark = pytest.mark.integration

# A value vLLM 0.32.0 rejects only when it starts (vfleet refuses unknown flags before any host)
BAD_VALUE = "not-a-number"


def test_batch_deploy_whose_new_unit_fails_goes_back_and_stops(deployed, tmp_path):
    """A new unit for both hosts, one of them with a flag value vLLM 0.32.0 rejects: lab1 (first
    batch) fails to start, goes back to its saved unit/env/venv/weights and serves; the batches
    stop, so lab2 is never restarted and its files are put back to what it serves."""
    inv = deployed["inv"]
    unit_before = {
        h: on_host(
            inv,
            h,
            "sha256sum /etc/systemd/system/vllm.service /etc/vllm/vllm.env; "
            "readlink /opt/vllm/current /srv/models/tiny",
        )
        for h in ("lab1", "lab2")
    }
    bad = write_deploy_inventory(
        deployed["lab"],
        tmp_path,
        extra={"max_num_seqs": 5},
        host_vars={"lab1": {"enforce_eager": True, "vllm_extra_args": ["--max-logprobs", BAD_VALUE]}},
    )
    code, report, out, argv = run_watching_argv(
        "deploy", "--inventory", str(bad), "--batch", "1", "--diff", "--skip-preflight", report=tmp_path / "bad.json"
    )
    assert code == 1, out[-4000:]
    assert argv and not [a for a in argv if API_KEY in a], "the key in a controller process's arguments"
    lab1 = report["hosts"]["lab1"]
    assert lab1["status"] == "failed", step_messages(report, "lab1")
    info = lab1["rollout"]
    assert info["rolled_back"] is True and BAD_VALUE in info["error"], info  # vLLM's own journal line
    msgs = step_messages(report, "lab1")
    assert "rollback point ok saved" in msgs and "restore changed put back unit, env file" in msgs, msgs
    assert "rollback changed back on unit, env file" in msgs and "rolled back and serving again" in msgs, msgs
    assert report["rollout"]["stopped"] and report["rollout"]["drained"] == [], report["rollout"]
    lab2 = report["hosts"]["lab2"]
    assert lab2.get("restored_untried") is True and "rollout" not in lab2, step_messages(report, "lab2")
    assert restarts(report)["lab2"] == 0
    # on the hosts: exactly the files they had, both serving, through the gateway too
    for h in ("lab1", "lab2"):
        now = on_host(
            inv,
            h,
            "sha256sum /etc/systemd/system/vllm.service /etc/vllm/vllm.env; "
            "readlink /opt/vllm/current /srv/models/tiny",
        )
        assert now == unit_before[h], (h, now, unit_before[h])
    smoke = vfleet("smoke", "--inventory", str(inv))
    assert smoke.returncode == 0, smoke.stdout[-3000:]
    # the key went into the env files, and appears in no output, --diff or report, nor in the
    # hosts' process arguments, unit files or journal
    assert API_KEY not in out and API_KEY not in json.dumps(report)
    for h in ("lab1", "lab2"):
        seen = on_host(
            inv,
            h,
            "ps -eo args; cat /etc/systemd/system/vllm.service; "
            "cat /var/lib/vfleet/rollback/vllm.service/unit; journalctl -o cat --no-pager | tail -n 3000",
        )
        assert "ExecStart=" in seen and API_KEY not in seen, h
        assert on_host(inv, h, "stat -c %a /var/lib/vfleet/rollback/vllm.service/env") == "600", h
    # re-run with the fleet's own inventory: nothing left half done, so nothing to change
    code, again, out = run_report("deploy", inv, tmp_path / "again.json", "--batch", "1", "--skip-preflight")
    assert code == 0, out[-3000:]
    for h in ("lab1", "lab2", "lab3"):
        assert again["hosts"][h]["counts"]["changed"] == 0, (h, changed_targets(again, h))
    assert set(restarts(again).values()) == {0}


def test_vllm_killed_while_serving_leaves_no_worker_and_the_gateway_routes_around(deployed, tmp_path):
    """SIGKILL of vLLM's main process on lab2: systemd removes its workers (KillMode=mixed), the
    gateway answers every request from lab1 meanwhile, and smoke names the crash with journal
    lines until systemd's restart brings lab2 back."""
    inv = deployed["inv"]
    pids = on_host(inv, "lab2", "pgrep -u vllm").split()
    main = on_host(inv, "lab2", "systemctl show -p MainPID --value vllm.service").strip()
    assert len(pids) >= 2 and main in pids, pids  # the API server and its engine core process
    on_host(inv, "lab2", f"kill -9 {main}")
    codes = chat_through_gateway(6)
    assert codes == [200] * 6, codes
    # what systemd promises: nothing of the old service outlives TimeoutStopSec (KillMode=mixed)
    limit = time.monotonic() + 90
    while True:
        alive = on_host(inv, "lab2", "for p in " + " ".join(pids) + "; do [ -d /proc/$p ] && echo $p; done; true")
        if not alive.split() or time.monotonic() > limit:
            break
        time.sleep(1)
    assert alive.split() == [], f"vLLM processes left 90 s after SIGKILL of {main}: {alive}"
    code, report, out = run_report("smoke", inv, tmp_path / "smoke.json")
    if code:  # caught while systemd restarts it: the report says why, with the journal
        failed = [s for s in report["hosts"]["lab2"]["steps"] if s["status"] == "failed"][-1]
        assert "NRestarts=" in failed["message"] and "journal:" in failed["message"], failed
        assert failed["data"]["journal"], failed
    # systemd's Restart=on-failure brings it back; the fleet converges with no change
    wait_serving(inv, "lab2")
    code, report, out = run_report("deploy", inv, tmp_path / "back.json", "--limit", "lab2,lab3", "--skip-preflight")
    assert code == 0, out[-3000:]
    assert report["hosts"]["lab2"]["counts"]["changed"] == 0, changed_targets(report, "lab2")


def test_rolling_restart_stop_check_says_no_vllm_process_is_left(deployed, tmp_path):
    """A rolling restart stops vLLM (SIGTERM, SIGKILL for what is left after TimeoutStopSec,
    which follows shutdown_timeout) and checks, per host, that none of the processes the unit had
    survived before it starts the new one."""
    inv = deployed["inv"]
    unit = on_host(inv, "lab2", "systemctl show -p KillMode,TimeoutStopUSec vllm.service")
    assert "KillMode=mixed" in unit, unit
    code, report, out = run_report("restart", inv, tmp_path / "restart.json", "--limit", "lab2")
    assert code == 0, out[-3000:]
    stops = [s for s in report["hosts"]["lab2"]["steps"] if s["action"] == "stop"]
    assert len(stops) == 1 and "no process of it left" in stops[0]["message"], stops
    assert report["rollout"]["drained"] == []


def test_two_controllers_one_lock_and_a_killed_controller_converges(deployed, tmp_path):
    """A deploy while another controller's run holds lab1 stops at once naming the holder (and
    gives back what it took); the holder, a slow weight copy, is then SIGKILLed, its lock
    stays, and the next run from this controller takes it over (its pid is gone), converges
    with nothing to change and leaves no lock and no host drained. A foreign lock blocks until
    its TTL passed, then is taken over."""
    import subprocess
    import sys

    from tests.integration.faults_env import big_model

    inv = deployed["inv"]
    slow = write_deploy_inventory(
        deployed["lab"],
        tmp_path,
        extra={"model_source": str(big_model(tmp_path)), "weights_fanout": False, "weights_bwlimit": 300},
    )
    first = subprocess.Popen(
        [sys.executable, "-m", "vfleet.cli", "weights", "--inventory", str(slow), "--limit", "lab1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not lock_on(inv, "lab1") and time.monotonic() < deadline:
            time.sleep(0.3)
        held = lock_on(inv, "lab1")
        assert held.split()[1:2] == [str(first.pid)], held
        second = vfleet("deploy", "--inventory", str(inv), "--skip-preflight", timeout=120)
        assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-2000:]
        line = second.stderr.strip().splitlines()[-1]
        assert line.startswith("error: fleet is locked: weights by ") and f"pid {first.pid}" in line, line
        assert line.endswith("if that run is dead") and " on lab1" in line, line
        assert lock_on(inv, "lab2") == "" and lock_on(inv, "lab3") == ""  # given back
        assert first.poll() is None, "the slow copy ended before it could be killed"
    finally:
        first.kill()  # SIGKILL: no cleanup runs
        first.wait()
    assert lock_on(inv, "lab1").split()[1:2] == [str(first.pid)]  # left behind
    on_host(inv, "lab1", "rm -rf /srv/models/.staging")  # the killed copy's partial staging (never served)
    code, report, out = run_report("deploy", inv, tmp_path / "after-kill.json", "--batch", "1", "--skip-preflight")
    assert code == 0, out[-3000:]
    assert "took over the lock of weights" in step_messages(report, "lab1"), step_messages(report, "lab1")
    for h in ("lab1", "lab2", "lab3"):
        assert report["hosts"][h]["counts"]["changed"] == 0, (h, changed_targets(report, h))
        assert lock_on(inv, h) == "", h
    drained = on_host(inv, "lab3", "grep -c ' down;  # ' /etc/nginx/conf.d/vfleet-gateway.conf || true")
    assert drained == "0", drained
    # a lock of another controller: refused while fresh, taken over once its TTL passed
    now = int(time.time())
    on_host(inv, "lab3", f"mkdir -p /run/vfleet; echo 'ops@elsewhere 4242 {now} 3600 deploy' > /run/vfleet/fleet.lock")
    refused = vfleet("gateway", "--inventory", str(inv), timeout=120)
    assert refused.returncode == 2 and "deploy by ops@elsewhere pid 4242" in refused.stderr, refused.stderr
    on_host(inv, "lab3", f"echo 'ops@elsewhere 4242 {now - 7200} 3600 deploy' > /run/vfleet/fleet.lock")
    code, report, out = run_report("gateway", inv, tmp_path / "gw.json")
    assert code == 0 and "took over the lock of deploy by ops@elsewhere" in step_messages(report, "lab3"), out[-2000:]
    assert lock_on(inv, "lab3") == ""


def test_controller_killed_during_the_rolling_phase_then_the_next_run_converges(deployed, tmp_path):
    """`deploy --batch 1` of a new unit, SIGKILLed once lab1 is out of the gateway: lab1 is
    left drained and both units are new on disk. The next `deploy --batch 1` (the fleet's own
    inventory) undrains, rolls what needs it, and leaves every host serving its unit from disk,
    none drained, no lock; one more run changes nothing."""
    import subprocess
    import sys

    inv = deployed["inv"]
    new = write_deploy_inventory(deployed["lab"], tmp_path, extra={"max_num_seqs": 7})
    run = subprocess.Popen(
        [sys.executable, "-m", "vfleet.cli", "deploy", "--inventory", str(new), "--batch", "1", "--skip-preflight"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and run.poll() is None:
            if on_host(inv, "lab3", "grep -c ' down;  # ' /etc/nginx/conf.d/vfleet-gateway.conf || true") != "0":
                break
            time.sleep(0.2)
    finally:
        run.kill()
        run.wait()
    code, report, out = run_report("deploy", inv, tmp_path / "next.json", "--batch", "1", "--skip-preflight")
    assert code == 0, out[-3000:]
    for h in ("lab1", "lab2"):
        unit = on_host(inv, h, "grep -o -- '--max-num-seqs [0-9]*' /etc/systemd/system/vllm.service")
        assert unit == "--max-num-seqs 8", (h, unit)
        running = on_host(
            inv,
            h,
            "ps -o args= -p $(systemctl show -p MainPID --value vllm.service) | grep -o -- '--max-num-seqs [0-9]*'",
        )
        assert running == unit, (h, running, unit)  # the process runs what the unit on disk says
    assert on_host(inv, "lab3", "grep -c ' down;  # ' /etc/nginx/conf.d/vfleet-gateway.conf || true") == "0"
    assert all(lock_on(inv, h) == "" for h in ("lab1", "lab2", "lab3"))
    smoke = vfleet("smoke", "--inventory", str(inv))
    assert smoke.returncode == 0, smoke.stdout[-3000:]
    code, again, out = run_report("deploy", inv, tmp_path / "again.json", "--batch", "1", "--skip-preflight")
    assert code == 0, out[-3000:]
    for h in ("lab1", "lab2", "lab3"):
        assert again["hosts"][h]["counts"]["changed"] == 0, (h, changed_targets(again, h))
    assert set(restarts(again).values()) == {0}


# Soak (make soak): a big model copied at a limited rate takes ~4 min; every run kills a controller during the rolling phase (above).
@pytest.mark.soak
def test_plain_deploy_killed_mid_run_then_the_next_plain_deploy_converges(deployed, tmp_path):
    """A plain `deploy` (no --batch) of a new model version, SIGKILLed in its weights step once
    lab1 has switched its model link and lab2 (slow link) still copies: lab1's vLLM still runs
    the old weights, its lock stays. The next plain deploy reports and takes over the lock,
    sees the restart lab1 is owed (its link is newer than its process), finishes lab2's copy,
    restarts both, leaves no host drained and no lock; one more run changes nothing."""
    import subprocess
    import sys

    from tests.integration.faults_env import big_model

    inv = deployed["inv"]
    live = {h: on_host(inv, h, "readlink /srv/models/tiny") for h in ("lab1", "lab2")}
    started = on_host(inv, "lab1", "systemctl show -p ExecMainStartTimestampMonotonic --value vllm.service")
    new = write_deploy_inventory(
        deployed["lab"],
        tmp_path,
        extra={"model_source": str(big_model(tmp_path)), "weights_fanout": False},
        host_vars={"lab2": {"weights_bwlimit": 1000}},
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "vfleet.cli", "deploy", "--inventory", str(new), "--skip-preflight"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and run.poll() is None:
            if on_host(inv, "lab1", "readlink /srv/models/tiny") != live["lab1"]:
                break
            time.sleep(0.3)
        assert run.poll() is None, "the deploy ended before it could be killed"
    finally:
        run.kill()
        run.wait()
    try:
        assert on_host(inv, "lab1", "readlink /srv/models/tiny") != live["lab1"]  # switched ...
        assert (
            on_host(inv, "lab1", "systemctl show -p ExecMainStartTimestampMonotonic --value vllm.service") == started
        )  # ... and never restarted
        assert on_host(inv, "lab2", "readlink /srv/models/tiny") == live["lab2"]  # lab2's copy unfinished
        assert lock_on(inv, "lab1").split()[1:2] == [str(run.pid)]
        code, report, out = run_report("deploy", new, tmp_path / "next.json", "--skip-preflight")
        assert code == 0, out[-3000:]
        msgs = step_messages(report, "lab1")
        assert "took over the lock of deploy" in msgs, msgs
        # Where the kill landed decides who asks for lab1's restart: once every file of lab1 was
        # as wanted (the usual case), only its process being older than its model link says the
        # restart is owed; if the kill came before the run had finished lab1's files, the next
        # run changes one of them and that change asks for the restart.
        assert "restart owed" in msgs or changed_targets(report, "lab1"), msgs
        assert restarts(report) == {"lab1": 1, "lab2": 1, "lab3": 0}, restarts(report)
        for h in ("lab1", "lab2"):  # each process started after its model link last changed
            assert (
                on_host(
                    inv,
                    h,
                    "s=$(systemctl show -p ExecMainStartTimestamp --value vllm.service); "
                    '[ $(date -d "$s" +%s) -ge $(stat -c %Y /srv/models/tiny) ] && echo fresh',
                )
                == "fresh"
            )
        assert all(lock_on(inv, h) == "" for h in ("lab1", "lab2", "lab3"))
        assert on_host(inv, "lab3", "grep -c ' down;  # ' /etc/nginx/conf.d/vfleet-gateway.conf || true") == "0"
        code, again, out = run_report("deploy", new, tmp_path / "again.json", "--skip-preflight")
        assert code == 0, out[-3000:]
        assert all(again["hosts"][h]["counts"]["changed"] == 0 for h in ("lab1", "lab2", "lab3")), out[-3000:]
        assert set(restarts(again).values()) == {0}
    finally:  # back to the fleet's model, serving (both restart on it), and the copies removed
        code, back, out = run_report("deploy", inv, tmp_path / "back.json", "--skip-preflight")
        assert code == 0, out[-3000:]
        for h in ("lab1", "lab2"):
            on_host(
                inv,
                h,
                f"cd /srv/models/.versions && for d in *; do "
                f'[ "$PWD/$d" = {live[h]} ] || rm -rf -- "$d"; done; rm -rf /srv/models/.staging',
            )
