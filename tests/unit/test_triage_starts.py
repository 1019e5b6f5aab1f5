"""The triage classifier on journals that hold several starts of vLLM: the last start decides
(its failure, not an older one), the start before it only when the last holds no known signal;
line numbers stay those of the file, for host reads and `--log` alike. Also: text whose
characters grow when lowered keeps the scan's line offsets right, and log text reaches the
terminal with its escape sequences escaped."""

from __future__ import annotations

from pathlib import Path

from tests.unit.cli_run import vfleet_in_process as run_cli
from vfleet.roles.triage._classify import classify_lines, printable
from vfleet.roles.triage._host import FailureJournal

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.20 GiB is free."
PORT = "OSError: [Errno 98] Address already in use"
BANNER = "INFO 08-20 03:09:00 [api_server.py:1797] vLLM API server version 0.10.1"

# -o cat: systemd's own lines for the unit are bare
RESTARTED = [
    "Started vllm.service - vLLM OpenAI-compatible server.",  # 1
    BANNER,  # 2
    "INFO Model loading took 16.55 GiB and 2.8 seconds",  # 3
    OOM,  # 4
    "vllm.service: Main process exited, code=exited, status=1/FAILURE",
    "vllm.service: Scheduled restart job, restart counter is at 1.",
    "Started vllm.service - vLLM OpenAI-compatible server.",  # 7
    BANNER,  # 8
    PORT,  # 9
    "vllm.service: Failed with result 'exit-code'.",
]


def test_the_last_start_decides_not_an_older_failure() -> None:
    verdict = classify_lines(RESTARTED, note="the last 1000 journal lines of vllm.service")
    assert verdict.cls.id == "port-in-use"
    assert [ln.number for ln in verdict.lines] == [9]
    assert "the last start, from line 7" in verdict.note


def test_a_last_start_without_a_signal_yet_leaves_the_one_before_to_decide() -> None:
    """A unit starting again after a crash: its new start is still loading."""
    verdict = classify_lines(RESTARTED[:8])
    assert verdict.cls.id == "oom-after-loading" and verdict.lines[0].number == 4
    assert "the start before the last (from line 1)" in verdict.note


def test_only_the_start_just_before_the_last_is_read_when_the_last_shows_nothing() -> None:
    """Three starts: an OOM in the first, nothing known in the second and third: unknown, not
    the first start's OOM."""
    verdict = classify_lines(
        RESTARTED[:5] + ["Started vllm.service - vLLM.", "INFO loading", "Started vllm.service - vLLM.", BANNER]
    )
    assert verdict.cls.id == "unknown" and "the last start, from line 8" in verdict.note


def test_a_pasted_journal_with_prefixes_is_cut_at_its_last_start_too(tmp_path: Path, capsys) -> None:
    log = tmp_path / "journal.txt"
    log.write_text(
        "\n".join(
            [
                "Aug 20 03:08:00 gpu01 systemd[1]: Started vllm.service - vLLM.",
                f"Aug 20 03:08:30 gpu01 vllm[811]: {OOM}",
                "Aug 20 03:09:00 gpu01 systemd[1]: Started vllm.service - vLLM.",
                f"Aug 20 03:09:01 gpu01 vllm[922]: {PORT}",
            ]
        )
        + "\n"
    )
    assert run_cli("triage", "--log", str(log)) == 0
    out = capsys.readouterr().out
    assert f"{log}: port already in use" in out and "    4: " in out and "the last start, from line 3" in out


def test_characters_that_grow_when_lowered_keep_the_line_offsets_right() -> None:
    """ "İ".lower() is two code points: offsets taken from the original lines drifted."""
    lines = ["İ" * 40] * 3 + [
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB",
        "INFO shutting down",
        "INFO bye",
    ]
    verdict = classify_lines(lines)
    assert verdict.cls.id.startswith("oom") and verdict.lines[0].number == 4


def test_escape_sequences_in_a_log_are_escaped_before_the_terminal(tmp_path: Path, capsys) -> None:
    hostile = f"\x1b]0;owned\x07\x1b[2J\x1b[31m{PORT}\r\x08"
    log = tmp_path / "esc.log"
    log.write_text(hostile + "\n")
    assert run_cli("triage", "--log", str(log)) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x08" not in out
    assert f"    1: \\x1b]0;owned\\x07\\x1b[2J\\x1b[31m{PORT}" in out
    assert printable("a\tb\u200bc") == "a b\\u200bc"
    tail = FailureJournal([hostile], classify_lines([hostile])).tail()
    assert "\x1b" not in tail and PORT in tail
