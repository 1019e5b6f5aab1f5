"""Run this checkout's `vfleet` command in a child process. Why PYTHONPATH: the shared venv
holds an editable install of another checkout, and a child that inherits no path would run
that one's CLI, not the code under test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def vfleet_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", "vfleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": path},
    )


def vfleet_in_process(*args: str) -> int:
    """Run the `vfleet` Program in this process (pytest's capsys sees its output, monkeypatched
    environment applies); its exit code."""
    from vfleet.cli.main import program

    try:
        program.run(["vfleet", *args])
    except SystemExit as e:
        return int(e.code or 0)
    return 0
