"""Triage on hosts: the two facts (unit state, journal) from data files, the real fact script
and `vfleet triage --inventory` run end to end on a local connection whose systemctl and
journalctl are small scripts answering from data (no systemd needed), and the readiness
failure that appends the class to its one-line message without another round trip."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.cli_run import vfleet_in_process as run_cli
from vfleet.roles.triage._host import JournalFact, UnitHealthFact

DATA = Path(__file__).parent / "data" / "triage"
FACTS = {"health": UnitHealthFact, "journal": JournalFact}


def fact_cases() -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) | {"id": p.stem} for p in sorted((DATA / "host").glob("*.yaml"))]


@pytest.mark.parametrize("case", fact_cases(), ids=lambda c: c["id"])
def test_fact_command_and_parser(case: dict[str, Any]) -> None:
    fact = FACTS[case["fact"]](case["unit"])
    assert fact.command() == case["command"]
    got = fact.process(case["output"].splitlines())
    if dataclasses.is_dataclass(got):
        got = {**dataclasses.asdict(got), "down": got.down, "read": got.read}
    assert got == case["expected"]


def test_a_unit_name_that_reads_as_an_option_is_refused() -> None:
    from vfleet.engine.runner import HostFailed

    with pytest.raises(HostFailed, match="starts with '-'"):
        JournalFact("--since=yesterday").command()
    assert UnitHealthFact("a b;rm -rf /.service").command().endswith("-- 'a b;rm -rf /.service'")


@pytest.fixture
def fake_systemd(tmp_path: Path, monkeypatch) -> Path:
    """systemctl and journalctl first on PATH: vllm-a is failed with an OOM after loading in its
    journal, vllm-b serves."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "a.show").write_text("ActiveState=failed\nSubState=failed\nNRestarts=3\nResult=exit-code\n")
    (tmp_path / "b.show").write_text("ActiveState=active\nSubState=running\nNRestarts=0\nResult=success\n")
    (tmp_path / "a.log").write_text((DATA / "oom-after-loading-1.log").read_text())
    for name, body in {
        "systemctl": f'case "$*" in *vllm-a.service*) cat {tmp_path}/a.show;; *) cat {tmp_path}/b.show;; esac',
        "journalctl": f'case "$*" in *vllm-a.service*) cat {tmp_path}/a.log;; esac',
    }.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    inv = tmp_path / "inv.yaml"
    host = {
        "ansible_connection": "local",
        "vllm_version": "0.32.0",
        "model_name": "tiny",
        "model_source": "/srv/src/tiny",
    }
    inv.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "vllm": {
                            "hosts": {
                                "gpu01": {**host, "service_name": "vllm-a"},
                                "gpu02": {**host, "service_name": "vllm-b"},
                            }
                        }
                    }
                }
            }
        )
    )
    return inv


def test_triage_inventory_classifies_the_failed_host_only(fake_systemd: Path, tmp_path: Path, capsys) -> None:
    report = tmp_path / "report.json"
    assert run_cli("triage", "--inventory", str(fake_systemd), "--report", str(report)) == 1
    out = capsys.readouterr().out
    assert "gpu01 vllm-a.service: out of memory after loading" in out
    assert "3: ERROR 08-20 03:10:01 [engine.py:467] CUDA out of memory. Tried to allocate 33.75 GiB" in out
    assert "lower gpu_memory_utilization by 0.02-0.05" in out
    assert "gpu02 vllm-b.service:" not in out  # serving: no verdict
    data = json.loads(report.read_text())
    assert data["hosts"]["gpu01"]["status"] == "failed" and data["hosts"]["gpu02"]["status"] == "ok"
    failed_step = data["hosts"]["gpu01"]["steps"][-1]
    assert failed_step["data"]["triage"]["class"] == "oom-after-loading"
    assert failed_step["data"]["triage"]["numbers"]["free"] == "26.88 GiB"


def test_a_host_whose_systemctl_prints_nothing_is_failed_not_ok(fake_systemd: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "a.show").write_text("")  # no systemd on gpu01, or systemctl show failed
    report = tmp_path / "report.json"
    assert run_cli("triage", "--inventory", str(fake_systemd), "--report", str(report)) == 1
    gpu01 = json.loads(report.read_text())["hosts"]["gpu01"]
    assert gpu01["status"] == "failed"
    assert "`systemctl show` printed no ActiveState" in gpu01["steps"][-1]["message"]
    assert "not down" not in capsys.readouterr().out


def test_triage_log_prints_class_lines_next_step_and_writes_the_report(tmp_path: Path, capsys) -> None:
    report = tmp_path / "t.json"
    log = DATA / "oom-after-loading-2.log"
    assert run_cli("triage", "--log", str(log), "--report", str(report)) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0]
        == f"{log}: out of memory after loading (KV cache allocation or CUDA graph capture), at CUDA graph capture"
    )
    assert any(line.startswith("    7: ") and "RuntimeError: CUDA error: out of memory" in line for line in out)
    assert any(line.startswith("  next step: ") and "gpu_memory_utilization" in line for line in out)
    data = json.loads(report.read_text())
    assert data["task"] == "triage" and data["class"] == "oom-after-loading"
    assert [ln["line"] for ln in data["lines"]] == [7, 2]


def test_triage_log_with_an_inventory_is_an_operator_error(tmp_path: Path, capsys) -> None:
    assert run_cli("triage", "--log", str(DATA / "nccl-1.log"), "--inventory", "x.yaml") == 2
    assert capsys.readouterr().err.strip() == "error: --log reads a saved file: leave out --inventory and --limit"
