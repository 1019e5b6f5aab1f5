"""The GPU readings on a vLLM host (vfleet/roles/monitoring/_gpu_exporter.py): the plan from fake
facts (pyinfra's way: a bare host, a converged one, a new expected count, a masked unit), the
expected GPU count from the inventory, and the producer's units checked by the real
`systemd-analyze verify`."""

from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from tests.unit.configs import host_config
from vfleet.engine.facts import FileState, UnitState
from vfleet.engine.runner import HostFailed
from vfleet.roles.monitoring import _gpu_exporter as ge
from vfleet.roles.monitoring._gpu_textfile import TEXTFILE_DIR

HOST = host_config()
SERVICE_FILE = f"/etc/systemd/system/{ge.SERVICE}"
TIMER_FILE = f"/etc/systemd/system/{ge.TIMER}"


def have(text: str) -> FileState:
    return FileState("file", hashlib.sha256(text.encode()).hexdigest(), "644", "root", "root")


def converged(cfg=HOST) -> dict:
    running = UnitState("enabled", "active")
    script = ge._PRODUCER.read_text()
    return {
        "exporter": True,
        "unit": running,
        "timer": running,
        "defaults": have(ge.defaults_text()),
        "script": FileState("file", hashlib.sha256(script.encode()).hexdigest(), "755", "root", "root"),
        "service_file": have(ge.service_text(cfg)),
        "timer_file": have(ge.timer_text()),
    }


def steps(changes) -> list[tuple[str, str, str]]:
    return [(c.action, c.target, c.reason) for c in changes]


@pytest.mark.parametrize(
    "vars,want",
    [
        ({}, 1),
        ({"tensor_parallel_size": 4}, 4),
        ({"tensor_parallel_size": 2, "pipeline_parallel_size": 2}, 4),
        ({"tensor_parallel_size": 2, "cuda_visible_devices": "4,5"}, 6),  # GPUs 4 and 5: at least 6
        ({"tensor_parallel_size": 2, "cuda_visible_devices": [0, 1]}, 2),
        ({"replica": "r1", "tensor_parallel_size": 8, "replica_gpus_per_host": 4}, 4),
        ({"replica": "r1", "tensor_parallel_size": 8}, 1),  # share unknown on its own
    ],
)
def test_expected_gpus_from_the_inventory(vars, want):
    assert ge.expected_gpus(host_config(vars)) == want


def test_bare_host_installs_writes_enables_and_starts_the_timer():
    bare = {
        "exporter": False,
        "unit": UnitState("not-found", "unknown"),
        "timer": UnitState("not-found", "unknown"),
        **{k: FileState("missing") for k in ("defaults", "script", "service_file", "timer_file")},
    }
    changes = ge.plan(HOST, bare)
    assert [(a, t) for a, t, _ in steps(changes)] == [
        ("package", ge.PACKAGE),
        ("node exporter args", ge.DEFAULTS_FILE),
        ("service", ge.UNIT),
        ("service", ge.UNIT),
        ("gpu producer", ge.SCRIPT),
        ("gpu producer unit", SERVICE_FILE),
        ("gpu producer unit", TIMER_FILE),
        ("systemd", "daemon-reload"),
        ("service", ge.TIMER),
        ("service", ge.TIMER),
    ]
    assert "apt-get install" in changes[0].command and "--no-install-recommends" in changes[0].command
    assert changes[3].command == f"systemctl restart {ge.UNIT}"
    assert "enable" in changes[-2].command and "start" in changes[-1].command


def test_converged_host_changes_nothing():
    assert ge.plan(HOST, converged()) == []


def test_a_new_expected_count_rewrites_the_unit_and_runs_it_once():
    bigger = host_config({"tensor_parallel_size": 8})
    changes = ge.plan(bigger, converged())
    assert steps(changes) == [
        ("gpu producer unit", SERVICE_FILE, "content"),
        ("systemd", "daemon-reload", "unit files changed"),
        ("service", ge.SERVICE, "run once (producer changed)"),
    ]
    assert "--expected 8 " in ge.service_text(bigger)


def test_changed_args_restart_the_exporter_only():
    facts = {**converged(), "defaults": have('ARGS=""\n')}  # Debian's own file
    assert [(a, t) for a, t, _ in steps(ge.plan(HOST, facts))] == [
        ("node exporter args", ge.DEFAULTS_FILE),
        ("service", ge.UNIT),
    ]


@pytest.mark.parametrize("key,unit", [("unit", ge.UNIT), ("timer", ge.TIMER)])
def test_a_masked_unit_is_refused_not_unmasked(key, unit):
    with pytest.raises(HostFailed, match=f"{unit} is masked"):
        ge.plan(HOST, {**converged(), key: UnitState("masked", "inactive")})


def test_args_name_the_scraped_port_and_the_textfile_folder():
    assert ge.defaults_text().endswith(
        f"ARGS='--web.listen-address=:9100 --collector.textfile.directory={TEXTFILE_DIR}'\n"
    )


def test_units_pass_systemd_analyze_verify(tmp_path):
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.fail("systemd-analyze not found: `apt-get install -y systemd`")
    (tmp_path / ge.SERVICE).write_text(ge.service_text(HOST))
    (tmp_path / ge.TIMER).write_text(ge.timer_text())
    p = subprocess.run(
        [exe, "verify", "--man=no", str(tmp_path / ge.TIMER), str(tmp_path / ge.SERVICE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    problems = [ln for ln in (p.stdout + p.stderr).splitlines() if ge.SERVICE in ln or ge.TIMER in ln]
    assert p.returncode == 0 and problems == [], p.stdout + p.stderr
