"""Idempotent operations, pyinfra/Ansible style: read the current state on the host, compare
with the wanted state, change only what differs, and under --check change nothing but say
what would change (with a unified diff under --diff).

Every operation records one StepResult on the host (ok / changed / skipped) and raises
HostFailed when it cannot do its job. File writes are atomic (temp file in the same
directory, then rename), so a service never reads a half-written unit or config."""
from __future__ import annotations

import base64
import difflib
import hashlib
import posixpath
import shlex
import time
from typing import Iterable

from fleet.results import Status, StepResult
from fleet.runner import HostContext, HostFailed

q = shlex.quote

MAX_DIFF_BYTES = 256 * 1024


def _norm_mode(mode: str | int | None) -> str | None:
    if mode is None:
        return None
    if isinstance(mode, int):
        return format(mode, "o")
    return format(int(str(mode), 8), "o")


def _stat_script(path: str) -> str:
    p = q(path)
    return (f"if [ -d {p} ] && [ ! -L {p} ]; then echo DIR; "
            f"elif [ -e {p} ]; then echo FILE; sha256sum < {p} | cut -d' ' -f1; stat -c '%a %U %G' {p}; "
            f"else echo MISSING; fi")


def _unified_diff(path: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        fromfile=f"{path} (on host)", tofile=f"{path} (wanted)"))


def put_file(ctx: HostContext, path: str, content: str | bytes, *, mode: str | int = "0644",
             owner: str | None = None, group: str | None = None, sensitive: bool = False,
             notify: str | Iterable[str] | None = None, action: str = "file") -> StepResult:
    """Make `path` hold exactly `content` with `mode`/`owner`/`group`.
    Compares sha256 on the host, so an unchanged file costs one round trip and no transfer.
    `sensitive` keeps the content out of diffs (environment files with API keys)."""
    started = time.monotonic()
    data = content.encode() if isinstance(content, str) else content
    want_hash = hashlib.sha256(data).hexdigest()
    want_mode = _norm_mode(mode)
    r = ctx.must(_stat_script(path), what=f"stat {path}")
    lines = r.stdout.split()
    kind = lines[0] if lines else "MISSING"
    if kind == "DIR":
        raise HostFailed(f"{path} is a directory; remove it or choose another path")
    reasons: list[str] = []
    if kind == "MISSING":
        reasons.append("created")
    else:
        have_hash, have_mode, have_owner, have_group = lines[1], lines[2], lines[3], lines[4]
        if have_hash != want_hash:
            reasons.append("content")
        if want_mode and _norm_mode(have_mode) != want_mode:
            reasons.append(f"mode {have_mode}->{want_mode}")
        if owner and have_owner != owner:
            reasons.append(f"owner {have_owner}->{owner}")
        if group and have_group != group:
            reasons.append(f"group {have_group}->{group}")
    if not reasons:
        return ctx.record(action, path, Status.OK, elapsed_s=time.monotonic() - started)

    diff = ""
    if ctx.diff and ("content" in reasons or "created" in reasons):
        if sensitive:
            diff = f"--- {path}\n+++ {path}\n(content not shown: it holds secrets)\n"
        else:
            old = ""
            if kind == "FILE":
                old = ctx.run(f"head -c {MAX_DIFF_BYTES} {q(path)}").stdout
            try:
                diff = _unified_diff(path, old, data.decode())
            except UnicodeDecodeError:
                diff = f"(binary file {path} differs)\n"
    message = ", ".join(reasons)
    if ctx.check:
        return ctx.record(action, path, Status.CHANGED, f"would change: {message}", diff=diff,
                          elapsed_s=time.monotonic() - started, notify=notify)

    tmp = posixpath.join(posixpath.dirname(path) or ".", f".{posixpath.basename(path)}.vfleet-tmp")
    chown = ""
    if owner or group:
        chown = f" && chown {q((owner or '') + (':' + group if group else ''))} {q(tmp)}"
    script = (f"set -e; mkdir -p {q(posixpath.dirname(path) or '.')}; umask 077; "
              f"base64 -d > {q(tmp)}; chmod {want_mode or '644'} {q(tmp)}{chown}; mv -f {q(tmp)} {q(path)}")
    w = ctx.run(script, stdin=base64.b64encode(data).decode())
    if not w.ok:
        ctx.run(f"rm -f {q(tmp)}")
        raise HostFailed(f"writing {path} failed: {w.tail()}")
    return ctx.record(action, path, Status.CHANGED, message, diff=diff,
                      elapsed_s=time.monotonic() - started, notify=notify)


