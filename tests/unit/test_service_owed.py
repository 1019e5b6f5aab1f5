"""The restart a killed run owed: files the running vLLM started from (unit, env file, venv and
model links) that changed after it started. The fact's parser from data, and its shell run
here with a stand-in `systemctl` on PATH against real files and links (no host, no systemd)."""

from __future__ import annotations

import os
import subprocess
import time

from tests.unit.configs import host_config
from vfleet.roles.service._unit import NewerThanProcess, facts_for

PATHS = ("/etc/systemd/system/vllm.service", "/etc/vllm/vllm.env", "/opt/vllm/current", "/srv/models/tiny")


def test_only_files_newer_than_the_process_start_are_named():
    fact = NewerThanProcess("vllm.service", PATHS)
    lines = [
        "started 1000",
        "900 /etc/systemd/system/vllm.service",
        "1000 /etc/vllm/vllm.env",
        "1001 /opt/vllm/current",
        "5000 /srv/models/tiny",
    ]
    assert fact.process(lines) == ["/opt/vllm/current", "/srv/models/tiny"]


def test_a_unit_that_does_not_run_owes_nothing():
    fact = NewerThanProcess("vllm.service", PATHS)
    assert fact.process([]) == []
    assert fact.process(["5000 /opt/vllm/current"]) == []  # no start time: not running
    assert fact.process(["started n/a", "5000 /opt/vllm/current"]) == []


def test_the_service_step_reads_the_files_of_its_own_config():
    cfg = host_config()
    fact = facts_for(cfg)["newer"]
    assert fact.unit == cfg.unit
    assert fact.paths[:3] == (cfg.unit_path, cfg.env_file, cfg.current_link)


def _systemctl(bindir, started: str, active: bool) -> None:
    script = bindir / "systemctl"
    script.write_text(f"""#!/bin/bash
case "$1" in
  show) echo '{started}' ;;
  is-active) exit {0 if active else 3} ;;
esac
""")
    script.chmod(0o755)


def _run(fact: NewerThanProcess, bindir) -> list[str]:
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    out = subprocess.run(["bash", "-c", fact.command()], capture_output=True, text=True, env=env, timeout=20).stdout
    return fact.process(out.splitlines())


def test_the_shell_compares_systemd_start_time_with_each_files_own_mtime(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    unit, venv, link = tmp_path / "vllm.service", tmp_path / "venv-b", tmp_path / "current"
    unit.write_text("[Service]\n")
    venv.mkdir()
    link.symlink_to(venv)
    old = time.time() - 3600
    os.utime(unit, (old, old))
    os.utime(link, (old, old), follow_symlinks=False)
    os.utime(venv, (time.time() + 60,) * 2)  # the link's target is newer: only the link itself counts
    started = time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() - 600))
    fact = NewerThanProcess("vllm.service", (str(unit), str(link), str(tmp_path / "missing.env")))
    _systemctl(bindir, started, active=True)
    assert _run(fact, bindir) == []
    link.unlink()
    link.symlink_to(venv)  # switched after the process started (a killed install's link)
    assert _run(fact, bindir) == [str(link)]
    _systemctl(bindir, started, active=False)
    assert _run(fact, bindir) == []
