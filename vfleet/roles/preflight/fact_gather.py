"""The batching that makes a whole preflight cost one connection and one round trip per host.

`gather_script(facts, vars)` writes ONE POSIX sh script that runs every fact's command (in
parallel, each in its own subshell with its stdout, stderr and exit code captured apart), then
prints them as delimited sections. A missing command fails only its own section. `split_sections`
cuts the output back into sections; `parse_sections` runs each fact's parser. The raw GPU
sections are kept verbatim so that they can be written as a snapshot in the GPU profile layout.
"""
from __future__ import annotations

import re
from typing import Any

from .fact_table import FACTS, Fact, Section

MARK = "@@VFLEET@@"
# Per-command limit: a wedged driver can make nvidia-smi hang for minutes; one hung section must
# not hold the whole preflight. Healthy hosts answer far below this.
COMMAND_TIMEOUT_S = 20


def gather_script(facts: list[Fact], vars: dict[str, Any]) -> str:
    """A POSIX sh script running all `facts` concurrently and printing, per fact:

        @@VFLEET@@ BEGIN <name>
        <stdout>
        @@VFLEET@@ STDERR <name>
        <stderr>
        @@VFLEET@@ END <name> <exit code>

    (each body followed by one extra newline that `split_sections` removes, so outputs without a
    final newline survive). Only builtins and coreutils; no bash-isms."""
    parts = [
        "#!/bin/sh",
        "# vfleet preflight: every fact of this host in one round trip",
        'VF_T=$(mktemp -d 2>/dev/null) || { VF_T=/tmp/vfleet-preflight.$$; mkdir -p "$VF_T"; }',
        "trap 'rm -rf \"$VF_T\"' EXIT",
        f"if command -v timeout >/dev/null 2>&1; then VF_TO='timeout {COMMAND_TIMEOUT_S}'; else VF_TO=''; fi",
        "export LC_ALL=C",
    ]
    for i, f in enumerate(facts):
        parts.append(f"vf_{i}() {{\n{f.command(vars)}\n}}")
        parts.append(f'{{ ( vf_{i} ) >"$VF_T/{i}.out" 2>"$VF_T/{i}.err" </dev/null; '
                     f'echo $? >"$VF_T/{i}.rc"; }} &')
    parts.append("wait")
    for i, f in enumerate(facts):
        parts.append(
            f"printf '{MARK} BEGIN {f.name}\\n'; cat \"$VF_T/{i}.out\"; "
            f"printf '\\n{MARK} STDERR {f.name}\\n'; cat \"$VF_T/{i}.err\"; "
            f"printf '\\n{MARK} END {f.name} %s\\n' \"$(cat \"$VF_T/{i}.rc\" 2>/dev/null || echo 255)\"")
    parts.append("exit 0")
    return "\n".join(parts) + "\n"


SECTION_RE = re.compile(
    rf"{MARK} BEGIN (?P<name>\S+)\n(?P<out>.*?)\n{MARK} STDERR (?P=name)\n(?P<err>.*?)\n"
    rf"{MARK} END (?P=name) (?P<rc>-?\d+)", re.S)


def split_sections(output: str) -> dict[str, Section]:
    """Cut a gathered output back into {fact name: Section(stdout, stderr, rc)}."""
    return {m.group("name"): Section(m.group("out"), m.group("err"), int(m.group("rc")))
            for m in SECTION_RE.finditer(output or "")}


def parse_sections(sections: dict[str, Section], facts: list[Fact] | None = None) -> dict[str, Any]:
    """{fact key: value} for every fact (a fact whose section is absent gets its 'missing' value)."""
    return {f.key: f.process_section(sections.get(f.name)) for f in (facts or FACTS)}


def raw_outputs(sections: dict[str, Section]) -> dict[str, str]:
    """{snapshot file name: raw text} for the GPU-profile files, ready for `snapshot_write`.

    A section whose command was missing (exit 127) yields no file: a snapshot of a host without
    nvidia-smi has no nvidia-smi.txt. A failing nvidia-smi keeps its error text (both streams),
    which is what identifies a broken driver when the snapshot is read back."""
    out = {}
    for f in FACTS:
        sec = sections.get(f.name)
        if f.snapshot_file is None or sec is None or sec.rc == 127:
            continue
        out[f.snapshot_file] = sec.stdout if sec.rc == 0 else (sec.stdout + sec.stderr)
    return out

