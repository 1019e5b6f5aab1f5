"""Thin wrappers over the system commands the lab drives (ip, mount, ssh-keygen).

WHY a wrapper: every failure must reach the operator as one actionable line naming the
command and its stderr, not as a CalledProcessError traceback from deep inside `up`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from vfleet.engine.errors import VfleetError


def run(cmd: list[str], *, check: bool = True, fix: str = "", timeout: float = 60) -> str:
    """Run `cmd`, return stdout; on failure raise VfleetError with what/where/fix."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise VfleetError(
            f"lab: `{cmd[0]}` not found on this machine; fix: install the packages listed in vfleet/lab/README.md"
        ) from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise VfleetError(
            f"lab: `{' '.join(cmd)}` failed (exit {proc.returncode}): "
            f"{detail[-1] if detail else 'no output'}" + (f"; fix: {fix}" if fix else "")
        )
    return proc.stdout


def require_root() -> None:
    """The lab creates namespaces, mounts and bridges: only root may."""
    if os.geteuid() != 0:
        raise VfleetError("lab: needs root (namespaces, mounts, bridge); fix: run as root")


def mountpoints() -> list[str]:
    """Mount points of this mount namespace, in mount order (octal escapes decoded)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        raw = line.split()[4]
        points.append(raw.encode().decode("unicode_escape"))
    return points


def is_mountpoint(path: Path | str) -> bool:
    return str(path) in mountpoints()


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a zombie has exited; only its parent
    can reap it, which may be a process that is long gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    for line in status.splitlines():
        if line.startswith("State:"):
            return "Z" not in line.split()[1]
    return True


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def try_run(cmd: list[str], timeout: float = 60) -> bool:
    """Run `cmd` for its effect; True when it exited 0 (cleanup paths that must go on)."""
    try:
        return subprocess.run(cmd, capture_output=True, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def raise_sysctl(name: str, floor: int) -> int | None:
    """Raise /proc/sys/<name> to at least `floor`; returns the old value if it was raised.

    WHY: all lab hosts run as the machine's root (no user namespaces), so every host's
    systemd, journald, logind and user manager share root's inotify instance limit
    (fs.inotify.max_user_instances, 128 by default): past ~15 hosts user@0.service fails
    with "Too many open files" and hosts come up degraded."""
    path = Path("/proc/sys") / name
    old = int(path.read_text().split()[0])
    if old >= floor:
        return None
    path.write_text(f"{floor}\n")
    return old


def restore_sysctl(name: str, old: int, ours: int) -> None:
    """Put back `old` unless someone changed the value since the lab set it to `ours`."""
    path = Path("/proc/sys") / name
    if int(path.read_text().split()[0]) == ours:
        path.write_text(f"{old}\n")


def swap_into_place(tmp: Path, dest: Path) -> None:
    """Replace folder `dest` with the finished folder `tmp`: the old one is moved aside and
    removed only after the new one is in place, so a reader never finds neither, and a killed
    build never leaves a half folder under the real name."""
    import shutil

    if dest.exists():
        old = dest.parent / f".{dest.name}.old-{os.getpid()}"
        dest.rename(old)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(dest)
