"""The engine's one fact protocol (vfleet/engine/fact_protocol.py), run for real under `sh` (and
dash where installed): every fact's output comes back exactly as printed, under its own key;
a fact that fails, exits, reads stdin or hangs spoils only itself; parallel facts overlap."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from vfleet.engine.fact_protocol import MARK, Output, fact_script, read_outputs, results
from vfleet.engine.facts import CommandOk, gather
from vfleet.engine.runner import HostFailed

SHELLS = ["sh"] + (["dash"] if shutil.which("dash") else [])


@dataclass(frozen=True)
class Raw:
    """An OutputFact that hands back its Output as is."""

    cmd: str
    timeout_s: int | None = None

    def command(self) -> str:
        return self.cmd

    def process_output(self, out: Output | None) -> Any:
        return out


@dataclass(frozen=True)
class Lines:
    """A line fact that hands back its lines as is."""

    cmd: str

    def command(self) -> str:
        return self.cmd

    def process(self, lines: list[str]) -> Any:
        return lines


def run(facts: dict[str, Any], shell: str = "sh", parallel: bool = False) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    r = subprocess.run(
        [shell, "-s"], input=fact_script(facts, parallel=parallel), capture_output=True, text=True, timeout=60
    )
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    return results(facts, read_outputs(r.stdout)), took


# (command, what its Output must be): one row per thing a fact may do to the batch
CASES = [
    ("printf 'no newline'", Output("no newline", "", 0)),
    ("printf 'two\\n\\n'", Output("two\n\n", "", 0)),
    ("echo out; echo err >&2; exit 3", Output("out\n", "err\n", 3)),
    ("cat; echo after", Output("after\n", "", 0)),  # stdin is /dev/null, not the script
    ("exit 7", Output("", "", 7)),  # ends its own subshell only
    ("nosuchcommand-vfleet", None),  # checked below: 127 and a message
    (f"echo '{MARK} BEGIN x'", Output(f"{MARK} BEGIN x\n", "", 0)),
    ("echo $LC_ALL", Output("C\n", "", 0)),  # parsers read one language
]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
def test_each_output_comes_back_exactly_under_its_own_key(shell: str, parallel: bool) -> None:
    facts = {f"k{i} /path with spaces%{i}": Raw(cmd) for i, (cmd, _) in enumerate(CASES)}
    got, _ = run(facts, shell, parallel)
    for (key, value), (cmd, want) in zip(got.items(), CASES):
        if want is None:
            assert value.rc == 127 and "nosuchcommand-vfleet" in value.stderr, value
        else:
            assert value == want, cmd


def test_line_facts_read_stdout_lines_and_missing_sections() -> None:
    got, _ = run({"ok": CommandOk("true"), "lines": Lines("echo a; echo b >&2; echo c")})
    assert got == {"ok": True, "lines": ["a", "c"]}
    assert results({"raw": Raw("x"), "lines": Lines("x")}, {}) == {"raw": None, "lines": []}


def test_a_fact_that_hangs_is_bounded_and_parallel_facts_overlap() -> None:
    facts = {
        "hangs": Raw("echo started; sleep 30; echo never", timeout_s=1),
        "slow1": Raw("sleep 1; echo one"),
        "slow2": Raw("sleep 1; echo two"),
    }
    got, took = run(facts, parallel=True)
    assert got["hangs"] == Output("started\n", "", 124)
    assert (got["slow1"].stdout, got["slow2"].stdout) == ("one\n", "two\n")
    assert took < 2.8, took  # one after the other: 3 s or more (1 s each, the hung one cut at 1 s)


def test_a_cut_off_output_keeps_only_its_complete_sections() -> None:
    out = f"{MARK} BEGIN a\n1\n\n{MARK} STDERR a\n\n{MARK} END a 0\n{MARK} BEGIN b\n2\n"
    assert read_outputs(out) == {"a": Output("1\n", "", 0)}
    assert read_outputs("") == {}


def test_gather_fails_the_host_only_when_nothing_came_back() -> None:
    def ctx(stdout: str, ok: bool) -> SimpleNamespace:
        r = SimpleNamespace(stdout=stdout, ok=ok, exited=0 if ok else 255, tail=lambda: "ssh: broken pipe")
        return SimpleNamespace(run=lambda cmd, stdin=None, **kw: r)

    with pytest.raises(HostFailed, match="reading facts failed: exit 255: ssh: broken pipe"):
        gather(ctx("", ok=False), {"ok": CommandOk("true")})
    section = f"{MARK} BEGIN ok\nyes\n\n{MARK} STDERR ok\n\n{MARK} END ok 0\n"
    assert gather(ctx(section, ok=False), {"ok": CommandOk("true")}) == {"ok": True}
    assert gather(ctx("", ok=True), {}) == {}
