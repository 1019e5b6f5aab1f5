"""The pre-upgrade audit names the request fields the target vLLM stopped reading (vllm_facts
request_fields): vLLM answers HTTP 200 to a request that still sends `guided_json` and ignores
it, so a client's JSON schema is silently not applied. Every row of the table is checked."""

from __future__ import annotations

import pytest

from tests.unit.preflight_cases import V100, by_id, config, facts
from vfleet.config import vllm_facts
from vfleet.roles.preflight import upgrade_checks

ROWS = vllm_facts.data()["request_fields"]


def _before(version: str) -> str:
    """A release just before `version` (0.12.0 -> 0.11.2)."""
    major, minor, _ = vllm_facts.parse_version(version)
    return f"{major}.{minor - 1}.2"


def _audit(installed: str | None, target: str):
    cfg = config({**V100, "vllm_version": target})
    extra = {"vllm_installed": {"package": "vllm", "version": installed}} if installed else {}
    return by_id(upgrade_checks(cfg, facts(cfg, **extra)), "vllm.request_fields")


@pytest.mark.parametrize("row", ROWS, ids=[r["field"] for r in ROWS])
def test_an_upgrade_across_the_removal_names_the_field_and_its_replacement(row: dict) -> None:
    c = _audit(_before(row["removed"]), row["removed"])
    assert c.status == "warn" and "\n" not in c.message
    assert f"{row['field']} (removed in {row['removed']}; send {row['replaced_by']})" in c.message
    assert "HTTP 200" in c.message and c.fix
    assert row["source"].strip()


@pytest.mark.parametrize("row", ROWS, ids=[r["field"] for r in ROWS])
def test_both_sides_of_the_removal_are_quiet(row: dict) -> None:
    assert _audit(row["removed"], "0.32.0").status == "pass"
    assert _audit("0.5.4", _before(row["removed"])).status == "pass"


def test_guided_json_dropped_in_0_12_by_vllm_29326() -> None:
    row = next(r for r in ROWS if r["field"] == "guided_json")
    assert row["removed"] == "0.12.0" and "vllm#29326" in row["source"]
    # the seed box (0.5.4) moving to the H200's 0.20.0 loses all six guided_* fields
    assert {r["field"] for r in vllm_facts.dropped_request_fields("0.5.4", "0.20.0")} == {r["field"] for r in ROWS}


def test_a_fresh_host_is_told_without_a_warning() -> None:
    c = _audit(None, "0.20.0")
    assert c.status == "pass" and "guided_json" in c.message and "no vLLM installed yet" in c.message
