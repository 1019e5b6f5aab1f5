"""What a command does before it connects: which modules it imports, and which schemas it checks.

Why: `vfleet run` is raced against pyinfra and Ansible (benchmarks/peer_race.py), and at 5 and
20 hosts the process start was most of the gap. The task menu used to import every task's
roles (httpx through the smoke role, jinja2 through the renderers, the audit) for every
command; these tests fail when a task module goes back to importing its roles at its top.
The import check runs the real CLI in a fresh interpreter: this test process has imported
everything already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from vfleet.cli import namespace
from vfleet.config.variables import VARIABLES

REPO = Path(__file__).resolve().parents[2]

# Not needed to run one command on hosts: the HTTP client, the template engine, the roles and
# the task steps of other commands.
NOT_FOR_RUN = (
    "httpx",
    "jinja2",
    "vfleet.clients.smoke",
    "vfleet.templates.environment",
    "vfleet.roles.gateway._render",
    "vfleet.roles.preflight._audit",
    "vfleet.roles.preflight",
    "vfleet.roles.preflight._capacity",
    "vfleet.roles.rollout._rolling",
    "vfleet.roles.rollout._batches",
    "vfleet.roles.weights._sync",
    "vfleet.roles.install._venv",
    "vfleet.roles.service._unit",
    "vfleet.roles.gateway._nginx",
    "vfleet.roles.monitoring._deploy",
    "vfleet.cli.deploy_steps",
    "vfleet.cli.preflight_steps",
)

# After the CLI ran: which of NOT_FOR_RUN are loaded, and what the report says.
PROBE = """
import json, sys
from vfleet.cli.main import program
program.run(["vfleet", *sys.argv[1:]], exit=False)
print(json.dumps(sorted(m for m in sys.modules if m in {names!r})))
"""


def _cli_then_modules(*argv: str) -> list[str]:
    code = PROBE.format(names=set(NOT_FOR_RUN))
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture
def local_inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "local.yaml"
    inv.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    return inv


def test_run_imports_no_other_commands_roles(tmp_path, local_inventory):
    report = tmp_path / "report.json"
    loaded = _cli_then_modules(
        "run", "--inventory", str(local_inventory), "--quiet", "--report", str(report), "--command", "true"
    )
    assert json.loads(report.read_text())["hosts"]["localhost"]["status"] == "changed"  # it did run
    assert loaded == []


def test_run_prints_host_output_as_written(local_inventory):
    """No emoji codes: a host's ':ok:' is printed as ':ok:' (and rich's emoji table, 13 ms of a
    run, is never loaded)."""
    code = PROBE.replace("{names!r}", "{'rich._emoji_codes'}")
    p = subprocess.run(
        [sys.executable, "-c", code, "run", "--inventory", str(local_inventory), "--command", "echo status :ok: :x:"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert "[localhost] status :ok: :x:" in p.stdout
    assert p.stdout.strip().splitlines()[-1] == "[]"


def test_menu_alone_imports_no_task_roles():
    assert _cli_then_modules("--list") == []


def test_deploy_still_gets_its_steps(local_inventory):
    """The other side: a task's roles do load when it runs (deploy --check over a host of no
    vllm or gateways group: every step runs, on no host)."""
    loaded = _cli_then_modules("deploy", "--inventory", str(local_inventory), "--check")
    assert "vfleet.cli.deploy_steps" in loaded and "vfleet.roles.preflight._audit" in loaded


def test_menu_lists_every_task():
    names = set(namespace.task_names)
    assert names >= {
        "deploy",
        "weights",
        "install",
        "service",
        "gateway",
        "smoke",
        "verify",
        "run",
        "inventory",
        "plan",
        "render",
        "restart",
        "upgrade",
        "drain",
        "undrain",
        "monitor",
        "preflight.preflight",
        "preflight.capture",
        "lab.up",
        "lab.down",
        "lab.status",
        "bench.bench",
        "bench.compare",
        "eval.variants",
    }


@pytest.mark.parametrize("spec", VARIABLES, ids=lambda s: s.name)
def test_every_variable_schema_is_valid(spec):
    """VarSchema checks a variable's schema when a value of it is first checked, not at each
    start; this checks every row of the table."""
    Draft202012Validator.check_schema(spec.json_schema)
