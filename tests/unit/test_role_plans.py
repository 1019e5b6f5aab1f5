"""Role plans from data, without a host (pyinfra's way): each case in tests/unit/data/plans/
gives a HostConfig (a few variables), the facts a host would report, and the changes the
role must plan, in order, or none. The commands themselves are checked by fragments."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.configs import host_config
from vfleet.config.gateway_access import GatewayTls
from vfleet.config.vllm_facts import flag_available
from vfleet.engine.changes import Change
from vfleet.engine.facts import FileState, UnitState
from vfleet.roles.gateway import _nginx as gateway
from vfleet.roles.gateway._caps import GatewayCaps
from vfleet.roles.gateway._files import render_files
from vfleet.roles.gateway._render import Backend
from vfleet.roles.install import _venv as vllm_install
from vfleet.roles.rollout._batches import plan_batches
from vfleet.roles.service import _unit as service
from vfleet.roles.service._render import render_service
from vfleet.roles.weights import _sync as weights

DATA = Path(__file__).resolve().parent / "data" / "plans"


def cases(name: str) -> list[dict[str, Any]]:
    return yaml.safe_load((DATA / name).read_text())


def file_state(spec: Any, wanted: str, mode: str | None = None) -> FileState:
    """'missing' | 'present' | 'dir' | 'wanted' | 'stale' | {wanted: true, mode: ...}. `mode`:
    the wanted file's (default: 0600 for an env file, else 0644)."""
    if isinstance(spec, dict):
        return FileState("file", hashlib.sha256(wanted.encode()).hexdigest(), spec.get("mode", "644"), "root", "root")
    if spec == "missing":
        return FileState("missing")
    if spec == "dir":
        return FileState("dir", mode="755")
    digest = hashlib.sha256((wanted if spec == "wanted" else "old\n").encode()).hexdigest()
    mode = mode or ("600" if wanted.startswith("# Managed by vfleet (templates/vllm.env.j2)") else "644")
    return FileState("file", digest, mode, "root", "root", content="old\n")


def assert_plan(changes: list[Change], expect: list[dict[str, Any]]) -> None:
    got = [(c.action, c.target) for c in changes]
    assert got == [(e["action"], e["target"]) for e in expect], got
    for c, e in zip(changes, expect):
        if "reason" in e:
            assert e["reason"] in c.reason, (c.reason, e)
        if "notify" in e:
            assert c.notify == e["notify"], (c, e)
        if "command" in e:
            assert e["command"] in c.command, (c.command, e)


@pytest.mark.parametrize("case", cases("service.yaml"), ids=lambda c: c["name"])
def test_service_plan(case: dict[str, Any]) -> None:
    cfg = host_config(case["vars"])
    f = case["facts"]
    rendered = render_service(cfg, flag_available, systemd_version=f["systemd"])
    facts = {
        "user": f["user"],
        "unit_file": file_state(f["unit_file"], rendered.unit_text),
        "env_file": file_state(f["env_file"], rendered.env_text),
        "unit": UnitState(*f["unit"]),
        "systemd": f["systemd"],
    }
    changes = service.plan(cfg, rendered, facts)
    assert_plan(changes, case["expect"])
    for c in changes:  # the key travels on stdin into the 0600 file, never in a command
        assert not cfg.api_key or cfg.api_key not in c.command + c.diff + c.reason


TLS_KEY_PEM = "-----BEGIN PRIVATE KEY-----\nnot-a-real-key-but-a-secret\n-----END PRIVATE KEY-----\n"


def _tls(folder: Path) -> GatewayTls:
    (folder / "gw.crt").write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    (folder / "gw.key").write_text(TLS_KEY_PEM)
    return GatewayTls(str(folder / "gw.crt"), str(folder / "gw.key"))


@pytest.mark.parametrize("case", cases("gateway.yaml"), ids=lambda c: c["name"])
def test_gateway_plan(case: dict[str, Any], tmp_path: Path) -> None:
    cfg = host_config(case["vars"], name="gw01", group="gateways")
    if case.get("tls"):
        cfg = dataclasses.replace(cfg, gateway_tls=_tls(tmp_path))
    backends = [Backend("gpu01", "10.0.0.1", 8000, "tiny"), Backend("gpu02", "10.0.0.2", 8000, "tiny")]
    f = case["facts"]
    drained = set(case.get("drain", []))
    caps = GatewayCaps(case["caps"]) if "caps" in case else None
    current = render_files(backends, cfg)
    on_host = dict(zip(("js", "tls_cert", "tls_key"), current.supporting)) | {"conf": current.conf}
    facts = {
        name: file_state(
            f[name],
            on_host[name].content if name in on_host else "",
            on_host[name].mode.lstrip("0") if name in on_host else None,
        )
        for name in ("conf", "js", "tls_cert", "tls_key")
    }
    facts |= {
        "nginx": f["nginx"],
        "njs": f["njs"],
        "default_site": file_state(f["default_site"], ""),
        "drained": file_state(f["drained"], ""),
        "caps": file_state(f.get("caps", "missing"), caps.text() if caps else ""),
        "unit": UnitState(*f["unit"]),
    }
    files = render_files(backends, cfg, drained=drained)
    changes = gateway.plan(cfg, files, facts, drained=drained if "drain" in case else None, caps=caps)
    assert_plan(changes, case["expect"])
    for c in changes:  # the module (backend key, key hashes) and the TLS key: on stdin, never in a diff
        secret = [f.content for f in files.all if f.secret]
        assert not any(text in c.command + c.diff + c.reason for text in secret + [TLS_KEY_PEM]), c


