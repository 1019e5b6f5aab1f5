"""Broken and hostile inputs through the real CLI: one clear line and exit 2, no traceback, no
secret in any output, and nothing ran (no connection was even attempted: asserted on the
runner's connection factory, not on timing). Cases: tests/unit/data/hostile/cases*.yaml."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

import vfleet.engine.runner
from vfleet.cli.main import program

# cases.yaml and cases-<topic>.yaml: one file per class of input, so they grow apart.
CASES = [
    case
    for path in sorted((Path(__file__).parent / "data" / "hostile").glob("cases*.yaml"))
    for case in yaml.safe_load(path.read_text())
]
BASE_VARS = {
    "ansible_user": "root",
    "vllm_version": "0.32.0",
    "model_name": "tiny",
    "model_source": "/srv/weights/tiny",
}


def _inventory(case: dict[str, Any], tmp: Path) -> Path:
    if "ini" in case:
        path = tmp / "hosts.ini"
        path.write_text(case["ini"])
        return path
    path = tmp / "inventory.yaml"
    if case.get("bare"):
        path.write_text(case["inventory"])
        return path
    host = case.get("host", "gpu01")
    data = {
        "all": {
            "vars": {**BASE_VARS, **case.get("vars", {})},
            "children": {"vllm": {"hosts": {host: case.get("host_vars") or {}}}, "gateways": {"hosts": {"gw01": {}}}},
        }
    }
    text = yaml.safe_dump(data, sort_keys=False)
    return (
        path.write_text(text.replace("'{secret_file}'", str(tmp / "secret")).replace("'{fifo}'", str(tmp / "fifo")))
        and path
    )


def run_case(case: dict[str, Any], tmp: Path, monkeypatch, capsys) -> tuple[int, str, list]:
    for name, text in (case.get("files") or {}).items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
        os.chmod(tmp / name, int(case.get("file_mode", "600"), 8))
    os.mkfifo(tmp / "fifo")
    inventory = _inventory(case, tmp)
    connections: list = []
    monkeypatch.setattr(vfleet.engine.runner, "open_connection", lambda *a, **k: connections.append(a) or 1 / 0)
    monkeypatch.delenv("VFLEET_TEST_UNSET_KEY", raising=False)
    args = [a.replace("{dir}", str(tmp)) for a in case.get("args", ["deploy", "--check"])]
    argv = ["vfleet", args[0], "--inventory", str(inventory), *args[1:]]
    if args[0] == "plan" and "--config" in args:
        argv = ["vfleet", *args]
    try:
        program.run(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err, connections


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_hostile_input(case: dict[str, Any], tmp_path: Path, monkeypatch, capsys) -> None:
    code, output, connections = run_case(case, tmp_path, monkeypatch, capsys)
    assert code == case["code"], output[-2000:]
    assert case.get("message", "") in output, output[-2000:]
    assert "Traceback" not in output and "internal error" not in output, output[-2000:]
    for secret in case.get("absent", []):
        assert secret not in output, f"{secret!r} leaked: {output[-2000:]}"
    assert connections == [], "a host was contacted for an input that must stop before any connection"
    if code == 2:
        errors = [ln for ln in output.splitlines() if ln.startswith("error: ")]
        assert errors, output[-2000:]


def test_there_are_at_least_sixty_cases() -> None:
    assert len(CASES) >= 60 and len({c["name"] for c in CASES}) == len(CASES)
