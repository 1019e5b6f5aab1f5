"""Single operations for steps that need just one: gather the one fact, plan, apply.

Each records one StepResult (ok when nothing differed, else what `apply` recorded) and raises
HostFailed when it cannot do its job. Steps that touch several things gather their facts
together (vfleet.engine.facts.gather) and apply their planned changes in one go instead."""

from __future__ import annotations

import time

from vfleet.engine.changes import apply, directory_change, file_change, symlink_change
from vfleet.engine.facts import FileFact, LinkFact, gather
from vfleet.engine.results import Status, StepResult
from vfleet.engine.runner import HostContext, HostFailed

__all__ = ["put_file", "ensure_directory", "ensure_symlink", "run_command"]


def _one(ctx: HostContext, action: str, target: str, changes: list, message: str = "") -> StepResult:
    if not changes:
        return ctx.record(action, target, Status.OK, message)
    return apply(ctx, changes)[-1]


def put_file(
    ctx: HostContext,
    path: str,
    content: str | bytes,
    *,
    mode: str | int = "0644",
    owner: str | None = None,
    group: str | None = None,
    sensitive: bool = False,
    notify: str | None = None,
    action: str = "file",
) -> StepResult:
    """Make `path` hold exactly `content` (sha256 compared on the host: an unchanged file
    costs one round trip and no transfer). `sensitive` keeps the content out of diffs."""
    state = gather(ctx, {"f": FileFact(path, with_content=ctx.diff and not sensitive)})["f"]
    return _one(
        ctx,
        action,
        path,
        file_change(
            path, content, state, mode=mode, owner=owner, group=group, sensitive=sensitive, notify=notify, action=action
        ),
    )


def ensure_directory(ctx: HostContext, path: str, *, mode: str | int = "0755") -> StepResult:
    """Make sure a directory exists with `mode` (parents created as needed)."""
    state = gather(ctx, {"d": FileFact(path)})["d"]
    return _one(ctx, "directory", path, directory_change(path, state, mode=mode))


def ensure_symlink(ctx: HostContext, path: str, target: str, *, notify: str | None = None) -> StepResult:
    """Point `path` at `target`, switching atomically."""
    current = gather(ctx, {"l": LinkFact(path)})["l"]
    return _one(ctx, "symlink", path, symlink_change(path, target, current, notify=notify), f"-> {target}")


def run_command(ctx: HostContext, command: str, *, name: str | None = None, timeout: float | None = None) -> StepResult:
    """Run a command that changes something (skipped under --check), failing the host with
    its output when it fails."""
    label = name or command
    if ctx.check:
        return ctx.record("command", label, Status.SKIPPED, "check mode: would run")
    started = time.monotonic()
    r = ctx.run(command, timeout=timeout)
    data = {"stdout": r.stdout[-4000:], "stderr": r.stderr[-4000:], "rc": r.exited}
    if r.timed_out:
        raise HostFailed(f"{label}: timed out after {timeout or ctx.settings().command_timeout:g}s", data)
    if not r.ok:
        raise HostFailed(f"{label}: exit {r.exited}: {r.tail()}", data)
    return ctx.record("command", label, Status.CHANGED, elapsed_s=time.monotonic() - started, data=data)