def test_a_drained_backend_is_marked_down_in_the_planned_config() -> None:
    cfg = host_config(name="gw01", group="gateways")
    text = render_files(
        [Backend("gpu01", "10.0.0.1", 8000, "tiny"), Backend("gpu02", "10.0.0.2", 8000, "tiny")], cfg, drained={"gpu02"}
    ).conf.content
    assert "server 10.0.0.2:8000 max_fails=3 fail_timeout=10s down;" in text
    assert "server 10.0.0.1:8000 max_fails=3 fail_timeout=10s;" in text


@pytest.mark.parametrize("case", cases("install.yaml"), ids=lambda c: c["name"])
def test_install_plan(case: dict[str, Any]) -> None:
    cfg = host_config(case["vars"])
    f = case["facts"]
    marker = FileState("missing")
    if str(f["marker"]).startswith("matching"):
        spec_cfg = host_config() if f["marker"] == "matching-default" else cfg
        marker = FileState("file", content=json.dumps({"spec_id": vllm_install.spec_id(spec_cfg.install_spec)}))
    facts = {"root": file_state(f["root"], ""), "marker": marker, "current": f["current"]}
    assert_plan(vllm_install.plan(cfg, facts), case["expect"])


def test_install_verifies_on_the_host_before_trusting_the_venv() -> None:
    cfg = host_config()
    change = next(
        c
        for c in vllm_install.plan(
            cfg, {"root": FileState("dir", mode="755"), "marker": FileState("missing"), "current": None}
        )
        if c.action == "venv"
    )
    assert change.command.endswith("/opt/vllm/vllm-0.32.0/bin/python -")
    assert change.timeout == cfg.install_timeout


@pytest.mark.parametrize("installed, ok", [("0.32.0", True), ("0.31.1", False)])
def test_install_verify_script_writes_the_marker_only_for_the_pinned_version(tmp_path, installed, ok) -> None:
    """The script the install runs in the new venv, run here against stand-in packages."""
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text(f"__version__ = {installed!r}\n")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("__version__ = '2.9.0+cpu'\nclass version:\n    cuda = None\n")
    venv = tmp_path / "venv"
    venv.mkdir()
    cfg = host_config({"vllm_root": str(tmp_path), "vllm_venv_name": "venv"})
    stdin = vllm_install.install_change(cfg, str(venv)).stdin
    r = subprocess.run(
        [sys.executable, "-"],
        input=stdin,
        text=True,
        capture_output=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/nonexistent"},
    )
    marker = venv / vllm_install.MARKER
    assert (r.returncode == 0) is ok, r.stderr
    assert marker.exists() is ok
    if ok:
        assert json.loads(marker.read_text())["spec_id"] == vllm_install.spec_id(cfg.install_spec)
    else:
        assert "vllm reports version 0.31.1, pinned 0.32.0" in r.stderr


@pytest.mark.parametrize("case", cases("weights.yaml")["states"], ids=str)
def test_weights_copy_state(case: dict[str, Any]) -> None:
    version = "/srv/models/.versions/tiny-abc"
    link = version if case["link"] == "VERSION" else case["link"]
    assert weights.copy_state(version, FileState(case["marker"]), link) == case["expect"]


@pytest.mark.parametrize("case", cases("weights.yaml")["waves"], ids=lambda c: c["name"])
def test_weights_waves(case: dict[str, Any]) -> None:
    got = weights.assign_wave(
        case["missing"],
        case["have"],
        fanout=case["fanout"],
        controller=case["controller"],
        source_host=case.get("source_host"),
        raw_source=case.get("raw_source"),
    )
    assert got == case["expect"]


@pytest.mark.parametrize("case", cases("rollout.yaml"), ids=lambda c: c["spec"])
def test_rollout_batches(case: dict[str, Any]) -> None:
    assert plan_batches(case["spec"], case["hosts"], case.get("models"), case.get("serving")) == case["expect"]
