"""Faults survived, on the lab's deployed fleet (2 vLLM hosts + 1 gateway, the `deployed`
session fixture): for each fault the other hosts finish, the report says what happened to
which host, and a re-run converges with nothing left half done. Each test puts the fleet back
as it found it (the tests after this module reuse it)."""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.integration.deploy_env import (API_KEY, changed_targets, restarts, run_report, vfleet,
                                          write_deploy_inventory)

pytestmark = pytest.mark.integration

GATEWAY = "http://10.213.0.13"
BAD_FLAG = "--no-such-vfleet-flag"


def on_host(inv: Path, host: str, command: str) -> str:
    """stdout of `command` on one host (read from the JSON report, not the terminal)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        rep = Path(tmp) / "run.json"
        p = vfleet("run", "--inventory", str(inv), "--limit", host, "--command", command, "--report", str(rep),
                   timeout=120)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        return json.loads(rep.read_text())["hosts"][host]["steps"][-1]["data"]["stdout"].strip()


def chat_through_gateway(n: int) -> list[int]:
    """n plain chat requests back to back through the gateway: their status codes."""
    codes = []
    with httpx.Client(timeout=120) as client:
        for _ in range(n):
            r = client.post(f"{GATEWAY}/v1/chat/completions", headers={"Authorization": f"Bearer {API_KEY}"},
                            json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
            codes.append(r.status_code)
    return codes


def descendants_argv(root: int) -> list[str]:
    """Command lines of `root` and every process below it (read from /proc, racing exits)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        grew, tree = bool(more), tree | more
    out = []
    for pid in tree:
        try:
            out.append((Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    return out


def run_watching_argv(*args: str, report: Path, timeout: float = 1200) -> tuple[int, dict, str, set[str]]:
    """A vfleet run whose own and its children's (ssh, rsync) argument lists are sampled."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "vfleet.cli", *args, "--report", str(report)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: set[str] = set()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.update(descendants_argv(proc.pid))
            time.sleep(0.2)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        stop.set()
        t.join()
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, json.loads(report.read_text()) if report.exists() else {}, out, seen


def step_messages(report: dict, host: str) -> str:
    return "\n".join(f"{s['action']} {s['status']} {s.get('message', '')}" for s in report["hosts"][host]["steps"])


def test_batch_deploy_whose_new_unit_fails_goes_back_and_stops(deployed, tmp_path):
    """A new unit for both hosts, one of them with a flag vLLM 0.32.0 rejects: lab1 (first
    batch) fails to start, goes back to its saved unit/env/venv/weights and serves; the batches
    stop, so lab2 is never restarted and its files are put back to what it serves."""
    inv = deployed["inv"]
    unit_before = {h: on_host(inv, h, "sha256sum /etc/systemd/system/vllm.service /etc/vllm/vllm.env; "
                                      "readlink /opt/vllm/current /srv/models/tiny") for h in ("lab1", "lab2")}
    bad = write_deploy_inventory(deployed["lab"], tmp_path, extra={"max_num_seqs": 5},
                                 host_vars={"lab1": {"vllm_extra_args": ["--enforce-eager", BAD_FLAG]}})
    code, report, out, argv = run_watching_argv("deploy", "--inventory", str(bad), "--batch", "1", "--diff",
                                                "--skip-preflight", report=tmp_path / "bad.json")
    assert code == 1, out[-4000:]
    assert argv and not [a for a in argv if API_KEY in a], "the key in a controller process's arguments"
    lab1 = report["hosts"]["lab1"]
    assert lab1["status"] == "failed", step_messages(report, "lab1")
    info = lab1["rollout"]
    assert info["rolled_back"] is True and BAD_FLAG in info["error"], info  # vLLM's own journal line
    msgs = step_messages(report, "lab1")
    assert "rollback point ok saved" in msgs and "restore changed put back unit, env file" in msgs, msgs
    assert "rollback changed back on unit, env file" in msgs and "rolled back and serving again" in msgs, msgs
    assert report["rollout"]["stopped"] and report["rollout"]["drained"] == [], report["rollout"]
    lab2 = report["hosts"]["lab2"]
    assert lab2.get("restored_untried") is True and "rollout" not in lab2, step_messages(report, "lab2")
    assert restarts(report)["lab2"] == 0
    # on the hosts: exactly the files they had, both serving, through the gateway too
    for h in ("lab1", "lab2"):
        now = on_host(inv, h, "sha256sum /etc/systemd/system/vllm.service /etc/vllm/vllm.env; "
                              "readlink /opt/vllm/current /srv/models/tiny")
        assert now == unit_before[h], (h, now, unit_before[h])
    smoke = vfleet("smoke", "--inventory", str(inv))
    assert smoke.returncode == 0, smoke.stdout[-3000:]
    # the key went into the env files, and appears in no output, --diff or report, nor in the
    # hosts' process arguments, unit files or journal
    assert API_KEY not in out and API_KEY not in json.dumps(report)
    for h in ("lab1", "lab2"):
        seen = on_host(inv, h, "ps -eo args; cat /etc/systemd/system/vllm.service; "
                              "cat /var/lib/vfleet/rollback/vllm.service/unit; journalctl -o cat --no-pager | tail -n 3000")
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
    code, report, out = run_report("deploy", inv, tmp_path / "back.json", "--limit", "lab2,lab3",
                                   "--skip-preflight")
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


class MuteSSHD:
    """A TCP listener that accepts and never writes a byte (an sshd wedged before its banner)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.5)
        while not self.stopped.is_set():
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                continue

    def close(self) -> None:
        self.stopped.set()
        for c in self.conns:
            c.close()
        self.sock.close()


def test_sshd_that_accepts_and_never_answers_times_out(lab_inventory, tmp_path):
    mute = MuteSSHD()
    try:
        data = yaml.safe_load(Path(lab_inventory).read_text())
        group = next(iter(data["all"]["children"].values()))
        group.setdefault("hosts", {})["mute"] = {"ansible_host": "127.0.0.1", "ansible_port": mute.port}
        inv = tmp_path / "inventory.yaml"
        inv.write_text(yaml.safe_dump(data))
        t0 = time.monotonic()
        code, report, out = run_report("run", inv, tmp_path / "r.json", "--command", "uname -n",
                                       "--connect-timeout", "3", timeout=120)
        took = time.monotonic() - t0
    finally:
        mute.close()
    assert code != 0, out[-2000:]
    assert mute.conns, "the mute listener was never connected to"
    m = report["hosts"]["mute"]
    assert m["status"] == "unreachable", m
    msg = m["steps"][-1]["message"]
    assert "timed out" in msg or "banner" in msg, msg
    others = [h for h in report["hosts"] if h != "mute"]
    assert others and all(report["hosts"][h]["status"] in ("ok", "changed") for h in others), report["summary"]
    print(f"mute sshd: unreachable after {took:.1f}s with --connect-timeout 3: {msg}")


def test_weight_copy_that_cannot_fit_fails_before_copying(deployed, tmp_path):
    """lab1's staging area is a 8 MiB tmpfs, the new model is ~40 MiB: lab1 fails before any
    byte is sent, saying how much it needs, and keeps serving its old copy; lab2 gets it."""
    import shutil

    from tests.integration.deploy_env import ensure_model

    inv = deployed["inv"]
    src = tmp_path / "tiny-big"
    shutil.copytree(ensure_model(), src)
    (src / "MANIFEST.sha256").unlink()
    (src / "extra-shard.bin").write_bytes(bytes(range(256)) * (40 * 4096))  # 40 MiB
    big = write_deploy_inventory(deployed["lab"], tmp_path, extra={"model_source": str(src), "weights_fanout": False})
    live = {h: on_host(inv, h, "readlink /srv/models/tiny") for h in ("lab1", "lab2")}
    staging = "/srv/models/.staging"
    on_host(inv, "lab1", f"mkdir -p {staging} && mount -t tmpfs -o size=8m vfleet-faults {staging}")
    try:
        code, report, out = run_report("weights", big, tmp_path / "full.json", "--limit", "lab1,lab2")
        versions = on_host(inv, "lab1", "ls /srv/models/.versions")
    finally:
        on_host(inv, "lab1", f"umount {staging}")
    assert code == 1, out[-3000:]
    failed = [s for s in report["hosts"]["lab1"]["steps"] if s["status"] == "failed"][-1]
    assert "not enough disk for the weights" in failed["message"] and "MiB more" in failed["message"], failed
    assert failed["data"]["needed_bytes"] > 40 * 2**20 > failed["data"]["free_bytes"], failed
    assert [s for s in report["hosts"]["lab1"]["steps"] if s["action"] == "copy"] == []  # nothing sent
    assert on_host(inv, "lab1", "readlink /srv/models/tiny") == live["lab1"]  # old weights still in use
    assert len(versions.split()) == 1, versions  # no partial copy in place
    assert report["hosts"]["lab2"]["status"] == "changed", step_messages(report, "lab2")  # the other host finished
    assert on_host(inv, "lab2", "readlink /srv/models/tiny") != live["lab2"]
    # back to the fleet's model: lab2's link switches back, lab1 has nothing to do
    code, report, out = run_report("weights", inv, tmp_path / "back.json", "--limit", "lab1,lab2")
    assert code == 0, out[-3000:]
    assert report["hosts"]["lab1"]["counts"]["changed"] == 0, changed_targets(report, "lab1")
    assert {h: on_host(inv, h, "readlink /srv/models/tiny") for h in ("lab1", "lab2")} == live
    on_host(inv, "lab2", f"cd /srv/models/.versions && for d in *; do "
                         f"[ \"$PWD/$d\" = {live['lab2']} ] || rm -rf -- \"$d\"; done")  # the 40 MiB copy


def big_model(tmp_path: Path) -> Path:
    """The fleet's tiny model plus a 40 MiB shard: a copy that takes a while, a new manifest."""
    import shutil

    from tests.integration.deploy_env import ensure_model

    src = tmp_path / "tiny-big"
    shutil.copytree(ensure_model(), src)
    (src / "MANIFEST.sha256").unlink()
    (src / "extra-shard.bin").write_bytes(bytes(range(256)) * (40 * 4096))
    return src


def staged_bytes(inv: Path, host: str) -> int:
    p = vfleet("run", "--inventory", str(inv), "--limit", host, "--command",
               "du -sb /srv/models/.staging 2>/dev/null | cut -f1", timeout=30)
    words = [ln.split()[1] for ln in p.stdout.splitlines() if ln.startswith(f"[{host}] ") and len(ln.split()) > 1]
    return int(words[0]) if words and words[0].isdigit() else 0


def wait_serving(inv: Path, host: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        p = vfleet("smoke", "--inventory", str(inv), "--limit", host, timeout=180)
        if p.returncode == 0:
            return
        assert time.monotonic() < deadline, p.stdout[-2000:]
        time.sleep(5)


def test_host_that_goes_away_during_the_weight_copy(deployed, lab, tmp_path):
    """lab2's container is killed while rsync writes its copy: the run ends (no hang), lab1
    finishes, the report names lab2's fault; back up, a re-run completes lab2's copy (what a
    SIGKILLed rsync left in staging is reused where rsync can)."""
    import os
    import signal
    import subprocess
    import sys

    inv = deployed["inv"]
    live = {h: on_host(inv, h, "readlink /srv/models/tiny") for h in ("lab1", "lab2")}
    big = write_deploy_inventory(deployed["lab"], tmp_path, extra={"model_source": str(big_model(tmp_path)),
                                                                    "weights_fanout": False, "weights_bwlimit": 2000})
    report_path = tmp_path / "gone.json"
    run = subprocess.Popen([sys.executable, "-m", "vfleet.cli", "weights", "--inventory", str(big), "--limit",
                            "lab1,lab2", "--report", str(report_path), "--connect-timeout", "5"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while staged_bytes(inv, "lab2") < 2_000_000 and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.5)
        pid = next(s.pid for s in lab.api.status() if s.name == "lab2")
        assert pid and run.poll() is None, "the copy finished before lab2 could be stopped"
        # the host goes away at once, no shutdown: its nspawn, then everything left in its
        # namespaces (a killed nspawn does not take the host's processes with it)
        os.kill(pid, signal.SIGKILL)
        lab.api._kill_leftovers("lab2")
        out, _ = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
        lab.restore(lab.last)  # lab2 boots again from its own disk
    assert run.returncode == 1, out[-3000:]
    report = json.loads(report_path.read_text())
    lab2 = report["hosts"]["lab2"]
    assert lab2["status"] in ("unreachable", "failed"), step_messages(report, "lab2")
    assert report["hosts"]["lab1"]["status"] == "changed", step_messages(report, "lab1")  # the other host finished
    print("lab2 went away:", lab2["steps"][-1]["message"])
    # lab2 back: its live link was never switched, a re-run resumes the copy
    assert on_host(inv, "lab2", "readlink /srv/models/tiny") == live["lab2"]
    code, again, out = run_report("weights", big, tmp_path / "resume.json", "--limit", "lab2")
    assert code == 0, out[-3000:]
    verified = [s for s in again["hosts"]["lab2"]["steps"] if s["action"] == "verify"]
    assert verified and verified[0]["status"] == "ok", step_messages(again, "lab2")  # complete and checked
    code, back, out = run_report("weights", inv, tmp_path / "back.json", "--limit", "lab1,lab2")
    assert code == 0, out[-3000:]
    assert {h: on_host(inv, h, "readlink /srv/models/tiny") for h in ("lab1", "lab2")} == live
    # a re-run of the deploy converges: lab2 serves again (started if its boot did not)
    print("lab2 after its reboot:", on_host(inv, "lab2", "systemctl is-enabled vllm.service; "
                                                          "systemctl is-active vllm.service; true"))
    code, back, out = run_report("deploy", inv, tmp_path / "deploy-back.json", "--limit", "lab2,lab3",
                                 "--skip-preflight")
    assert code == 0, out[-3000:]
    assert back["hosts"]["lab2"]["smoke"]["host"]["chat completion"]["ok"], back["hosts"]["lab2"]["smoke"]
    for h in ("lab1", "lab2"):
        on_host(inv, h, f"cd /srv/models/.versions && for d in *; do "
                        f"[ \"$PWD/$d\" = {live[h]} ] || rm -rf -- \"$d\"; done")


def lock_on(inv: Path, host: str) -> str:
    return on_host(inv, host, "cat /run/vfleet/fleet.lock 2>/dev/null || true")


def test_two_controllers_one_lock_and_a_killed_controller_converges(deployed, tmp_path):
    """A second deploy while one runs stops at once naming the holder; the first is then
    SIGKILLed, its lock stays, and the next run from this controller takes it over (its pid is
    gone), converges with nothing to change and leaves no lock and no host drained. A foreign
    lock blocks until its TTL passed, then is taken over."""
    import subprocess
    import sys

    inv = deployed["inv"]
    first = subprocess.Popen([sys.executable, "-m", "vfleet.cli", "deploy", "--inventory", str(inv),
                              "--skip-preflight"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not lock_on(inv, "lab3") and time.monotonic() < deadline:
            time.sleep(0.3)
        held = lock_on(inv, "lab3")
        assert held.split()[1:2] == [str(first.pid)], held
        second = vfleet("deploy", "--inventory", str(inv), "--skip-preflight", timeout=120)
        assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-2000:]
        line = second.stderr.strip().splitlines()[-1]
        assert line.startswith("error: fleet is locked: deploy by ") and f"pid {first.pid}" in line, line
    finally:
        first.kill()  # SIGKILL: no cleanup runs
        first.wait()
    assert lock_on(inv, "lab3").split()[1:2] == [str(first.pid)]  # left behind
    code, report, out = run_report("deploy", inv, tmp_path / "after-kill.json", "--batch", "1", "--skip-preflight")
    assert code == 0, out[-3000:]
    assert "took over the lock of deploy" in step_messages(report, "lab3"), step_messages(report, "lab3")
    for h in ("lab1", "lab2", "lab3"):
        assert report["hosts"][h]["counts"]["changed"] == 0, (h, changed_targets(report, h))
        assert lock_on(inv, h) == "", h
    drained = on_host(inv, "lab3", "grep -c ' down;' /etc/nginx/conf.d/vfleet-gateway.conf || true")
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
    run = subprocess.Popen([sys.executable, "-m", "vfleet.cli", "deploy", "--inventory", str(new), "--batch", "1",
                            "--skip-preflight"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and run.poll() is None:
            if on_host(inv, "lab3", "grep -c ' down;' /etc/nginx/conf.d/vfleet-gateway.conf || true") != "0":
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
        running = on_host(inv, h, "ps -o args= -p $(systemctl show -p MainPID --value vllm.service) "
                                  "| grep -o -- '--max-num-seqs [0-9]*'")
        assert running == unit, (h, running, unit)  # the process runs what the unit on disk says
    assert on_host(inv, "lab3", "grep -c ' down;' /etc/nginx/conf.d/vfleet-gateway.conf || true") == "0"
    assert all(lock_on(inv, h) == "" for h in ("lab1", "lab2", "lab3"))
    smoke = vfleet("smoke", "--inventory", str(inv))
    assert smoke.returncode == 0, smoke.stdout[-3000:]
    code, again, out = run_report("deploy", inv, tmp_path / "again.json", "--batch", "1", "--skip-preflight")
    assert code == 0, out[-3000:]
    for h in ("lab1", "lab2", "lab3"):
        assert again["hosts"][h]["counts"]["changed"] == 0, (h, changed_targets(again, h))
    assert set(restarts(again).values()) == {0}
