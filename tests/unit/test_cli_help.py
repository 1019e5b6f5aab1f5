"""`vfleet TASK --help` shows the task's help for every task, those with required arguments
too (vfleet/cli/main.py help_first): before, Invoke took `--help` as run's command, drain's host or
bench.compare's first file, and the task ran with it. The child runs this checkout (PYTHONPATH,
as tests/unit/cli_run.py explains), not whichever one the shared venv installed."""

import subprocess
import sys

import pytest

from tests.unit.cli_run import ROOT
from vfleet.cli.main import help_first


@pytest.mark.parametrize(
    "task",
    ["run", "drain", "undrain", "preflight.capture", "bench.compare", "deploy", "preflight", "eval", "eval.compare"],
)
def test_help_after_any_task_prints_its_help(task, tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "vfleet.cli", task, "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "VFLEET_INVENTORY": str(tmp_path / "none.yaml"), "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith(f"Usage: vfleet [--core-opts] {task} [--options]"), p.stdout[:300]


def test_only_a_bare_help_word_before_the_separator_counts():
    assert help_first(["vfleet", "drain", "-h"]) == ["vfleet", "--help", "drain"]
    assert help_first(["vfleet", "-e", "run", "--inventory", "i.yaml", "--help"]) == ["vfleet", "--help", "run"]
    for argv in (
        ["vfleet", "run", "--command", "grep --help /etc/x"],  # inside a value
        ["vfleet", "run", "--", "--help"],  # after the separator
        ["vfleet", "--help"],
        ["vfleet", "--help", "deploy"],  # Invoke's own
        ["vfleet", "deploy", "--inventory", "i.yaml"],
    ):
        assert help_first(argv) == argv
