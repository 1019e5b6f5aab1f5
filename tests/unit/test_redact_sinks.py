"""No secret in any output sink of the real CLI, run in-process: `inventory` (both forms),
`render` (stdout and --dest), the --report JSON, error lines, per-host output and the recap,
and log records. Each secret sits where masking by name cannot see it: a URL in a pin, a
token under an odd env name, a bearer in extra args, a wrong-typed secret value."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from vfleet.cli.main import program

HF = "hf_" + "LeakLeakLeakLeakLeakLeakLeak0123"
PIN_PW = "PinPassw0rd-leak"
BEARER = "BearerLeak.0123456789"
ODD = "odd-name-secret-value"
VARS: dict[str, Any] = {
    "ansible_user": "root",
    "vllm_version": "0.32.0",
    "model_name": "tiny",
    "model_source": "/srv/weights/tiny",
    "vllm_extra_pins": [f"git+https://ci:{PIN_PW}@git.example.com/org/plugin.git"],
    "vllm_env": {"MY_THING": HF, "SERVICE_TOKEN": ODD},
    # --middleware imports outside code, so vfleet refuses it unless asked for by name
    "vllm_extra_args": ["--middleware", f"Bearer {BEARER}"],
    "vllm_allow_unsafe": ["plugin_code"],
}
SECRETS = (HF, PIN_PW, BEARER, ODD)


def _inventory(tmp: Path, extra: dict[str, Any] | None = None, local: bool = False) -> Path:
    hosts: dict[str, Any] = {"gpu01": {"ansible_connection": "local"} if local else {}}
    data = {
        "all": {
            "vars": {**VARS, **(extra or {})},
            "children": {"vllm": {"hosts": hosts}, "gateways": {"hosts": {"gw01": {}}}},
        }
    }
    path = tmp / "inventory.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _vfleet(capsys, *argv: str) -> tuple[int, str]:
    try:
        program.run(["vfleet", *argv])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


def _assert_clean(text: str, secrets: tuple[str, ...] = SECRETS) -> None:
    for s in secrets:
        assert s not in text, f"{s!r} leaked: {text[-3000:]}"


@pytest.mark.parametrize("args", [[], ["--host", "gpu01"]], ids=["list", "host"])
def test_inventory_output(tmp_path, capsys, args) -> None:
    code, out = _vfleet(capsys, "inventory", "--inventory", str(_inventory(tmp_path)), *args)
    assert code == 0, out
    _assert_clean(out)
    assert "git.example.com/org/plugin.git" in out and "MY_THING" in out  # the rest stays readable


def test_render_stdout_and_dest(tmp_path, capsys) -> None:
    inv = _inventory(tmp_path)
    code, out = _vfleet(capsys, "render", "--inventory", str(inv), "--host", "gpu01")
    assert code == 0, out
    _assert_clean(out)
    assert "--middleware" in out
    code, out = _vfleet(capsys, "render", "--inventory", str(inv), "--host", "gpu01", "--dest", str(tmp_path / "d"))
    assert code == 0, out
    written = [p for p in (tmp_path / "d").rglob("*") if p.is_file()]
    assert written
    _assert_clean(out + "".join(p.read_text() for p in written))


def test_report_console_and_recap_of_a_run(tmp_path, capsys) -> None:
    inv = _inventory(tmp_path, local=True)
    report = tmp_path / "report.json"
    # The host prints every secret and then fails: the per-host line, the recap's failure
    # line and the report (command, stdout, message) all carry them.
    cmd = f"echo {HF} {ODD} https://u:{PIN_PW}@h/x 'Authorization: Bearer {BEARER}'; exit 3"
    code, out = _vfleet(capsys, "run", "--inventory", str(inv), "--limit", "gpu01", "--report", str(report), cmd)
    assert code != 0, out
    text = report.read_text()
    json.loads(text)
    _assert_clean(out + text)
    assert "exit 3" in out


@pytest.mark.parametrize(
    "vars_, secret",
    [
        ({"api_key": ["sk-wrongtype-in-a-list-LEAK"]}, "sk-wrongtype-in-a-list-LEAK"),
        ({"hf_token": {"nested": "hf-wrongtype-in-a-map-LEAK"}}, "hf-wrongtype-in-a-map-LEAK"),
        ({"api_key": 98765432123456789}, "98765432123456789"),
        ({"max_num_seqs": f"https://u:{PIN_PW}@host/x"}, PIN_PW),
        ({"vllm_extra_pins": f"git+https://ci:{PIN_PW}{'x' * 80}@git.example.com/o/r.git"}, PIN_PW),
        ({"vllm_env": {"MY_THING": ["hf_" + "W" * 34]}}, "hf_" + "W" * 34),
    ],
    ids=["secret-in-list", "secret-in-map", "secret-number", "url-in-int", "cut-url", "token-in-env-list"],
)
def test_error_lines(tmp_path, capsys, vars_, secret) -> None:
    code, out = _vfleet(capsys, "deploy", "--check", "--inventory", str(_inventory(tmp_path, vars_)))
    assert code == 2 and "error: " in out, out
    _assert_clean(out, (secret, secret[:12]))


def test_secret_read_from_a_file_is_hidden_where_it_is_echoed(tmp_path, capsys) -> None:
    (tmp_path / "key").write_text("file-secret-value-77\n")
    (tmp_path / "key").chmod(0o600)
    inv = _inventory(tmp_path, {"api_key_file": str(tmp_path / "key")}, local=True)
    code, out = _vfleet(capsys, "run", "--inventory", str(inv), "--limit", "gpu01", "echo file-secret-value-77")
    assert code == 0, out
    _assert_clean(out, ("file-secret-value-77",))


def test_log_records_of_a_run(tmp_path, capsys, caplog, monkeypatch) -> None:
    import vfleet.engine.runner

    def connect(name, *a, **k):  # paramiko logs like this when a key is refused
        logging.getLogger("paramiko.transport").warning("auth failed for Bearer %s / %s", BEARER, HF)
        raise OSError("no route")

    monkeypatch.setattr(vfleet.engine.runner, "open_connection", connect)
    with caplog.at_level(logging.WARNING):
        _, out = _vfleet(capsys, "run", "--inventory", str(_inventory(tmp_path)), "--limit", "gpu01", "true")
    assert "auth failed" in caplog.text
    _assert_clean(out + caplog.text)


def test_a_bug_prints_its_traceback_with_secrets_hidden(monkeypatch, capsys) -> None:
    """main(): an exception vfleet did not expect is printed (for the bug report) through the
    run's redactor, not by Python after the streams are put back."""
    import sys

    from vfleet.cli import main as cli_main

    def boom(argv):
        raise RuntimeError(f"unexpected, while holding https://u:{PIN_PW}@h/x and {HF}")

    monkeypatch.setattr(cli_main.program, "run", boom)
    monkeypatch.setattr(sys, "argv", ["vfleet", "inventory"])
    with pytest.raises(SystemExit) as exc:
        cli_main.main()
    out = capsys.readouterr()
    assert exc.value.code == 1 and "RuntimeError: unexpected" in out.err
    _assert_clean(out.out + out.err)
