"""A host that runs with vLLM's protection widened on purpose (vllm_allow_unsafe, or
trust_remote_code) says so in preflight (a `vllm.unsafe` warning per host) and in smoke (a
printed warning line, kept in the report)."""

from __future__ import annotations

import io

from rich.console import Console

from tests.unit.configs import host_config
from tests.unit.service_cases import LAB
from vfleet.clients import smoke
from vfleet.config.variables import SCHEMA
from vfleet.engine.inventory import load_inventory
from vfleet.engine.report import report_dict
from vfleet.engine.runner import Play, RunOptions
from vfleet.roles.preflight._checks import host_checks
from vfleet.roles.preflight._unsafe_checks import check_unsafe

DEV = {
    **LAB,
    "vllm_env": {"VLLM_SERVER_DEV_MODE": "1"},
    "vllm_allow_unsafe": ["dev_mode", "local_media"],
    "vllm_extra_args": ["--allowed-local-media-path", "/srv/media"],
    "trust_remote_code": True,
}


def test_preflight_warns_per_host_for_each_widened_protection():
    check = check_unsafe(host_config(DEV))
    assert check.id == "vllm.unsafe" and check.status == "warn"
    for part in ("dev_mode (VLLM_SERVER_DEV_MODE)", "local_media (--allowed-local-media-path)", "trust_remote_code"):
        assert part in check.message
    assert "docs/security.md" in check.fix
    assert check_unsafe(host_config(LAB)) is None
    assert "vllm.unsafe" in [c.id for c in host_checks(host_config(DEV), {})]
    assert "vllm.unsafe" not in [c.id for c in host_checks(host_config(LAB), {})]


def _play(tmp_path, cfg) -> tuple[Play, io.StringIO]:
    inv = tmp_path / "inv.yaml"
    inv.write_text("all:\n  hosts:\n    gpu01:\n      ansible_connection: local\n")
    hosts = list(load_inventory(inv, schema=SCHEMA).hosts.values())
    out = io.StringIO()
    return Play("smoke", hosts, RunOptions(), console=Console(file=out, width=300), configure=lambda h: cfg), out


def test_smoke_prints_the_warning_for_the_host_and_keeps_it_in_the_report(tmp_path, monkeypatch):
    monkeypatch.setattr(smoke, "checks_for", lambda t: [("/health", lambda c, t: (True, "HTTP 200", {}))])
    cfg = host_config(DEV)
    play, out = _play(tmp_path, cfg)
    ctx = play.contexts["gpu01"]
    smoke.run_smoke(ctx, smoke.host_target(cfg))
    printed = out.getvalue()
    assert "warning: [gpu01] smoke: vllm_allow_unsafe: dev_mode (VLLM_SERVER_DEV_MODE)" in printed
    assert "warning: [gpu01] smoke: trust_remote_code" in printed
    steps = report_dict(play)["hosts"]["gpu01"]["steps"]
    assert [s for s in steps if s["target"] == "widened protection" and len(s["data"]["warnings"]) == 3]
    # through a gateway the same host is not warned about again
    smoke.run_smoke(ctx, smoke.gateway_target(cfg))
    assert out.getvalue().count("smoke: trust_remote_code") == 1


def test_smoke_is_quiet_for_a_host_with_nothing_widened(tmp_path, monkeypatch):
    monkeypatch.setattr(smoke, "checks_for", lambda t: [("/health", lambda c, t: (True, "HTTP 200", {}))])
    cfg = host_config(LAB)
    play, out = _play(tmp_path, cfg)
    smoke.run_smoke(play.contexts["gpu01"], smoke.host_target(cfg))
    assert "warning" not in out.getvalue()
