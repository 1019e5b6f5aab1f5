"""Operations, pyinfra's way: read facts, return the changes to make, or none (a no-op).

An operation here is a pure function of the wanted state and the facts: it returns Change
objects (a shell command with the reason it is needed), so check mode, diffs and
idempotency fall out of one place (`apply`), and every operation can be tested from data
without a host. `apply` is the only code that runs a change.

File writes are atomic (temp file in the same directory, then rename) so a service never
reads a half-written unit or config; with `validate`, the old file is restored when the
check command (`nginx -t`) rejects the new one, so a running service never sees it.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import posixpath
import shlex
import time
from dataclasses import dataclass, field
from typing import Iterable

from vfleet.engine.facts import FileState, UnitState
from vfleet.engine.results import Status, StepResult
from vfleet.engine.runner import HostContext, HostFailed

__all__ = [
    "Change",
    "file_change",
    "directory_change",
    "symlink_change",
    "service_changes",
    "daemon_reload",
    "command",
    "apply",
]

q = shlex.quote


@dataclass(frozen=True)
class Change:
    """One thing to do on a host. `command` runs with `stdin` (never in argv: file contents,
    secrets); `diff` is shown under --diff; `notify` names the handler a change triggers."""

    action: str
    target: str
    reason: str
    command: str
    stdin: str | None = field(default=None, repr=False)
    diff: str = ""
    notify: str | None = None
    timeout: float | None = None


def _mode(mode: str | int) -> str:
    return format(mode, "o") if isinstance(mode, int) else format(int(str(mode), 8), "o")


def _owner_spec(owner: str | None, group: str | None) -> str:
    return (owner or "") + (":" + group if group else "")


def file_change(
    path: str,
    content: str | bytes,
    state: FileState,
    *,
    mode: str | int = "0644",
    owner: str | None = None,
    group: str | None = None,
    sensitive: bool = False,
    notify: str | None = None,
    action: str = "file",
    validate: str | None = None,
) -> list[Change]:
    """Make `path` hold exactly `content` with mode/owner/group; [] when it already does."""
    if state.kind == "dir":
        raise HostFailed(f"{path} is a directory; remove it or choose another path")
    data = content.encode() if isinstance(content, str) else content
    want_mode = _mode(mode)
    reasons: list[str] = []
    if state.kind == "missing":
        reasons.append("created")
    else:
        if state.sha256 != hashlib.sha256(data).hexdigest():
            reasons.append("content")
        if state.mode is not None and _mode(state.mode) != want_mode:
            reasons.append(f"mode {state.mode}->{want_mode}")
        if owner and state.owner != owner:
            reasons.append(f"owner {state.owner}->{owner}")
        if group and state.group != group:
            reasons.append(f"group {state.group}->{group}")
    if not reasons:
        return []
    diff = ""
    if "content" in reasons or "created" in reasons:
        if sensitive:
            diff = f"--- {path}\n+++ {path}\n(content not shown: it holds secrets)\n"
        else:
            try:
                diff = "".join(
                    difflib.unified_diff(
                        (state.content or "").splitlines(keepends=True),
                        data.decode().splitlines(keepends=True),
                        fromfile=f"{path} (on host)",
                        tofile=f"{path} (wanted)",
                    )
                )
            except UnicodeDecodeError:
                diff = f"(binary file {path} differs)\n"
    tmp = posixpath.join(posixpath.dirname(path) or ".", f".{posixpath.basename(path)}.vfleet-tmp")
    chown = f" && chown -- {q(_owner_spec(owner, group))} {q(tmp)}" if owner or group else ""
    write = (
        f"set -e; mkdir -p -- {q(posixpath.dirname(path) or '.')}; umask 077; "
        f"base64 -d > {q(tmp)}; chmod {want_mode} {q(tmp)}{chown}"
    )
    if validate:
        prev = q(path + ".vfleet-prev")
        script = (
            f"{write}; if [ -f {q(path)} ]; then cp -p {q(path)} {prev}; else rm -f {prev}; fi; "
            f"mv -f {q(tmp)} {q(path)}; "
            f"if ! out=$( (umask 022; {validate}) 2>&1); then "
            f"if [ -f {prev} ]; then mv -f {prev} {q(path)}; else rm -f {q(path)}; fi; "
            f"echo \"$out\" >&2; echo 'rejected by {validate}; the previous file was put back' >&2; exit 3; fi; "
            f"rm -f {prev}"
        )
    else:
        script = f"{write}; mv -f {q(tmp)} {q(path)}"
    return [Change(action, path, ", ".join(reasons), script, base64.b64encode(data).decode(), diff, notify)]


def directory_change(path: str, state: FileState, *, mode: str | int = "0755") -> list[Change]:
    """Make sure a directory exists (parents too) with `mode`."""
    if state.kind == "file":
        raise HostFailed(f"{path} exists and is not a directory; move it away")
    want = _mode(mode)
    if state.kind == "dir" and (state.mode is None or _mode(state.mode) == want):
        return []
    reason = "created" if state.kind == "missing" else f"mode {state.mode}->{want}"
    return [Change("directory", path, reason, f"mkdir -p -- {q(path)} && chmod {want} -- {q(path)}")]


def symlink_change(path: str, target: str, current: str | None, *, notify: str | None = None) -> list[Change]:
    """Point `path` at `target`, atomically (ln to a temp name, rename over): readers see the
    old or the new target, never a missing link."""
    if current == "OTHER":
        raise HostFailed(f"{path} exists and is not a symlink; move it away")
    if current == target:
        return []
    tmp = q(path + ".vfleet-tmp")
    return [
        Change(
            "symlink",
            path,
            f"{current or '(none)'} -> {target}",
            f"ln -sfn -- {q(target)} {tmp} && mv -Tf -- {tmp} {q(path)}",
            notify=notify,
        )
    ]


def service_changes(unit: str, state: UnitState, *, enabled: bool = True, started: bool | None = True) -> list[Change]:
    """Enable (or disable) a unit and start (or stop) it; started=None leaves it as it is
    (a restart is a handler's job, not a state)."""
    out: list[Change] = []
    if enabled and state.enabled not in ("enabled", "static", "alias"):
        out.append(Change("service", unit, "enable", f"systemctl enable -- {q(unit)}"))
    if not enabled and state.enabled == "enabled":
        out.append(Change("service", unit, "disable", f"systemctl disable -- {q(unit)}"))
    if started is True and state.active != "active":
        out.append(
            Change(
                "service",
                unit,
                "start",
                f"systemctl reset-failed -- {q(unit)} 2>/dev/null; systemctl start -- {q(unit)}",
            )
        )
    if started is False and state.active in ("active", "activating", "reloading"):
        out.append(Change("service", unit, "stop", f"systemctl stop -- {q(unit)}"))
    return out


def daemon_reload() -> Change:
    return Change("systemd", "daemon-reload", "unit files changed", "systemctl daemon-reload")


def command(
    action: str,
    target: str,
    reason: str,
    script: str,
    *,
    stdin: str | None = None,
    timeout: float | None = None,
    notify: str | None = None,
) -> Change:
    """A change that is a command of its own (create a user, reload nginx)."""
    return Change(action, target, reason, script, stdin, notify=notify, timeout=timeout)


def apply(ctx: HostContext, changes: Iterable[Change]) -> list[StepResult]:
    """Run each change in order (under --check: record what would run). Each is recorded as
    changed; a failing one fails the host with its output's last lines."""
    out = []
    for ch in changes:
        if ctx.check:
            out.append(
                ctx.record(
                    ch.action, ch.target, Status.CHANGED, f"would change: {ch.reason}", diff=ch.diff, notify=ch.notify
                )
            )
            continue
        t0 = time.monotonic()
        r = ctx.run(ch.command, stdin=ch.stdin, timeout=ch.timeout)
        if r.timed_out:
            raise HostFailed(f"{ch.action} {ch.target}: timed out")
        if not r.ok:
            raise HostFailed(f"{ch.action} {ch.target} ({ch.reason}) failed: exit {r.exited}: {r.tail(3)}")
        out.append(
            ctx.record(
                ch.action,
                ch.target,
                Status.CHANGED,
                ch.reason,
                diff=ch.diff,
                elapsed_s=time.monotonic() - t0,
                notify=ch.notify,
            )
        )
    return out
