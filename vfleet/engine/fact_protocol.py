"""The one wire protocol of facts: several facts' commands as ONE shell script (one SSH round
trip), and its output cut back into each fact's result.

Why one protocol: a deploy step reads a few files and units, a preflight reads a dozen GPU and
host probes, and both want the same things from the batching: one round trip, a command that
fails or hangs spoiling only its own fact, and each output exactly as printed (a snapshot keeps
raw outputs, and a parser must not see the next fact's marker glued to its last line).

The script (POSIX sh, builtins and coreutils only) runs each fact's command in a subshell with
stdin from /dev/null (the script itself arrives on sh's stdin), capturing its stdout, stderr
and exit status apart in a private temporary folder; one after the other, or all at once
(`parallel`: slow probes overlap). A fact that may hang bounds itself (`timeout_s`, through
timeout(1) where the host has it). LC_ALL=C: parsers read one language. Then every result is
printed as

    @@VFLEET@@ BEGIN <label>
    <stdout>
    @@VFLEET@@ STDERR <label>
    <stderr>
    @@VFLEET@@ END <label> <exit status>

each body followed by one newline that `read_outputs` takes off again, so an output without a
final newline survives byte for byte. <label> is the fact's key, percent-encoded where it is
not a plain word (keys are often paths).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Union, runtime_checkable
from urllib.parse import quote, unquote

__all__ = ["MARK", "Output", "Fact", "OutputFact", "AnyFact", "fact_script", "read_outputs", "results", "sections"]

MARK = "@@VFLEET@@"
q = shlex.quote


@dataclass(frozen=True)
class Output:
    """What one fact's command gave: stdout exactly as printed, stderr, exit status."""

    stdout: str
    stderr: str = ""
    rc: int = 0


class Fact(Protocol):
    """A command and a parser of its stdout lines (what most facts need)."""

    def command(self) -> str: ...
    def process(self, lines: list[str]) -> Any: ...


@runtime_checkable
class OutputFact(Protocol):
    """A fact that reads its command's whole result (stdout verbatim, stderr, exit status; None
    when the output holds no section for it) and may bound its command's run time (seconds;
    None: unbounded)."""

    timeout_s: int | None

    def command(self) -> str: ...
    def process_output(self, out: Output | None) -> Any: ...


AnyFact = Union[Fact, OutputFact]


def _label(key: str) -> str:
    return quote(key, safe="")


def _body(fact: AnyFact) -> str:
    timeout = fact.timeout_s if isinstance(fact, OutputFact) else None
    return f"vf_timeout {int(timeout)} sh -c {q(fact.command())}" if timeout else fact.command()


def fact_script(facts: Mapping[str, AnyFact], *, parallel: bool = False) -> str:
    """One sh script running every fact's command and printing the sections (module doc)."""
    parts = [
        "#!/bin/sh",
        "# vfleet facts: every command's stdout, stderr and status in one round trip",
        'VF_T=$(mktemp -d 2>/dev/null) || { VF_T=/tmp/vfleet-facts.$$; mkdir -m 700 "$VF_T"; } '
        "|| { echo 'facts: no temporary folder' >&2; exit 1; }",
        "trap 'rm -rf \"$VF_T\"' EXIT",
        "export LC_ALL=C",
    ]
    if any(isinstance(f, OutputFact) and f.timeout_s for f in facts.values()):
        parts.append('vf_timeout() { if command -v timeout >/dev/null 2>&1; then timeout "$@"; else shift; "$@"; fi; }')
    for i, fact in enumerate(facts.values()):
        parts.append(f"vf_{i}() {{\n{_body(fact)}\n}}")
        parts.append(
            f'{{ ( vf_{i} ) >"$VF_T/{i}.out" 2>"$VF_T/{i}.err" </dev/null; '
            f'echo $? >"$VF_T/{i}.rc"; }}' + (" &" if parallel else "")
        )
    if parallel:
        parts.append("wait")
    for i, key in enumerate(facts):
        label = _label(key)
        parts.append(
            f"printf '%s\\n' {q(f'{MARK} BEGIN {label}')}; cat \"$VF_T/{i}.out\"; "
            f"printf '\\n%s\\n' {q(f'{MARK} STDERR {label}')}; cat \"$VF_T/{i}.err\"; "
            f'printf \'\\n%s %s\\n\' {q(f"{MARK} END {label}")} "$(cat "$VF_T/{i}.rc" 2>/dev/null || echo 255)"'
        )
    parts.append("exit 0")
    return "\n".join(parts) + "\n"


_M = re.escape(MARK)
SECTION_RE = re.compile(
    rf"{_M} BEGIN (?P<label>\S+)\n(?P<out>.*?)\n{_M} STDERR (?P=label)\n(?P<err>.*?)\n"
    rf"{_M} END (?P=label) (?P<rc>-?\d+)",
    re.S,
)


def read_outputs(stdout: str) -> dict[str, Output]:
    """{fact key: Output} of every complete section in a script's stdout."""
    return {
        unquote(m.group("label")): Output(m.group("out"), m.group("err"), int(m.group("rc")))
        for m in SECTION_RE.finditer(stdout or "")
    }


def sections(outputs: Mapping[str, Output]) -> str:
    """What the script prints for these outputs (read_outputs' inverse): the host's side of
    the protocol, for tests and benchmarks that feed parsers without a host."""
    return "".join(
        f"{MARK} BEGIN {_label(k)}\n{o.stdout}\n{MARK} STDERR {_label(k)}\n{o.stderr}\n{MARK} END {_label(k)} {o.rc}\n"
        for k, o in outputs.items()
    )


def results(facts: Mapping[str, AnyFact], outputs: Mapping[str, Output]) -> dict[str, Any]:
    """Each fact's value from its output: an OutputFact reads the whole Output (None when its
    section is missing), a line Fact its stdout lines ([] when missing)."""
    out: dict[str, Any] = {}
    for key, fact in facts.items():
        got = outputs.get(key)
        if isinstance(fact, OutputFact):
            out[key] = fact.process_output(got)
        else:
            out[key] = fact.process(got.stdout.splitlines() if got else [])
    return out
