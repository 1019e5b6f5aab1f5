"""Each host's root filesystem: an overlay of the machine's own `/` with its writes on tmpfs.

WHY: booting `/` itself is refused and `--volatile` fails here (shared/reference/
lab-recipe.md); an overlay makes a host a copy of this machine's installed software that
costs only what it writes, and the tmpfs makes `down` a plain unmount."""

from __future__ import annotations

from pathlib import Path

from vfleet.lab.system import is_mountpoint, mountpoints, run, try_run

NSPAWN_RUN = Path("/run/systemd/nspawn")


def ensure_nspawn_tmpfs() -> bool:
    """Mount a tmpfs on /run/systemd/nspawn (nspawn refuses to clean its propagation dir on
    a disk filesystem). Returns True when this call mounted it."""
    if is_mountpoint(NSPAWN_RUN):
        return False
    NSPAWN_RUN.mkdir(parents=True, exist_ok=True)
    run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=16m", "vfleet-lab-nspawn", str(NSPAWN_RUN)])
    return True


def release_nspawn_tmpfs() -> None:
    """Unmount /run/systemd/nspawn only if the lab mounted it (its source says so)."""
    if str(NSPAWN_RUN) in lab_mounts():
        try_run(["umount", str(NSPAWN_RUN)]) or try_run(["umount", "-l", str(NSPAWN_RUN)])


def mount_overlay(host_dir: Path, backing: str = "tmpfs", tmpfs_size: str = "8g") -> Path:
    """Overlay (lower=/) at <host_dir>/root with its upper+work dirs in <host_dir>/disk;
    idempotent. backing="tmpfs": writes cost RAM (bounded by tmpfs_size), nothing survives
    `down`; backing="disk": writes go to the state dir's filesystem, for hosts that install
    big trees (a vLLM venv is ~2-3 GB per host)."""
    if backing not in ("tmpfs", "disk"):
        raise ValueError(f"backing must be tmpfs or disk, not {backing!r}")
    disk, root = host_dir / "disk", host_dir / "root"
    disk.mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    if backing == "tmpfs" and not is_mountpoint(disk):
        run(["mount", "-t", "tmpfs", "-o", f"mode=0755,size={tmpfs_size}", "vfleet-lab", str(disk)])
    if not is_mountpoint(root):
        (disk / "upper").mkdir(exist_ok=True)
        (disk / "work").mkdir(exist_ok=True)
        run(
            [
                "mount",
                "-t",
                "overlay",
                "vfleet-lab",
                "-o",
                f"lowerdir=/,upperdir={disk / 'upper'},workdir={disk / 'work'}",
                str(root),
            ]
        )
    return root


# The lab names its mounts' source so that `down` finds them after a crash, state or not.
MOUNT_SOURCES = ("vfleet-lab", "vfleet-lab-nspawn")


def lab_mounts() -> list[str]:
    """Mount points whose source is one of the lab's (found without the state dir), deepest
    (last mounted) first."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        tail = fields[fields.index("-") + 1 :]
        if len(tail) >= 2 and tail[1] in MOUNT_SOURCES:
            found.append(fields[4].encode().decode("unicode_escape"))
    return list(reversed(found))


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below `path`, deepest (last mounted) first: the unmount order."""
    prefix = str(path).rstrip("/") + "/"
    found = [m for m in mountpoints() if m == str(path) or m.startswith(prefix)]
    return list(reversed(found))


def unmount(points: list[str]) -> None:
    """Unmount each point (deepest first); lazily when busy."""
    for point in points:
        try_run(["umount", point], timeout=30) or try_run(["umount", "-l", point])


def unmount_tree(path: Path) -> list[str]:
    """Unmount everything under `path`. Returns what stayed mounted."""
    unmount(mounts_under(path))
    return mounts_under(path)
