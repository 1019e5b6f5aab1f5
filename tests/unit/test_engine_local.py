"""The engine on a local connection (`ansible_connection: local`): operations, check mode,
diffs, handlers, the report and the CLI's exit codes. Real files, real shell, no SSH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import load_inventory
from vfleet.engine.operations import ensure_directory, ensure_symlink, put_file, run_command
from vfleet.engine.report import report_dict, write_json_atomic
from vfleet.engine.results import Status
from vfleet.engine.runner import HostFailed, Play, RunOptions
from vfleet.roles.rollout._batches import batch_sizes


@pytest.fixture
def local_inv(tmp_path):
    inv = tmp_path / "local.yaml"
    inv.write_text("all:\n  hosts:\n    localhost:\n    other:\n      ansible_connection: local\n")
    return inv


def play_for(inv: Path, **opts) -> Play:
    return Play("test", load_inventory(inv, schema=SCHEMA).select(None), RunOptions(**opts))


def test_put_file_check_apply_idempotent_and_diff(local_inv, tmp_path):
    target = tmp_path / "out" / "a.conf"
    notified = []
    for check, expect in ((True, Status.CHANGED), (False, Status.CHANGED), (False, Status.OK)):
        play = play_for(local_inv, check=check, diff=True)
        play.run_step(
            "put",
            lambda ctx: put_file(ctx, str(target) + "." + ctx.name, "a=1\n", mode="0640", notify="h"),
            handlers={"h": lambda ctx: notified.append(ctx.name)},
        )
        for name, r in play.results.items():
            assert r.steps[-1].status is expect, (check, r.steps[-1])
        if check:
            assert not target.parent.exists()
            assert "+a=1" in play.results["localhost"].steps[-1].diff
    assert oct((tmp_path / "out" / "a.conf.localhost").stat().st_mode & 0o777) == "0o640"
    assert sorted(notified) == ["localhost", "localhost", "other", "other"]  # check + apply, not the no-op


def test_sensitive_file_diff_hides_content(local_inv, tmp_path):
    play = play_for(local_inv, check=True, diff=True)
    play.run_step(
        "put", lambda ctx: put_file(ctx, str(tmp_path / "env"), "VLLM_API_KEY=sk-hidden-value\n", sensitive=True)
    )
    d = play.results["localhost"].steps[-1].diff
    assert "sk-hidden-value" not in d and "not shown" in d


def test_symlink_and_directory(local_inv, tmp_path):
    d = tmp_path / "dir"
    play = play_for(local_inv)
    play.run_step(
        "a",
        lambda ctx: (
            ensure_directory(ctx, str(d), mode="0700"),
            ensure_symlink(ctx, str(d / f"cur-{ctx.name}"), "/tmp"),
        ),
    )
    play.run_step(
        "b",
        lambda ctx: (
            ensure_directory(ctx, str(d), mode="0700"),
            ensure_symlink(ctx, str(d / f"cur-{ctx.name}"), "/tmp"),
        ),
    )
    steps = play.results["localhost"].steps
    assert [s.status for s in steps] == [Status.CHANGED, Status.CHANGED, Status.OK, Status.OK]
    assert os.readlink(d / "cur-localhost") == "/tmp"


def test_failure_keeps_other_hosts_and_report_contract(local_inv, tmp_path):
    play = play_for(local_inv)

    def step(ctx):
        if ctx.name == "other":
            raise HostFailed("broken on purpose")
        run_command(ctx, "true")

    play.run_step("s", step)
    play.run_step("t", lambda ctx: run_command(ctx, "true"))
    play.finish()
    data = report_dict(play)
    assert set(data) >= {"task", "hosts", "summary"}
    assert data["hosts"]["other"]["status"] == "failed"
    assert data["hosts"]["localhost"]["counts"]["changed"] == 2  # went on with the second step
    assert data["summary"]["failed"] == 1 and play.exit_code == 1
    out = write_json_atomic(tmp_path / "r.json", data)
    assert json.loads(out.read_text())["task"] == "test"
    assert not list(tmp_path.glob(".r.json.*"))  # no temp file left behind


def test_command_timeout_local(local_inv):
    play = play_for(local_inv, command_timeout=1)
    play.run_step("slow", lambda ctx: run_command(ctx, "sleep 3"))
    assert "timed out after 1s" in play.results["localhost"].steps[-1].message


@pytest.mark.parametrize(
    "spec,total,expected",
    [
        ("1", 3, [1, 1, 1]),
        ("2", 3, [2, 1]),
        ("25%", 8, [2, 2, 2, 2]),
        ("1,25%,100%", 10, [1, 2, 7]),
        ("100%", 2, [2]),
        ("10%", 3, [1, 1, 1]),
        ("1,50%", 5, [1, 2, 2]),
    ],
)
def test_batch_sizes_like_ansible_serial(spec, total, expected):
    assert batch_sizes(spec, total) == expected


@pytest.mark.parametrize("spec", ["", "x", "0", "1,abc%"])
def test_batch_sizes_reject_nonsense(spec):
    with pytest.raises(VfleetError):
        batch_sizes(spec, 4)


def vfleet(*args):
    return subprocess.run([sys.executable, "-m", "vfleet.cli", *args], capture_output=True, text=True)


def test_cli_invalid_inventory_exits_2_with_one_line_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("all:\n  vars:\n    tensor_parallel_size: two\n    max_num_seq: 4\n  hosts:\n    gpu01:\n")
    p = vfleet("inventory", "--inventory", str(bad))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert any("tensor_parallel_size" in ln and "bad.yaml" in ln for ln in lines)
    assert any("did you mean 'max_num_seqs'" in ln for ln in lines)
    assert "Traceback" not in p.stderr
    p = vfleet("run", "--inventory", str(bad), "--command", "true")
    assert p.returncode == 2 and "Traceback" not in p.stderr  # nothing ran


def test_cli_inventory_masks_secrets_and_graphs(tmp_path, monkeypatch):
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "all:\n  vars:\n    api_key_env: VF_TEST_KEY\n  children:\n    vllm:\n      hosts:\n        gpu[01:02]:\n"
    )
    env = dict(os.environ, VF_TEST_KEY="sk-very-secret")
    p = subprocess.run(
        [sys.executable, "-m", "vfleet.cli", "inventory", "--inventory", str(inv)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    assert "sk-very-secret" not in p.stdout
    data = json.loads(p.stdout)
    assert sorted(data["_meta"]["hostvars"]) == ["gpu01", "gpu02"]
    g = subprocess.run(
        [sys.executable, "-m", "vfleet.cli", "inventory", "--inventory", str(inv), "--graph"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert "@vllm" in g.stdout and "gpu02" in g.stdout


def test_cli_limit_that_matches_nothing(local_inv):
    p = vfleet("run", "--inventory", str(local_inv), "--command", "true", "--limit", "nosuch")
    assert p.returncode == 2 and "nosuch" in p.stderr and "Traceback" not in p.stderr


def test_cli_menu_lists_every_task_with_flag_help():
    p = vfleet("--list")
    for name in (
        "deploy",
        "preflight",
        "preflight.capture",
        "plan",
        "weights",
        "install",
        "service",
        "gateway",
        "smoke",
        "verify",
        "restart",
        "upgrade",
        "drain",
        "undrain",
        "bench",
        "inventory",
        "run",
        "lab.up",
        "lab.down",
        "lab.status",
    ):
        assert f"  {name} " in p.stdout or f"({name})" in p.stdout, name
    for task in ("deploy", "restart", "preflight", "lab.up"):
        h = vfleet("--help", task)
        assert h.returncode == 0
        flags = [ln for ln in h.stdout.splitlines() if ln.startswith("  -")]
        assert flags and all(len(ln.split(None, 1)) > 1 for ln in flags), (task, flags)
