"""`vfleet triage --log` against hostile files: empty, binary, huge (only its end is read, its
line numbers stay right), lines of megabytes, and lines crafted to make a regex backtrack. Each
ends as a verdict in bounded time, or as one line and exit 2; never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.cli_run import vfleet_in_process as run_cli
from vfleet.roles.triage._classify import classify_lines
from vfleet.roles.triage._logfile import MAX_BYTES, MAX_COUNT_BYTES, read_log
from vfleet.roles.triage._signals import MAX_LINE_CHARS

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.20 GiB is free."


def test_an_empty_log_is_unknown_and_says_so(tmp_path: Path, capsys) -> None:
    log = tmp_path / "empty.log"
    log.write_text("")
    assert run_cli("triage", "--log", str(log)) == 0
    out = capsys.readouterr().out
    assert "unknown" in out and "the log is empty" in out


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: p.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256))), "binary"),
        (lambda p: None, "no such file"),
        (lambda p: p.mkdir(), "not a regular file"),
        (lambda p: os.mkfifo(p), "not a regular file"),  # would block a plain open()
    ],
)
def test_a_file_that_is_not_a_text_log_is_one_line_and_exit_2(tmp_path: Path, capsys, make, says) -> None:
    path = tmp_path / "journal.bin"
    make(path)
    assert run_cli("triage", "--log", str(path)) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(path) in err[0] and says in err[0]
    assert "Traceback" not in captured.err + captured.out


def test_a_100_mb_log_is_read_from_its_end_with_the_files_line_numbers(tmp_path: Path) -> None:
    """An NCCL error at the top is past the cap; the OOM at the end decides, numbered as in the file."""
    log = tmp_path / "big.log"
    filler = b"INFO 08-20 03:09:59 [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s\n"
    count = 100 * 1024 * 1024 // len(filler)
    with open(log, "wb") as f:
        f.write(b"RuntimeError: NCCL error: unhandled system error\n")
        for _ in range(count // 1024):
            f.write(filler * 1024)
        f.write(b"INFO Model loading took 16.55 GiB and 2.8 seconds\n" + OOM.encode() + b"\n")
    lines_in_file = 1 + (count // 1024) * 1024 + 2
    text = read_log(log)
    assert sum(len(ln) + 1 for ln in text.lines) <= MAX_BYTES
    assert "last 8 MiB" in text.note
    assert text.first_line + len(text.lines) - 1 == lines_in_file
    verdict = classify_lines(text.lines, first_line=text.first_line, note=text.note)
    assert verdict.cls.id == "oom-after-loading"
    assert [ln.number for ln in verdict.lines] == [lines_in_file, lines_in_file - 1]
    assert verdict.numbers["tried to allocate"] == "2.00 GiB" and verdict.numbers["free"] == "1.20 GiB"


def test_a_cut_first_line_is_dropped_and_the_numbers_stay_right(tmp_path: Path) -> None:
    log = tmp_path / "cut.log"
    log.write_text("aaaaaaaaaa\nbbbbbbbbbb\ncccccccccc\n")
    text = read_log(log, max_bytes=16)  # starts inside line 2
    assert text.lines == ["cccccccccc"] and text.first_line == 3
    text = read_log(log, max_bytes=11)  # starts exactly at line 3
    assert text.lines == ["cccccccccc"] and text.first_line == 3


def test_past_the_counting_bound_lines_are_numbered_from_the_tail_and_it_says_so(tmp_path: Path) -> None:
    """Counting the newlines of the whole part before the tail takes time in the file's size:
    past MAX_COUNT_BYTES it is not done, and the note says so."""
    log = tmp_path / "cut.log"
    log.write_text("aaaaaaaaaa\nbbbbbbbbbb\ncccccccccc\ndddddddddd\n")
    text = read_log(log, max_bytes=27, max_count=8)  # starts inside line 2, at byte 17
    assert text.lines == ["cccccccccc", "dddddddddd"] and text.first_line == 1
    assert "numbered from the first line read" in text.note
    text = read_log(log, max_bytes=22, max_count=8)  # starts exactly at line 3
    assert text.lines == ["cccccccccc", "dddddddddd"] and text.first_line == 1
    text = read_log(log, max_bytes=27, max_count=17)  # within the bound: the file's numbers
    assert text.first_line == 3 and "numbered" not in text.note
    assert MAX_COUNT_BYTES >= 32 * MAX_BYTES


def test_lines_of_megabytes_are_cut_for_matching_and_for_showing(tmp_path: Path) -> None:
    long_line = "x" * (2 * 1024 * 1024) + " CUDA error: no kernel image is available for execution on the device"
    verdict = classify_lines([long_line, "OSError: [Errno 98] Address already in use"])
    assert verdict.cls.id == "port-in-use"  # the signal past MAX_LINE_CHARS is not seen
    shown = classify_lines(["y" * 10_000, OOM + "z" * 10_000])
    assert shown.cls.id == "oom-phase-unknown" and all(len(ln.shown()) <= 400 for ln in shown.lines)
    assert MAX_LINE_CHARS < 2 * 1024 * 1024


@pytest.mark.parametrize(
    "crafted",
    [
        "chat template" + " " * 5000 + "appears path-like",  # the one bounded gap
        "Tried to allocate " + "9" * 5000 + " is free",  # digits without an end
        "compute capability " + "7." * 3000,
        "(" * 5000 + "GPU " + "0" * 5000,
        "capture_model" * 400 + ", in " * 800,
    ],
)
def test_lines_crafted_for_backtracking_take_linear_time(crafted: str) -> None:
    lines = [crafted] * 200 + [OOM]
    verdict = classify_lines(lines)  # returns at all: exponential backtracking would be hours
    assert verdict.cls.id.startswith("oom")
