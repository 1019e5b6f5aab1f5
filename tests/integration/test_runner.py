"""The engine against real sshd/systemd lab hosts: parallelism, unreachable hosts, command
timeouts, host key rejection, check mode, idempotency, handlers and the failure budget."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from vfleet.config.variables import SCHEMA
from vfleet.engine.inventory import load_inventory
from vfleet.engine.operations import ensure_directory, ensure_symlink, put_file, run_command
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, Play, RunOptions

pytestmark = pytest.mark.integration


def derived_inventory(base: Path, tmp_path: Path, mutate) -> Path:
    """A copy of the lab inventory with some change (a host made unreachable, a bad key...)."""
    data = yaml.safe_load(base.read_text())
    mutate(data)
    out = tmp_path / "inventory.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def all_hosts(data: dict) -> dict[str, dict]:
    hosts: dict[str, dict] = {}

    def walk(group: dict) -> None:
        for name, hv in (group.get("hosts") or {}).items():
            hosts[name] = hv if hv is not None else {}
        for child in (group.get("children") or {}).values():
            walk(child or {})

    walk(data["all"])
    return hosts


@pytest.fixture(scope="module")
def inv(lab_inventory):
    return load_inventory(lab_inventory, schema=SCHEMA)


def test_worker_pool_is_bounded_by_forks(inv):
    hosts = inv.select(None)
    assert len(hosts) >= 3
    active = 0
    peak = 0
    lock = threading.Lock()

    def step(ctx: HostContext) -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        ctx.run("sleep 0.5")
        with lock:
            active -= 1

    for forks, expected in ((1, 1), (2, 2), (len(hosts), len(hosts))):
        peak = 0
        play = Play("test", hosts, RunOptions(forks=forks))
        play.run_step("sleep", step)
        play.finish()
        assert peak == expected, f"forks={forks}: {peak} hosts ran at once"


def test_unreachable_host_does_not_stop_the_others(lab_inventory, tmp_path):
    def mutate(d):
        victim = sorted(all_hosts(d))[0]
        all_hosts(d)[victim]["ansible_port"] = 2  # nothing listens there: connection refused

    inv = load_inventory(derived_inventory(lab_inventory, tmp_path, mutate), schema=SCHEMA)
    hosts = inv.select(None)
    play = Play("test", hosts, RunOptions(connect_timeout=3))
    out = play.run_step("uname", lambda ctx: ctx.must("uname -n", what="uname").stdout.strip())
    play.finish()
    victim = sorted(h.name for h in hosts)[0]
    assert play.results[victim].status is Status.UNREACHABLE
    assert "cannot connect" in play.results[victim].steps[-1].message
    others = [h.name for h in hosts if h.name != victim]
    assert sorted(out) == sorted(others)
    assert all(out[n] == n for n in others)  # each host answers with its own hostname


def test_command_timeout_fails_only_that_host(inv):
    hosts = inv.select(None)[:2]
    slow = hosts[0].name

    def step(ctx: HostContext) -> None:
        ctx.must("sleep 5" if ctx.name == slow else "true", what="sleepy", timeout=1)

    play = Play("test", hosts, RunOptions())
    t0 = time.monotonic()
    play.run_step("timeout", step)
    play.finish()
    assert time.monotonic() - t0 < 4.5
    assert play.results[slow].status is Status.FAILED
    assert "timed out after 1s" in play.results[slow].steps[-1].message
    assert play.results[hosts[1].name].status is Status.OK


def test_unknown_host_key_is_rejected_and_opt_out_works(lab_inventory, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")

    def mutate(d):
        d["all"].setdefault("vars", {})["known_hosts_file"] = str(empty)

    inv = load_inventory(derived_inventory(lab_inventory, tmp_path, mutate), schema=SCHEMA)
    host = inv.select(None)[:1]
    play = Play("test", host, RunOptions())
    play.run_step("uname", lambda ctx: ctx.run("uname"))
    play.finish()
    res = play.results[host[0].name]
    assert res.status is Status.UNREACHABLE
    assert "unknown host key" in res.steps[-1].message and "ssh-keyscan" in res.steps[-1].message
    assert empty.read_text() == ""  # nothing was added behind the operator's back

    play = Play("test", host, RunOptions(host_key_checking=False))
    play.run_step("uname", lambda ctx: ctx.must("uname", what="uname"))
    play.finish()
    assert play.results[host[0].name].status is Status.OK


def _file_ops(path: str):
    def step(ctx: HostContext) -> None:
        ensure_directory(ctx, path, mode="0750")
        put_file(ctx, f"{path}/app.conf", f"host={ctx.name}\nvalue=1\n", mode="0640", notify="reload")
        ensure_symlink(ctx, f"{path}/current", f"{path}/app.conf")

    return step


def test_check_mode_changes_nothing_then_apply_then_idempotent(inv):
    hosts = inv.select(None)[:2]
    path = f"/tmp/vfleet-ops-{time.time_ns()}"
    handled: list[str] = []
    handlers = {"reload": lambda ctx: handled.append(ctx.name)}

    play = Play("test", hosts, RunOptions(check=True, diff=True))
    play.run_step("files", _file_ops(path), handlers=handlers)
    for h in hosts:
        r = play.results[h.name]
        assert r.counts()["changed"] == 3 and r.counts()["failed"] == 0
        assert any("+host=" in s.diff for s in r.steps)
        assert not play.contexts[h.name].run(f"test -e {path}").ok  # nothing was created
    play.finish()
    assert sorted(handled) == sorted(h.name for h in hosts)  # would-change still notifies, once
    handled.clear()

    play = Play("test", hosts, RunOptions())
    play.run_step("files", _file_ops(path), handlers=handlers)
    for h in hosts:
        assert play.results[h.name].counts()["changed"] == 3
        r = play.contexts[h.name].run(f"stat -c %a {path}/app.conf; cat {path}/current")
        assert r.stdout.split("\n")[0] == "640" and f"host={h.name}" in r.stdout
    play.finish()
    assert sorted(handled) == sorted(h.name for h in hosts)
    handled.clear()

    play = Play("test", hosts, RunOptions())
    play.run_step("files", _file_ops(path), handlers=handlers)
    for h in hosts:
        assert play.results[h.name].counts()["changed"] == 0, play.results[h.name].to_dict()
        play.contexts[h.name].run(f"rm -rf {path}")
    play.finish()
    assert handled == []  # nothing changed: the handler does not run


def test_mode_only_change_is_detected(inv):
    host = inv.select(None)[:1]
    path = f"/tmp/vfleet-mode-{time.time_ns()}"
    play = Play("test", host, RunOptions())
    play.run_step("a", lambda ctx: put_file(ctx, path, "x\n", mode="0644"))
    play.run_step("b", lambda ctx: put_file(ctx, path, "x\n", mode="0600"))
    play.run_step("c", lambda ctx: run_command(ctx, f"rm -f {path}"))
    play.finish()
    steps = play.results[host[0].name].steps
    assert steps[1].status is Status.CHANGED and "mode 644->600" in steps[1].message


def test_max_fail_percentage_aborts_the_run(inv):
    hosts = inv.select(None)
    assert len(hosts) >= 3
    bad = {hosts[0].name, hosts[1].name}
    play = Play("test", hosts, RunOptions(max_fail_percentage=34))
    play.run_step("fail some", lambda ctx: ctx.must("false" if ctx.name in bad else "true", what="maybe"))
    assert play.aborted and "max_fail_percentage" in play.aborted
    ran = []
    with pytest.raises(Exception):
        play.run_step("next", lambda ctx: ran.append(ctx.name))
    play.finish()
    assert ran == []


def test_cli_run_reports_and_exit_codes(lab_inventory, tmp_path):
    report = tmp_path / "report.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "vfleet.cli",
            "run",
            "--inventory",
            str(lab_inventory),
            "--command",
            "uname -a",
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "RECAP run" in p.stdout
    data = json.loads(report.read_text())
    assert data["task"] == "run" and data["summary"]["failed"] == 0
    assert all(h["status"] == "changed" for h in data["hosts"].values())

    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "vfleet.cli",
            "run",
            "--inventory",
            str(lab_inventory),
            "--command",
            "exit 3",
            "--limit",
            sorted(data["hosts"])[0],
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 1
    assert "exit 3" in p.stdout
