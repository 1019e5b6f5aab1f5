"""The eval gate through the CLI tasks: deploy and service refuse --gate without --batch with
the fix, a bad gate file stops `vfleet upgrade` before anything is installed, upgrade hands the
gate to its rollout, each task's --help names --gate; and after an aborted gated deploy the hosts
never restarted get their files back (the rollback point), each with its result in the report."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from invoke import Context
from invoke.exceptions import Exit
from rich.console import Console

import vfleet.roles.rollout as rollout_face
from tests.unit.configs import LAB_VARS
from tests.unit.rollout_gate_cases import fleet_of
from vfleet.cli import deploy as deploy_task, rollout as rollout_task
from vfleet.cli.common import make_play
from vfleet.cli.options import TaskOptions
from vfleet.engine.errors import VfleetError
from vfleet.engine.report import report_dict
from vfleet.engine.runner import HostFailed
from vfleet.roles.install import _venv as vllm_install
from vfleet.roles.rollout import _rolling as rolling
from vfleet.roles.rollout._records import RestoredUntried, RolloutSummary


@pytest.fixture
def inventory(tmp_path) -> Path:
    path = tmp_path / "inventory.yaml"
    data = {
        "all": {
            "vars": {**LAB_VARS, "ansible_connection": "local"},
            "children": {"vllm": {"hosts": {"gpu1": None, "gpu2": None}}},
        }
    }
    path.write_text(yaml.safe_dump(data))
    return path


def test_deploy_gate_without_batch_is_refused_with_the_fix(inventory, capsys):
    for task in (deploy_task.deploy, deploy_task.service_task):
        with pytest.raises(Exit) as exc:
            task(Context(), inventory=str(inventory), gate="eval.yaml")
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            "error: --gate eval.yaml needs --batch: the gate judges the first batch (the canary) "
            "before the others restart; add --batch 1"
        ]


def test_a_bad_gate_file_stops_upgrade_before_anything_changes(inventory, capsys, monkeypatch):
    ran: list[str] = []
    monkeypatch.setattr(vllm_install, "install_venv", lambda ctx, **kw: ran.append(ctx.name))

    def bad(path, fleet, hosts, **kw):
        raise VfleetError(f"--gate {path}: max_divergence: -1 is less than the minimum of 0")

    monkeypatch.setattr(rollout_face, "open_gate", bad)  # where `vfleet upgrade` looks it up
    with pytest.raises(Exit) as exc:
        rollout_task.upgrade(Context(), inventory=str(inventory), gate="eval.yaml")
    assert exc.value.code == 2 and ran == []
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --gate eval.yaml: max_divergence: -1 is less than the minimum of 0"
    ]


def test_upgrade_hands_the_gate_to_its_rollout(inventory, monkeypatch):
    seen: dict[str, Any] = {}
    sentinel = object()
    monkeypatch.setattr(vllm_install, "install_venv", lambda ctx, **kw: None)
    monkeypatch.setattr(
        rollout_face, "open_gate", lambda path, fleet, hosts, **kw: seen.update(hosts=hosts, **kw) or sentinel
    )
    monkeypatch.setattr(
        rolling.Rollout, "run", lambda self, *a: seen.update(gate=self.gate) or RolloutSummary([], None, [], {}, [])
    )
    rollout_task.upgrade(Context(), inventory=str(inventory), gate="eval.yaml", report="/tmp/x.json")
    assert seen == {"hosts": ["gpu1", "gpu2"], "task": "upgrade", "report": "/tmp/x.json", "gate": sentinel}


@pytest.mark.parametrize("task", ["upgrade", "deploy", "service"])
def test_help_names_the_gate(task, tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "vfleet.cli", task, "--help"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    flat = " ".join(p.stdout.split())
    assert "--gate=STRING" in flat and "the first batch is a canary" in flat, flat


def test_untried_hosts_get_their_files_back_even_when_the_play_aborted(tmp_path, monkeypatch):
    """After an abort run_step refuses every step; the hosts never restarted must still lose the
    new unit, env and weights link on disk, each with its result in the report."""
    from vfleet.cli import deploy_steps

    fleet = fleet_of(tmp_path, {"a1": "m1", "a2": "m1", "b2": "m2"})
    play = make_play("deploy", fleet, fleet.vllm_hosts, TaskOptions(), console=Console(file=io.StringIO()))
    play.aborted = "1 of 4 hosts failed (25% > max_fail_percentage 0%): stopping the run"

    def restore(ctx) -> str:
        if ctx.name == "b2":
            raise HostFailed("ssh: connection reset")
        return "the rollback point of 2026-12-02T16:00"

    monkeypatch.setattr(deploy_steps.rollback_point, "restore", restore)
    deploy_steps._restore_untried(play, ["a1", "a2", "b2"])
    for host in ("a1", "a2"):
        assert play.results[host].get(RestoredUntried) is not None
        assert "the rollback point of 2026-12-02T16:00 put back" in play.results[host].steps[-1].message
    assert play.results["b2"].failed
    assert "putting its saved point back failed: ssh: connection reset" in play.results["b2"].steps[-1].message
    deploy_steps.step_smoke(play, fleet)  # refused after an abort: the run goes on to its report
    assert report_dict(play)["hosts"]["a1"]
