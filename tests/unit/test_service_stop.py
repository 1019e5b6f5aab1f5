"""The stop check's shell, run here with a stand-in `systemctl` on PATH (no host, no
systemd): the processes the unit had before the stop, still alive after it, are printed."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from tests.unit.configs import host_config
from vfleet.roles.service._unit import stop_command


def fake_systemctl(bindir, main_pid: int, kill: str) -> None:
    script = bindir / "systemctl"
    script.write_text(f"""#!/bin/bash
case "$1" in
  show) echo {main_pid} ;;
  stop) {kill} ;;
esac
""")
    script.chmod(0o755)


def service_tree():
    """A main process with a child that ignores SIGTERM (an engine core that hangs on)."""
    proc = subprocess.Popen(["bash", "-c", "bash -c 'trap \"\" TERM; sleep 30' & wait"], start_new_session=True)
    time.sleep(0.3)
    return proc


def run(cmd: str, bindir) -> str:
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=20).stdout


def test_a_child_that_outlives_the_stop_is_named(tmp_path):
    proc = service_tree()
    try:
        fake_systemctl(tmp_path, proc.pid, f"kill -KILL {proc.pid}")  # main only: the child survives
        out = run(stop_command(host_config()), tmp_path)
        assert "sleep 30" in out, out
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_nothing_printed_when_the_whole_tree_is_gone(tmp_path):
    proc = service_tree()
    fake_systemctl(tmp_path, proc.pid, f"kill -KILL -- -{proc.pid}; sleep 0.3")  # the whole group, as systemd does
    out = run(stop_command(host_config()), tmp_path)
    proc.wait()
    assert out.strip() == "", out
