"""Facts, pyinfra's way: a shell command plus a parser of its output.

Why: an operation that reads its facts through plain data can be tested without a host
(feed it the parsed facts from a file), and a step can gather every fact it needs in ONE
SSH round trip (`gather`), which matters at ~0.2 s per exec channel on real fleets. How the
commands travel and come back is vfleet/engine/fact_protocol.py, the one protocol every fact
uses (the roles' file and unit facts here, preflight's host probes).
"""

from __future__ import annotations

import base64
import shlex
from dataclasses import dataclass
from typing import Any, Mapping

from vfleet.engine.fact_protocol import AnyFact, Fact, Output, OutputFact, fact_script, read_outputs, results
from vfleet.engine.runner import HostContext, HostFailed

__all__ = [
    "Fact",
    "OutputFact",
    "Output",
    "FileState",
    "FileFact",
    "LinkFact",
    "UnitState",
    "UnitFact",
    "CommandOk",
    "SystemdVersion",
    "gather",
    "MAX_DIFF_BYTES",
]

q = shlex.quote
MAX_DIFF_BYTES = 256 * 1024


@dataclass(frozen=True)
class FileState:
    """A path as found: kind 'file' (with hash, mode, owner, group), 'dir', or 'missing'.
    `content` is the old text, read only when a diff will be shown."""

    kind: str
    sha256: str | None = None
    mode: str | None = None
    owner: str | None = None
    group: str | None = None
    content: str | None = None


@dataclass(frozen=True)
class FileFact:
    path: str
    with_content: bool = False

    def command(self) -> str:
        p = q(self.path)
        body = f"head -c {MAX_DIFF_BYTES} {p} | base64 -w0; echo" if self.with_content else "echo"
        return (
            f"if [ -d {p} ] && [ ! -L {p} ]; then echo DIR; "
            f"elif [ -e {p} ]; then echo FILE; sha256sum < {p} | cut -d' ' -f1; "
            f"stat -c '%a %U %G' {p}; {body}; else echo MISSING; fi"
        )

    def process(self, lines: list[str]) -> FileState:
        kind = lines[0].strip() if lines else "MISSING"
        if kind == "DIR":
            return FileState("dir")
        if kind != "FILE" or len(lines) < 3:
            return FileState("missing")
        mode, owner, group = (lines[2].split() + ["", "", ""])[:3]
        content = None
        if self.with_content and len(lines) > 3:
            content = base64.b64decode(lines[3].strip() or b"").decode("utf-8", "replace")
        return FileState("file", lines[1].strip(), mode, owner, group, content)


@dataclass(frozen=True)
class LinkFact:
    """Where a symlink points: its target, None when missing, 'OTHER' when not a link."""

    path: str

    def command(self) -> str:
        p = q(self.path)
        return f"if [ -L {p} ]; then echo LINK; readlink {p}; elif [ -e {p} ]; then echo OTHER; else echo MISSING; fi"

    def process(self, lines: list[str]) -> str | None:
        if lines and lines[0] == "LINK":
            return lines[1] if len(lines) > 1 else ""
        return "OTHER" if lines and lines[0] == "OTHER" else None


@dataclass(frozen=True)
class UnitState:
    enabled: str  # systemctl is-enabled: enabled, disabled, static, not-found, ...
    active: str  # systemctl is-active: active, inactive, failed, activating, ...


@dataclass(frozen=True)
class UnitFact:
    unit: str

    def command(self) -> str:
        u = q(self.unit)
        return (
            f'echo "$(systemctl is-enabled -- {u} 2>/dev/null || true)"; '
            f'echo "$(systemctl is-active -- {u} 2>/dev/null || true)"'
        )

    def process(self, lines: list[str]) -> UnitState:
        enabled = (lines[0].strip() if lines else "") or "not-found"
        active = (lines[1].strip() if len(lines) > 1 else "") or "unknown"
        return UnitState(enabled, active)


@dataclass(frozen=True)
class CommandOk:
    """Whether a probe command succeeds (`id -u vllm`, `command -v nginx`)."""

    probe: str

    def command(self) -> str:
        return f"if {self.probe} >/dev/null 2>&1; then echo yes; else echo no; fi"

    def process(self, lines: list[str]) -> bool:
        return bool(lines) and lines[0].strip() == "yes"


@dataclass(frozen=True)
class SystemdVersion:
    """systemd's major version (RestartSteps= needs 254), None without systemd."""

    def command(self) -> str:
        return "systemctl --version 2>/dev/null | head -n1"

    def process(self, lines: list[str]) -> int | None:
        words = lines[0].split() if lines else []
        return int(words[1]) if len(words) > 1 and words[1].isdigit() else None


def gather(ctx: HostContext, facts: Mapping[str, AnyFact]) -> dict[str, Any]:
    """Every fact's command in one round trip; each output parsed by its own fact."""
    if not facts:
        return {}
    r = ctx.run("sh -s", stdin=fact_script(facts))
    outputs = read_outputs(r.stdout)
    if not r.ok and not outputs:
        raise HostFailed(f"reading facts failed: exit {r.exited}: {r.tail()}")
    return results(facts, outputs)
