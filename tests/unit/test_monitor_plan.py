"""The monitoring deploy plan from fake facts (pyinfra's way): a bare host, a converged one
(nothing to do), a fleet change (targets only, then a reload), a new listen port (restart),
a stopped Prometheus, and a masked unit (refused, never unmasked behind the operator's back)."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess

import pytest

from tests.unit.configs import host_config
from vfleet.config.monitoring import MonitoringSettings
from vfleet.engine.facts import FileState, UnitState
from vfleet.engine.runner import HostFailed
from vfleet.roles.monitoring._deploy import DEFAULTS_FILE, defaults_text, facts_for, plan
from vfleet.roles.monitoring._files import monitoring_files

SETTINGS = MonitoringSettings.defaults()
HOSTS = [host_config(name="gpu01", address="10.0.0.1"), host_config(name="gpu02", address="10.0.0.2")]
FILES = monitoring_files(HOSTS, SETTINGS)
ETC = "/etc/prometheus/"


def have(text: str) -> FileState:
    return FileState("file", hashlib.sha256(text.encode()).hexdigest(), "644", "root", "root")


def facts(*, installed=True, enabled="enabled", active="active", stale=(), files=FILES, settings=SETTINGS) -> dict:
    """A host that runs exactly `files`, except the paths in `stale` (old content)."""
    out = {
        "prometheus": installed,
        "promtool": installed,
        "unit": UnitState(enabled, active),
        "defaults": have(defaults_text(settings)),
    }
    for f in files:
        out[f.path] = have("old\n") if f.path in stale else have(f.text)
    return out


def steps(changes) -> list[tuple[str, str]]:
    return [(c.action, c.target) for c in changes]


def test_bare_host_installs_writes_checked_files_and_restarts():
    bare = {
        "prometheus": False,
        "promtool": False,
        "unit": UnitState("not-found", "unknown"),
        "defaults": FileState("missing"),
        **{f.path: FileState("missing") for f in FILES},
    }
    changes = plan(SETTINGS, FILES, bare)
    assert steps(changes) == [
        ("package", "prometheus"),
        ("prometheus args", DEFAULTS_FILE),
        ("prometheus config", ETC + "targets/vllm.json"),
        ("prometheus config", ETC + "targets/gateway.json"),
        ("prometheus config", ETC + "targets/gateway-usage.json"),
        ("prometheus config", ETC + "targets/gpu.json"),
        ("prometheus config", ETC + "rules/vllm-alerts.yml"),
        ("prometheus config", ETC + "prometheus.yml"),
        ("service", "prometheus.service"),  # enable
        ("service", "prometheus.service"),  # restart: the package started it with its own config
    ]
    assert "apt-get install" in changes[0].command and "prometheus" in changes[0].command
    by_target = {c.target: c for c in changes}
    assert (
        "promtool check rules /etc/prometheus/rules/vllm-alerts.yml" in by_target[ETC + "rules/vllm-alerts.yml"].command
    )
    for path in (
        "targets/vllm.json",
        "targets/gateway.json",
        "targets/gateway-usage.json",
        "targets/gpu.json",
        "prometheus.yml",
    ):
        assert "promtool check config /etc/prometheus/prometheus.yml" in by_target[ETC + path].command
    assert "enable" in changes[-2].command and "restart" in changes[-1].command
    assert "grafana" not in " ".join(c.target for c in changes)  # the dashboard stays on the controller


def test_converged_host_changes_nothing():
    assert plan(SETTINGS, FILES, facts()) == []


def test_a_fleet_change_rewrites_only_the_targets_and_reloads():
    changes = plan(SETTINGS, FILES, facts(stale=("targets/vllm.json",)))
    assert steps(changes) == [("prometheus config", ETC + "targets/vllm.json"), ("service", "prometheus.service")]
    assert changes[1].command == "systemctl reload prometheus.service"


def test_a_new_listen_port_restarts_instead_of_reloading():
    other = dataclasses.replace(SETTINGS, port=9191)
    files = monitoring_files(HOSTS, other)
    changes = plan(other, files, facts(stale=("prometheus.yml",), files=files))
    assert steps(changes) == [
        ("prometheus args", DEFAULTS_FILE),
        ("prometheus config", ETC + "prometheus.yml"),
        ("service", "prometheus.service"),
    ]
    assert "--web.listen-address=:9191" in defaults_text(other)
    assert changes[-1].command == "systemctl restart prometheus.service"


def test_a_stopped_prometheus_is_started_not_reloaded():
    changes = plan(SETTINGS, FILES, facts(active="inactive", stale=("rules/vllm-alerts.yml",)))
    assert steps(changes) == [("prometheus config", ETC + "rules/vllm-alerts.yml"), ("service", "prometheus.service")]
    assert "systemctl start" in changes[1].command


def test_a_masked_unit_is_refused():
    with pytest.raises(HostFailed, match="masked"):
        plan(SETTINGS, FILES, facts(enabled="masked", active="inactive"))


def test_facts_read_this_machine_as_installed():
    """The fact commands run for real (this machine has Debian's prometheus, as the tests
    require): an installed Prometheus reads as installed, so a second run installs nothing."""
    got = {}
    for name, fact in facts_for(FILES).items():
        out = subprocess.run(["sh", "-c", fact.command()], capture_output=True, text=True, timeout=30).stdout
        got[name] = fact.process(out.splitlines())
    assert got["prometheus"] is True and got["promtool"] is True
    assert "package" not in [c.action for c in plan(SETTINGS, FILES, {**got, "unit": UnitState("enabled", "active")})]


def run_locally(changes) -> list[subprocess.CompletedProcess]:
    return [
        subprocess.run(["bash", "-c", c.command], input=c.stdin, capture_output=True, text=True, timeout=60)
        for c in changes
        if c.action == "prometheus config"
    ]


def test_files_are_kept_only_when_promtool_accepts_them(tmp_path, monkeypatch):
    """The planned writes run for real in a scratch folder: all of them land and pass promtool;
    then a rules file promtool rejects is not kept and the previous one is put back."""
    from vfleet.roles.monitoring import _deploy as deploy

    monkeypatch.setattr(deploy, "PROMETHEUS_DIR", str(tmp_path))
    monkeypatch.setattr(deploy, "CONFIG_PATH", str(tmp_path / "prometheus.yml"))
    missing = {**facts(), **{f.path: FileState("missing") for f in FILES}}
    results = run_locally(plan(SETTINGS, FILES, missing))
    assert [r.returncode for r in results] == [0] * 6, [r.stderr for r in results]
    for f in FILES:
        if f.deployed:
            assert (tmp_path / f.path).read_text() == f.text
    broken = [
        f if f.path != "rules/vllm-alerts.yml" else type(f)(f.path, f.text.replace("up{job=", "up{job=="), True)
        for f in FILES
    ]
    results = run_locally(plan(SETTINGS, broken, facts()))
    assert len(results) == 1 and results[0].returncode == 3, results
    assert "rejected by promtool check rules" in results[0].stderr
    previous = next(f.text for f in FILES if f.path == "rules/vllm-alerts.yml")
    assert (tmp_path / "rules/vllm-alerts.yml").read_text() == previous  # the previous file, back
    assert sorted(p.name for p in (tmp_path / "rules").iterdir()) == ["vllm-alerts.yml"]
