"""`vfleet restart` and `vfleet upgrade` take the fleet lock before they change anything: a
fleet another controller holds stops them with one line naming the holder, its pid and when
the lock expires, and nothing (no install, no drain) runs; a run ends with the rollout's
per-host lines. Local hosts, a lock file in a temp dir: the tasks run in this process
against the real shell."""

from __future__ import annotations

import time

import pytest
from invoke import Context
from invoke.exceptions import Exit

from vfleet.cli import rollout
from vfleet.engine import lock
from vfleet.roles.install import _venv as vllm_install
from vfleet.roles.rollout import _rolling as rollout_role
from vfleet.roles.rollout._records import RolloutSummary


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    path = tmp_path / "run" / "fleet.lock"
    monkeypatch.setattr(lock, "LOCK_PATH", str(path))
    inv = tmp_path / "inventory.yaml"
    inv.write_text(
        "all:\n  vars:\n    ansible_connection: local\n  children:\n"
        "    vllm:\n      hosts:\n        gpu1:\n        gpu2:\n"
        "    gateways:\n      hosts:\n        gw1:\n"
    )
    ran: list[str] = []
    monkeypatch.setattr(vllm_install, "install_venv", lambda ctx, **kw: ran.append(f"install {ctx.name}"))
    monkeypatch.setattr(rollout_role.Rollout, "run", lambda self, *a: ran.append("rollout") or summary())
    return inv, path, ran


def summary(lines: list[str] | None = None) -> RolloutSummary:
    return RolloutSummary(batches=[], stopped=None, converged=[], serving={}, drained=[], lines=lines or [])


def _foreign_lock(path, since: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"ops@elsewhere 4242 {since} 3600 deploy\n")


@pytest.mark.parametrize("task", [rollout.restart, rollout.upgrade])
def test_a_held_fleet_stops_restart_and_upgrade_with_one_line(task, fleet, capsys):
    inv, path, ran = fleet
    _foreign_lock(path, int(time.time()) - 100)
    with pytest.raises(Exit) as exc:
        task(Context(), inventory=str(inv))
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: fleet is locked: deploy by ops@elsewhere pid 4242 since "), lines
    assert "(expires in 3" in lines[0] and lock.LOCK_PATH in lines[0], lines
    assert ran == []  # neither the upgrade's install nor any drain or restart ran
    assert path.read_text().split()[:2] == ["ops@elsewhere", "4242"]  # the holder's lock is untouched


@pytest.mark.parametrize("task", [rollout.restart, rollout.upgrade])
def test_a_free_fleet_is_locked_for_the_run_and_given_back(task, fleet, monkeypatch):
    inv, path, ran = fleet
    seen: list[str] = []
    monkeypatch.setattr(rollout_role.Rollout, "run", lambda self, *a: seen.append(path.read_text()) or summary())
    task(Context(), inventory=str(inv))
    holder = lock.parse_holder(seen[0])
    assert holder is not None and holder.task == task.name, seen  # held while the rollout ran
    assert not path.exists()  # and given back after


def test_an_expired_lock_is_taken_over(fleet):
    inv, path, ran = fleet
    _foreign_lock(path, int(time.time()) - 7200)
    rollout.restart(Context(), inventory=str(inv))
    assert ran == ["rollout"] and not path.exists()


def test_the_rollout_lines_are_the_last_lines_of_the_run(fleet, monkeypatch, capsys):
    inv, path, ran = fleet
    lines = ["gpu1: restarted in 40.0s; waited ...", "gpu2: not restarted: batch 1: ..."]
    monkeypatch.setattr(rollout_role.Rollout, "run", lambda self, *a: summary(lines))
    rollout.restart(Context(), inventory=str(inv))
    assert capsys.readouterr().out.strip().splitlines()[-2:] == lines