def ensure_directory(ctx: HostContext, path: str, *, mode: str | int = "0755", owner: str | None = None,
                     group: str | None = None) -> StepResult:
    """Make sure a directory exists with mode and ownership (parents created as needed)."""
    started = time.monotonic()
    p = q(path)
    r = ctx.must(f"if [ -d {p} ]; then stat -c '%a %U %G' {p}; elif [ -e {p} ]; then echo NOTDIR; else echo MISSING; fi",
                 what=f"stat {path}")
    out = r.stdout.split()
    if out and out[0] == "NOTDIR":
        raise HostFailed(f"{path} exists and is not a directory; move it away")
    reasons = []
    want_mode = _norm_mode(mode)
    if out[0] == "MISSING":
        reasons.append("created")
    else:
        if want_mode and _norm_mode(out[0]) != want_mode:
            reasons.append(f"mode {out[0]}->{want_mode}")
        if owner and out[1] != owner:
            reasons.append(f"owner {out[1]}->{owner}")
        if group and out[2] != group:
            reasons.append(f"group {out[2]}->{group}")
    if not reasons:
        return ctx.record("directory", path, Status.OK, elapsed_s=time.monotonic() - started)
    if ctx.check:
        return ctx.record("directory", path, Status.CHANGED, "would change: " + ", ".join(reasons))
    cmd = f"mkdir -p {p} && chmod {want_mode} {p}"
    if owner or group:
        cmd += f" && chown {q((owner or '') + (':' + group if group else ''))} {p}"
    ctx.must(cmd, what=f"create directory {path}")
    return ctx.record("directory", path, Status.CHANGED, ", ".join(reasons), elapsed_s=time.monotonic() - started)


def ensure_symlink(ctx: HostContext, path: str, target: str, *, notify: str | Iterable[str] | None = None) -> StepResult:
    """Point `path` at `target`, switching atomically (ln to a temp name, then rename over),
    so readers see either the old or the new target, never a missing link."""
    started = time.monotonic()
    p = q(path)
    r = ctx.must(f"if [ -L {p} ]; then echo LINK; readlink {p}; elif [ -e {p} ]; then echo OTHER; else echo MISSING; fi",
                 what=f"readlink {path}")
    out = r.stdout.splitlines()
    if out and out[0] == "OTHER":
        raise HostFailed(f"{path} exists and is not a symlink; move it away")
    current = out[1] if len(out) > 1 and out[0] == "LINK" else None
    if current == target:
        return ctx.record("symlink", path, Status.OK, f"-> {target}", elapsed_s=time.monotonic() - started)
    message = f"{current or '(none)'} -> {target}"
    if ctx.check:
        return ctx.record("symlink", path, Status.CHANGED, f"would change: {message}", notify=notify)
    tmp = q(path + ".vfleet-tmp")
    ctx.must(f"ln -sfn {q(target)} {tmp} && mv -Tf {tmp} {p}", what=f"symlink {path}")
    return ctx.record("symlink", path, Status.CHANGED, message, elapsed_s=time.monotonic() - started, notify=notify)


def run_command(ctx: HostContext, command: str, *, name: str | None = None, creates: str | None = None,
                timeout: float | None = None, changed: bool = True,
                notify: str | Iterable[str] | None = None) -> StepResult:
    """Run a command. With `creates`, skip when that path exists (Ansible's `creates:`).
    Under --check nothing runs and the result is skipped with what would have run.
    changed=False marks read-only commands (reported ok)."""
    started = time.monotonic()
    label = name or command
    if creates:
        r = ctx.must(f"test -e {q(creates)} && echo yes || echo no", what=f"test {creates}")
        if r.stdout.strip() == "yes":
            return ctx.record("command", label, Status.OK, f"{creates} exists", elapsed_s=time.monotonic() - started)
    if ctx.check and changed:
        return ctx.record("command", label, Status.SKIPPED, "check mode: would run")
    r = ctx.run(command, timeout=timeout)
    elapsed = time.monotonic() - started
    data = {"stdout": r.stdout[-4000:], "stderr": r.stderr[-4000:], "rc": r.exited}
    if r.timed_out:
        raise HostFailed(f"{label}: timed out after {timeout or ctx.settings().command_timeout:g}s", data)
    if not r.ok:
        raise HostFailed(f"{label}: exit {r.exited}: {r.tail()}", data)
    return ctx.record("command", label, Status.CHANGED if changed else Status.OK, elapsed_s=elapsed,
                      data=data, notify=notify if changed else None)
