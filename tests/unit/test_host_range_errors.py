"""Hostile host ranges and --limit patterns: every mistake is one line naming the file and
line (or --limit) and what to write instead, never a traceback, through the loader (YAML and
INI) and through the `vfleet` command (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.unit.cli_run import vfleet_cli
from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import InventoryError, VfleetError
from vfleet.engine.hostpatterns import has_host_range, match_limit
from vfleet.engine.inventory import load_inventory

HOSTILE = [
    ("gpu[01:100]", "zero-padded start and end must have the same width"),  # was a traceback
    ("gpu[01:3]", "zero-padded start and end must have the same width"),
    ("gpu[a:Z]", "start and end must be the same case"),
    ("gpu[z:a]", "start after end"),
    ("gpu[1:4:0]", "step must be a whole number >= 1"),
    ("gpu[1:4:-1]", "step must be a whole number >= 1"),
    ("gpu[1:3:" + "9" * 5000 + "]", "step must be a whole number >= 1"),  # int() refuses 5000 digits
    ("gpu[0:" + "1" * 5000 + "]", "must both be numbers or both single letters"),
    ("gpu[１:３]", "must both be numbers or both single letters"),  # full-width digits: not what was written
    ("gpu[²:³]", "must both be numbers or both single letters"),  # isdigit() but not int()
    ("gpu[[1:2]]", "unbalanced brackets"),
    ("gpu[1:2]]", "unbalanced brackets"),
    ("gpu[1:2][", "unbalanced brackets"),
    ("gpu[1:2:3:4]", "expected [start:end] or [start:end:step]"),
    ("gpu[]", "expected [start:end] or [start:end:step]"),
    ("gpu[:]", "missing end"),
    ("gpu[0:99][0:99][0:99]", "would make more than 100000 hosts"),
    ("gpu[0:1]" * 200, "would make more than 100000 hosts"),
]


def _yaml(tmp_path: Path, pattern: str) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"ok01": None, pattern: None}}}, width=10**6))
    return path


def _ini(tmp_path: Path, pattern: str) -> Path:
    path = tmp_path / "hosts.ini"
    path.write_text(f"[vllm]\nok01\n{pattern} vllm_port=8000\n")
    return path


def _errors(path: Path) -> list[str]:
    with pytest.raises(InventoryError) as exc:
        load_inventory(path, schema=SCHEMA)
    return exc.value.errors


@pytest.mark.parametrize("pattern, why", HOSTILE)
@pytest.mark.parametrize("write", [_yaml, _ini])
def test_a_bad_range_is_one_line_naming_file_and_line(tmp_path, write, pattern, why):
    path = write(tmp_path, pattern)
    (msg,) = _errors(path)
    assert msg.startswith(f"{path}: line 3: ") and why in msg, msg
    assert "\n" not in msg and len(msg) < 400, msg  # a 10,000-character key is shown cut


def test_a_newline_in_a_range_is_escaped(tmp_path):
    (msg,) = _errors(_yaml(tmp_path, "gpu[1:2]\n[x"))
    assert "\n" not in msg and "'gpu[1:2]\\n[x'" in msg


@pytest.mark.parametrize("pattern, why", [(p, w) for p, w in HOSTILE if "hosts" not in w and has_host_range(p)])
def test_a_bad_limit_range_is_one_line_naming_limit(pattern, why):
    with pytest.raises(VfleetError) as exc:
        match_limit(pattern, ["gpu01"], {"all": ["gpu01"]})
    msg = str(exc.value)
    assert msg.startswith("--limit") and why in msg and "\n" not in msg and len(msg) < 400, msg


@pytest.mark.parametrize("pattern", ["gpu[01:100]", "gpu[1:4:0]", "gpu[[1:2]]", "gpu[0:" + "1" * 5000 + "]"])
def test_the_command_exits_2_with_one_line_for_a_bad_range(tmp_path, pattern):
    p = vfleet_cli("inventory", "--inventory", str(_yaml(tmp_path, pattern)))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    (line,) = p.stderr.splitlines()
    assert line.startswith(f"error: {tmp_path}/hosts.yml: line 3: all.hosts: host range "), line


@pytest.mark.parametrize("limit", ["gpu[01:100]", "gpu[a:Z]", "gpu[0:99999999999999999999]", "gpu[1:2]]"])
def test_the_command_exits_2_with_one_line_for_a_bad_limit(tmp_path, limit):
    inv = _yaml(tmp_path, "gpu[01:04]")
    p = vfleet_cli("inventory", "--inventory", str(inv), "--limit", limit)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    (line,) = p.stderr.splitlines()
    assert line.startswith("error: --limit: host range "), line
