"""A host's last measured restart (vfleet/roles/service/_measured_restart.py): the fact's parser
from {command, output, expected} data files (tests/unit/data/measured_restart/, the pyinfra way),
then the write and the read run for real under `sh` on a temporary folder, and a write that
fails, which must not fail the host."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.unit.configs import host_config
from vfleet.engine.fact_protocol import fact_script, read_outputs, results
from vfleet.engine.results import Status
from vfleet.roles.service._measured_restart import (
    ROOT,
    MeasuredRestart,
    MeasuredRestartFact,
    path_for,
    save,
    save_command,
)

DATA = Path(__file__).parent / "data" / "measured_restart"
CASES = sorted(DATA.glob("*.yaml"))
RECORD = MeasuredRestart(
    restart_s=47.3,
    ready_s=41.27,
    stop_s=6.0,
    drain_s=0.02,
    inflight_wait_s=3.41,
    undrain_s=0.3,
    task="restart",
    at="2026-12-03T08:14:36Z",
)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_fact_data_file(path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    assert case.get("source"), "every data file says where its output came from"
    fact = MeasuredRestartFact(path_for(host_config()))
    assert fact.command() == case["command"]
    got = fact.process(case["output"].splitlines())
    assert (None if got is None else dataclasses.asdict(got)) == case["expected"]


def test_the_data_files_cover_a_record_a_missing_file_and_tampered_ones() -> None:
    expected = [yaml.safe_load(p.read_text())["expected"] for p in CASES]
    assert sum(e is not None for e in expected) >= 2 and sum(e is None for e in expected) >= 8


def test_one_file_per_unit_under_vfleets_state() -> None:
    assert path_for(host_config()) == f"{ROOT}/vllm.service.json" == "/var/lib/vfleet/restarts/vllm.service.json"
    assert path_for(host_config({"service_name": "vllm-b"})).endswith("/vllm-b.service.json")


def test_a_record_reads_back_as_written() -> None:
    assert MeasuredRestart.parse(RECORD.text()) == RECORD
    deploy = MeasuredRestart(restart_s=91.4, ready_s=88.0)
    assert MeasuredRestart.parse(deploy.text()) == deploy
    assert "null" not in deploy.text() and deploy.text().endswith("}\n")  # measured values only


def _sh(script: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script], input=stdin.encode(), capture_output=True, timeout=30)


def _read_through_the_protocol(path: Path) -> MeasuredRestart | None:
    """The fact as a rollout reads it: in the one-round-trip script, parsed from its sections."""
    facts = {"restart": MeasuredRestartFact(str(path))}
    p = subprocess.run(["sh", "-s"], input=fact_script(facts).encode(), capture_output=True, timeout=30)
    return results(facts, read_outputs(p.stdout.decode("utf-8", "replace")))["restart"]


def test_written_then_read_for_real(tmp_path: Path) -> None:
    path = tmp_path / "state" / "restarts" / "vllm.service.json"  # the folder does not exist yet
    assert _read_through_the_protocol(path) is None  # no file: not measured
    for record in (RECORD, MeasuredRestart(restart_s=12.0)):  # the second replaces the first whole
        p = _sh(save_command(str(path)), record.text())
        assert p.returncode == 0, p.stderr
        assert path.read_text() == record.text() and _read_through_the_protocol(path) == record
    assert [f.name for f in path.parent.iterdir()] == ["vllm.service.json"]  # the temporary file was renamed


@pytest.mark.parametrize(
    "content", [b'{"restart_s": 47.3, "rea', b"\xff\xfe\x00garbage\n\x1b[2J", b"", b'{"restart_s": 1e400}', b"[" * 5000]
)
def test_a_damaged_file_on_the_host_reads_as_not_measured(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "vllm.service.json"
    path.write_bytes(content)
    assert _read_through_the_protocol(path) is None


def test_a_file_larger_than_a_record_is_read_in_part_and_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "vllm.service.json"
    path.write_text('{"restart_s": 47.3, "pad": "' + "x" * 10_000 + '"}')
    assert _read_through_the_protocol(path) is None


def _ctx(run):
    recorded: list[tuple] = []
    ctx = SimpleNamespace(
        name="lab1",
        config=host_config(),
        play=SimpleNamespace(task="upgrade"),
        run=run,
        record=lambda *a, **kw: recorded.append(a),
    )
    return ctx, recorded


def test_save_stamps_the_task_and_the_time_and_writes_through_stdin() -> None:
    calls: list[tuple] = []
    ctx, recorded = _ctx(lambda cmd, stdin, timeout: calls.append((cmd, stdin)) or SimpleNamespace(ok=True))
    save(ctx, MeasuredRestart(restart_s=47.3, ready_s=41.27))
    ((cmd, stdin),) = calls
    assert cmd == save_command("/var/lib/vfleet/restarts/vllm.service.json") and "47.3" not in cmd
    got = MeasuredRestart.parse(stdin)
    assert got is not None and got.task == "upgrade" and got.restart_s == 47.3
    assert len(got.at) == 20 and got.at.endswith("Z") and recorded == []  # nothing to say when written


def test_a_failed_write_never_fails_the_host() -> None:
    from vfleet.engine.connection import UnreachableError

    failing = SimpleNamespace(ok=False, exited=1, tail=lambda: "mkdir: cannot create directory: Read-only file system")
    for run in (
        lambda cmd, stdin, timeout: failing,
        lambda cmd, stdin, timeout: (_ for _ in ()).throw(UnreachableError("lab1: connection lost")),
    ):
        ctx, recorded = _ctx(run)
        save(ctx, RECORD)  # no exception
        ((action, target, status, message),) = recorded
        assert status is Status.OK and target.endswith("vllm.service.json")
        assert "not recorded" in message and "counts lab1 as not measured" in message
