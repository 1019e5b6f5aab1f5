"""What `vfleet --list` and `vfleet TASK --help` show. The list is each task's first docstring
line (Invoke's), so a docstring that breaks its first sentence across lines was listed cut
mid-sentence; a collection's default task was listed under two names (bench.bench (bench));
and Invoke's automatic short flags gave plan's --max-num-batched-tokens and preflight's
--nccl-bandwidth the short flag '-', shown as a nameless `--=STRING` and `--`."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

from tests.unit.cli_run import vfleet_cli
from vfleet.cli import namespace

SENTENCE_END = re.compile(r"[.!?][)`'\"]?$")
# A flag as Invoke's help prints it: -x STRING, --name=STRING, --name[=STRING], --[no-]name.
FLAG = re.compile(r"^(-[A-Za-z0-9]|--(\[no-\])?[A-Za-z0-9][A-Za-z0-9-]*)(\[?=[A-Z]+\]?| [A-Z]+)?$")


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
    assert len(entries) == len(namespace.task_names), names  # every task, each once
    assert len(set(names)) == len(names) and len({t for _, t in entries}) == len(entries), entries
    assert not [n for n in names if "(" in n], names  # no alias: one name per task
    assert {
        "bench",
        "bench.compare",
        "eval",
        "eval.compare",
        "eval.variants",
        "preflight",
        "preflight.capture",
        "deploy",
    } <= set(names)
    for name, text in entries:
        assert SENTENCE_END.search(text), f"{name}: {text!r} stops mid-sentence"
        assert len(text) <= 100, f"{name}: {text!r} is long for a menu line"


def test_both_names_of_a_default_task_still_run_it():
    assert namespace["bench"] is namespace["bench.bench"]
    assert namespace["preflight"] is namespace["preflight.preflight"]
    assert namespace["bench.compare"].name == "compare"
    assert namespace["eval"] is namespace["eval.eval"] and namespace["eval.compare"].name == "compare"


def _options(task: str) -> tuple[str, list[str]]:
    """Every flag that `vfleet --help TASK` prints in its Options section."""
    p = vfleet_cli("--help", task)
    assert p.returncode == 0, p.stderr
    section = p.stdout.split("\nOptions:\n", 1)[1] if "\nOptions:\n" in p.stdout else ""
    specs = [re.split(r"\s{2,}", ln.strip())[0] for ln in section.splitlines() if re.match(r"^  -", ln)]
    return task, [flag for spec in specs for flag in spec.split(", ")]


def test_no_task_help_shows_an_option_without_a_name():
    with ThreadPoolExecutor(max_workers=8) as pool:
        helps = list(pool.map(_options, namespace.task_names))
    assert dict(helps)["plan"], "plan's --help lists no options: the parser below is off"
    bad = {task: [f for f in flags if not FLAG.match(f)] for task, flags in helps}
    assert not {t: f for t, f in bad.items() if f}, bad
    assert "-b STRING" in dict(helps)["plan"] and "--max-num-batched-tokens=STRING" in dict(helps)["plan"]
