"""`vfleet usage` (vfleet/roles/usage/): summaries from access log lines and the log-reading
fact from data files (tests/unit/data/usage/), the fact's command run for real under `sh` over
a log folder with rotated copies, the window flags, and the command's one-line errors."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.unit.cli_run import vfleet_cli, vfleet_in_process
from vfleet.engine.errors import VfleetError
from vfleet.engine.fact_protocol import Output
from vfleet.roles.usage import _collect as collect
from vfleet.roles.usage._logread import NO_LOG, NOT_READABLE, AccessLogLines
from vfleet.roles.usage._summary import summarise, ttfb_seconds
from vfleet.roles.usage._window import window

DATA = Path(__file__).parent / "data" / "usage"
SUMMARIES = yaml.safe_load((DATA / "summaries.yaml").read_text())
READS = yaml.safe_load((DATA / "reads.yaml").read_text())
T0 = 1796244000.0  # 2026-12-02T20:40:00+00:00


@pytest.mark.parametrize("case", SUMMARIES, ids=[c["name"] for c in SUMMARIES])
def test_summary_of_log_lines(case):
    got = summarise(case["lines"], case["since"], case["until"])
    assert (got.rows, got.skipped) == (case["rows"], case["skipped"])


@pytest.mark.parametrize("case", READS, ids=[c["name"] for c in READS])
def test_log_read_result(case):
    fact = AccessLogLines(0, 1, max_bytes=case["max_bytes"])
    got = fact.process_output(Output(**case["output"]))
    assert {"lines": list(got.lines), "truncated": got.truncated, "error": got.error} == case["expected"]


def test_ttfb_is_the_last_upstreams():
    assert [ttfb_seconds(v) for v in ("0.050", "0.001, 0.030", "", "-", "x")] == [0.05, 0.03, None, None, None]


def _line(msec: float, tenant: str = "search") -> str:
    return json.dumps(
        {
            "time": "",
            "msec": msec,
            "tenant": tenant,
            "model": "m",
            "answered_by": "m",
            "status": 200,
            "error": "",
            "upstream": "",
            "request_time": 0.1,
            "ttfb": "0.01",
        },
        separators=(",", ":"),
    )


def _write(path: Path, msecs: list[float], mtime: float, gz: bool = False) -> None:
    text = "".join(_line(m) + "\n" for m in msecs).encode()
    path.write_bytes(gzip.compress(text) if gz else text)
    os.utime(path, (mtime, mtime))


def _run(fact: AccessLogLines) -> Output:
    p = subprocess.run(["sh", "-c", fact.command()], capture_output=True, text=True, timeout=60)
    return Output(p.stdout, p.stderr, p.returncode)


@pytest.fixture()
def rotated(tmp_path: Path) -> Path:
    """Debian's rotation: .3.gz (entirely before the window, by mtime), .2.gz, .1 (plain,
    delaycompress), the current file; a line that is not JSON in the current file."""
    log = tmp_path / "vfleet-access.log"
    _write(Path(f"{log}.3.gz"), [T0 - 9000], T0 - 8000, gz=True)
    _write(Path(f"{log}.2.gz"), [T0 - 200, T0 + 10], T0 + 10, gz=True)
    _write(Path(f"{log}.1"), [T0 + 20, T0 + 30], T0 + 30)
    _write(log, [T0 + 40, T0 + 5000], T0 + 5000)
    with log.open("a") as f:
        f.write("garbage\n")
    os.utime(log, (T0 + 5000, T0 + 5000))
    return log


def test_the_command_reads_rotated_copies_oldest_first_within_the_window(rotated):
    out = _run(AccessLogLines(T0, T0 + 100, path=str(rotated)))
    assert out.rc == 0, out.stderr
    got = AccessLogLines(T0, T0 + 100).process_output(out)
    assert got.lines[-1] == "garbage", got.lines
    assert [json.loads(line)["msec"] for line in got.lines[:-1]] == [T0 + 10, T0 + 20, T0 + 30, T0 + 40]
    assert got.lines[-1] == "garbage" and not got.truncated  # passed on, for the summary to skip


def test_the_command_skips_files_last_written_before_the_window(rotated):
    """.3.gz replaced by a file that is not gzip: never opened, since its mtime is before the window."""
    old = Path(f"{rotated}.3.gz")
    old.write_text("not gzip")
    os.utime(old, (T0 - 8000, T0 - 8000))
    out = _run(AccessLogLines(T0, T0 + 100, path=str(rotated)))
    assert out.rc == 0 and out.stderr == "", out.stderr


def test_the_command_stops_at_the_byte_bound(rotated):
    bound = len(_line(T0 + 10)) + 5
    fact = AccessLogLines(T0, T0 + 100, path=str(rotated), max_bytes=bound)
    got = fact.process_output(_run(fact))
    assert got.truncated and [json.loads(line)["msec"] for line in got.lines] == [T0 + 10]


def test_the_command_says_when_there_is_no_log(tmp_path):
    fact = AccessLogLines(T0, T0 + 100, path=str(tmp_path / "vfleet-access.log"))
    assert fact.process_output(_run(fact)).error == NO_LOG


def test_the_command_says_which_file_it_cannot_read():
    """A rotated copy the SSH user may not read (nginx's 0640 www-data:adm), the command run as a
    user who is not its owner (this machine's tests run as root: through setpriv, as nobody)."""
    folder = Path(tempfile.mkdtemp(prefix="vfleet-usage-"))
    try:
        folder.chmod(0o755)
        log = folder / "vfleet-access.log"
        _write(log, [T0 + 40], T0 + 40)
        _write(Path(f"{log}.1"), [T0 + 20], T0 + 30)
        log.chmod(0o644)
        Path(f"{log}.1").chmod(0)
        fact = AccessLogLines(T0, T0 + 100, path=str(log))
        as_other = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        p = subprocess.run([*as_other, "sh", "-c", fact.command()], capture_output=True, text=True, timeout=60)
        assert p.returncode == 3
        assert (
            fact.process_output(Output(p.stdout, p.stderr, p.returncode)).error
            == f"cannot read {log}.1: {NOT_READABLE}"
        )
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize(
    "since,until,expected",
    [
        ("10m", "2026-12-02T20:40:00+00:00", (T0 - 600, T0)),
        ("2h", None, (T0 + 50 - 7200, T0 + 50)),
        ("1d", None, (T0 + 50 - 86400, T0 + 50)),
        (None, None, (T0 + 50 - 3600, T0 + 50)),
        ("2026-12-02T20:30:00", "2026-12-02T21:40:00+01:00", (T0 - 600, T0)),  # no offset: UTC
    ],
)
def test_window(since, until, expected):
    w = window(since, until, T0 + 50)
    assert (w.since, w.until) == expected


@pytest.mark.parametrize(
    "since,until,message",
    [
        ("10x", None, "--since: '10x' is neither a duration"),
        ("-1h", None, "--since: '-1h' is neither a duration"),
        (None, "yesterday", "--until: 'yesterday' is neither a duration"),
        ("2026-12-02T21:00:00+00:00", "2026-12-02T20:00:00+00:00", "is not before --until"),
    ],
)
def test_a_bad_window_is_one_line(since, until, message):
    with pytest.raises(VfleetError, match=message.replace("(", r"\(")):
        window(since, until, T0)


def test_no_gateway_and_a_bad_since_exit_2_with_one_line(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    p = vfleet_cli("usage", "--inventory", str(inv))
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        f"error: {inv}: no host of group 'gateways': no access log to read"
    ], p.stderr
    p = vfleet_cli("usage", "--inventory", str(inv), "--since", "yesterday")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--since" in p.stderr, p.stderr


def _gateway_inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "inv.yaml"
    inv.write_text("gateways:\n  hosts:\n    gw1:\n      ansible_connection: local\n")
    return inv


def test_a_missing_log_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(collect, "ACCESS_LOG", str(tmp_path / "vfleet-access.log"))
    assert vfleet_in_process("usage", "--inventory", str(_gateway_inventory(tmp_path))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: gw1: {tmp_path}/vfleet-access.log: {NO_LOG}"], err


def test_usage_prints_the_table_and_writes_the_json(tmp_path, rotated, monkeypatch, capsys):
    monkeypatch.setattr(collect, "ACCESS_LOG", str(rotated))
    out = tmp_path / "out" / "usage.json"
    code = vfleet_in_process(
        "usage",
        "--inventory",
        str(_gateway_inventory(tmp_path)),
        "--since",
        "2026-12-02T20:40:00+00:00",
        "--until",
        "2026-12-02T20:41:40+00:00",
        "--json",
        str(out),
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "search" in printed and "1 log line(s) skipped" in printed
    assert json.loads(out.read_text()) == {
        "window": {"since": "2026-12-02T20:40:00+00:00", "until": "2026-12-02T20:41:40+00:00"},
        "gateways": ["gw1"],
        "rows": [
            {
                "tenant": "search",
                "model": "m",
                "requests": 4,
                "errors": {},
                "p50_s": 0.1,
                "p95_s": 0.1,
                "ttfb_p50_s": 0.01,
                "ttfb_p95_s": 0.01,
            }
        ],
        "skipped": 1,
        "truncated": [],
    }
