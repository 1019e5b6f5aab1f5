"""The fleet lock's shell, run here against a lock file in a temp dir (no host needed):
one taker wins, a live holder is named, an expired one is taken over, release is owner-only."""

from __future__ import annotations

import subprocess
import time

import pytest

from vfleet.engine import lock


@pytest.fixture
def lock_file(tmp_path, monkeypatch):
    path = tmp_path / "run" / "fleet.lock"
    monkeypatch.setattr(lock, "LOCK_PATH", str(path))
    return path


def sh(cmd: str) -> str:
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True).stdout.strip()


def holder(owner="a@ctl", pid=11, since=None, ttl=600, task="deploy") -> lock.Holder:
    return lock.Holder(owner, pid, int(time.time()) if since is None else since, ttl, task)


def test_first_taker_wins_and_the_second_is_told_who(lock_file):
    a, b = holder(), holder(owner="b@other", pid=22)
    assert sh(lock.acquire_command(a)) == "taken"
    out = sh(lock.acquire_command(b))
    assert out.startswith("held ") and lock.parse_holder(out[5:]) == a
    assert lock_file.read_text().strip() == a.line()


def test_the_same_run_may_take_it_again(lock_file):
    a = holder()
    sh(lock.acquire_command(a))
    assert sh(lock.acquire_command(a)).startswith("taken")


def test_an_expired_lock_is_taken_over_and_says_whose_it_was(lock_file):
    old = holder(owner="b@other", since=int(time.time()) - 700, ttl=600)
    sh(lock.acquire_command(old))
    new = holder()
    out = sh(lock.acquire_command(new))
    assert out.startswith("taken ") and lock.parse_holder(out[6:]) == old
    assert lock_file.read_text().strip() == new.line()


def test_force_takes_a_live_lock(lock_file):
    sh(lock.acquire_command(holder(owner="a@ctl", pid=99)))
    assert sh(lock.acquire_command(holder(pid=12), force=True)).startswith("taken ")


def test_release_removes_only_our_own_lock(lock_file):
    a, b = holder(), holder(owner="b@other", pid=22)
    sh(lock.acquire_command(a))
    sh(lock.release_command(b))
    assert lock_file.exists()
    sh(lock.release_command(a))
    assert not lock_file.exists()


def test_describe_names_task_owner_pid_and_expiry():
    h = holder(since=1_000_000, ttl=600)
    text = h.describe(1_000_100)
    assert text.startswith("deploy by a@ctl pid 11 since ") and "expires in 500s" in text
    assert lock.parse_holder("garbage") is None
