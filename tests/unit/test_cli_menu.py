"""What `vfleet --list` and `vfleet TASK --help` show. The list is each task's first docstring
line (Invoke's), so a docstring that breaks its first sentence across lines was listed cut
mid-sentence; and a collection's default task was listed under two names (bench.bench (bench))."""
from __future__ import annotations

import re

from vfleet.cli import namespace
from tests.unit.cli_run import vfleet_cli

SENTENCE_END = re.compile(r"[.!?][)`'\"]?$")


def listed() -> list[tuple[str, str]]:
    """(name, description) per entry of `vfleet --list`, wrapped lines joined."""
    p = vfleet_cli("--list")
    assert p.returncode == 0, p.stderr
    entries: list[list[str]] = []
    for line in p.stdout.split("Subcommands:", 1)[1].splitlines():
        if re.match(r"^  \S", line):
            name, _, text = line.strip().partition("   ")
            entries.append([name.strip(), text.strip()])
        elif line.strip():
            entries[-1][1] += " " + line.strip()
    return [(n, t) for n, t in entries]


def test_list_names_each_task_once_by_one_name_with_a_whole_sentence():
    entries = listed()
    names = [n for n, _ in entries]
    assert len(entries) == len(namespace.task_names), names      # every task, each once
    assert len(set(names)) == len(names) and len({t for _, t in entries}) == len(entries), entries
    assert not [n for n in names if "(" in n], names              # no alias: one name per task
    assert {"bench", "bench.compare", "preflight", "preflight.capture", "deploy"} <= set(names)
    for name, text in entries:
        assert SENTENCE_END.search(text), f"{name}: {text!r} stops mid-sentence"
        assert len(text) <= 100, f"{name}: {text!r} is long for a menu line"


def test_both_names_of_a_default_task_still_run_it():
    assert namespace["bench"] is namespace["bench.bench"]
    assert namespace["preflight"] is namespace["preflight.preflight"]
    assert namespace["bench.compare"].name == "compare"
