"""A service_name that would shadow a unit of the host's own: the unit_files fact's parser and
decision from data (tests/unit/data/paths/unit_files.yaml), the preflight check, the service
step's refusal before it writes, deploy's order (the guard before the first change), and the
header vfleet's units carry."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.configs import host_config
from vfleet.config.hostconfig import HostConfig
from vfleet.config.vllm_facts import flag_available
from vfleet.engine.errors import VfleetError
from vfleet.engine.fact_protocol import Output
from vfleet.engine.facts import FileState, UnitState
from vfleet.engine.runner import HostFailed
from vfleet.roles.preflight import _facts as preflight_facts
from vfleet.roles.preflight._unit_checks import check_unit_files
from vfleet.roles.service import _unit as service
from vfleet.roles.service._render import render_service
from vfleet.roles.service._unit_files import UNIT_MARKER, UNIT_SEARCH_PATH, UnitFiles, owned_units, refusal

CASES = yaml.safe_load((Path(__file__).parent / "data" / "paths" / "unit_files.yaml").read_text())
REPO = Path(__file__).resolve().parents[2]


def named(service_name: str, *, past_schema: bool = False) -> HostConfig:
    """A host's config with this service_name. past_schema: the schema refuses the name at
    load (a distribution's own), which is asserted; the config is then built past it, as a
    config made in code would be, to reach the host-side guard (the second wall)."""
    if not past_schema:
        return host_config({"service_name": service_name})
    with pytest.raises(
        VfleetError,
        match=f"vars.service_name: .*got '{service_name}', which is the name "
        "of a unit or state folder the distribution owns",
    ):
        host_config({"service_name": service_name})
    cfg = host_config({"service_name": "placeholder"})
    return dataclasses.replace(cfg, service_name=service_name, env_file=f"/etc/vllm/{service_name}.env")


def cfg_of(case: dict):
    cfg = named(case["service_name"], past_schema=case.get("past_schema", False))
    if case.get("ray"):
        cfg = dataclasses.replace(cfg, replica=dataclasses.replace(cfg.replica, name="r1", backend="ray"))
    return cfg


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_unit_files_case(case):
    assert case["source"]
    cfg = cfg_of(case)
    found = UnitFiles(owned_units(cfg)).process_output(Output(case["output"]))
    if "found" in case:
        assert found == case["found"]
    why = refusal(cfg, found)
    if case["refused"] is None:
        assert why is None
    else:
        assert why and case["refused"] in why and "\n" not in why and "choose another service_name" in why


def test_a_failed_listing_is_unknown_not_empty():
    assert UnitFiles(("vllm.service",)).process_output(Output("", "sh: error", 2)) is None
    assert UnitFiles(("vllm.service",)).process_output(None) is None


def test_the_command_runs_under_sh_and_looks_in_every_unit_folder():
    fact = UnitFiles(("vfleet-surely-absent-unit.service",))
    r = subprocess.run(["sh", "-c", fact.command()], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and fact.process_output(Output(r.stdout)) == {"vfleet-surely-absent-unit.service": []}
    for folder in (
        "/etc/systemd/system",
        "/lib/systemd/system",
        "/usr/lib/systemd/system",
        "/run/systemd/generator.late",
    ):
        assert folder in UNIT_SEARCH_PATH and f"{folder}/vfleet-surely-absent-unit.service" in fact.command()


@pytest.mark.parametrize("template", ["vllm.service.j2", "ray-node.service.j2"])
def test_vfleet_units_start_with_the_marker_the_fact_looks_for(template):
    first = [ln for ln in (REPO / "vfleet" / "templates" / template).read_text().splitlines() if ln.startswith("#")][0]
    assert first.startswith(UNIT_MARKER)


def test_the_rendered_unit_starts_with_the_marker():
    assert render_service(host_config(), flag_available).unit_text.startswith(UNIT_MARKER)


def test_preflight_gathers_the_fact_and_checks_it():
    cfg = host_config({"service_name": "mysvc"})  # the schema allows it; the host has its own
    fact = preflight_facts.facts_for(cfg)["unit_files"]
    assert fact.units == ("mysvc.service",)
    found = fact.process_output(Output("file no /lib/systemd/system/mysvc.service\n"))
    check = check_unit_files(cfg, {"unit_files": found})
    assert check.id == "service.unit" and check.status == "fail" and "mysvc.service" in check.message
    assert check_unit_files(cfg, {"unit_files": {"mysvc.service": []}}).status == "pass"
    assert check_unit_files(cfg, {}) is None  # a snapshot captured before the fact existed


def test_the_service_step_refuses_before_writing_anything():
    cfg = host_config({"service_name": "mysvc"})  # the schema allows it; the host has its own
    rendered = render_service(cfg, flag_available)
    facts = {
        "user": True,
        "unit_file": FileState("missing"),
        "env_file": FileState("missing"),
        "unit": UnitState("enabled", "active"),
        "systemd": 252,
        "unit_files": {
            "mysvc.service": [{"path": "/lib/systemd/system/mysvc.service", "kind": "file", "vfleet": False}]
        },
    }
    with pytest.raises(HostFailed, match="would shadow it"):
        service.plan(cfg, rendered, facts)
    assert "unit_files" in service.facts_for(cfg)


def test_deploy_and_service_guard_unit_names_before_the_first_change():
    """Read from the task source: the guard is the first step under the lock, ahead of
    preflight (which --skip-preflight skips) and of the rollback point and weights."""
    text = (REPO / "vfleet" / "cli" / "deploy.py").read_text()
    for task in ("def deploy(", "def service_task("):
        body = text[text.index(task) :]
        body = body[body.index("with locked(play):") :]
        first_step = body.splitlines()[1].strip()
        assert first_step == "steps.step_unit_names(play)", (task, first_step)
