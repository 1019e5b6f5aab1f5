"""A cgroup subtree per host, so hosts do not share each other's units.

WHY: systemd-nspawn with --keep-unit and no systemd on the machine creates its
`supervisor` and `payload` cgroups under its own cgroup; started from the machine's root
cgroup, every host got the SAME /payload, and its systemd put e.g.
/payload/system.slice/ssh.service in one directory shared by all hosts. Units then failed
at random with status=219/CGROUP, "Failed to kill control group ... Input/output error",
and a stop on one host could wait on another host's processes. Starting each nspawn in
/vfleet-lab/<host> of the hierarchies systemd uses gives each host its own tree."""
from __future__ import annotations

import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
# The hierarchies systemd (252, hybrid mode) manages units in; others stay shared.
HIERARCHIES = ("systemd", "unified")
LAB_GROUP = "vfleet-lab"


def host_dirs(name: str) -> list[Path]:
    """/sys/fs/cgroup/<hierarchy>/vfleet-lab/<name> for each hierarchy mounted here."""
    dirs = []
    for h in HIERARCHIES:
        base = CGROUP_ROOT / h
        if (base / "cgroup.procs").is_file():
            dirs.append(base / LAB_GROUP / name)
    if not dirs and (CGROUP_ROOT / "cgroup.procs").is_file():  # pure cgroup2 machine
        dirs.append(CGROUP_ROOT / LAB_GROUP / name)
    return dirs


def prepare(name: str) -> list[Path]:
    """Create the host's cgroups; returns the directories the host's nspawn must join."""
    dirs = host_dirs(name)
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    return dirs


def leftover_dirs() -> list[Path]:
    """Every cgroup directory under the lab's groups, deepest first."""
    found: list[Path] = []
    for base in [CGROUP_ROOT / h / LAB_GROUP for h in HIERARCHIES] + [CGROUP_ROOT / LAB_GROUP]:
        if base.is_dir():
            found += [Path(root) for root, _dirs, _files in os.walk(base, topdown=False)]
    return found


def remove(dirs: list[Path] | None = None) -> list[Path]:
    """rmdir the lab's cgroups (only empty ones can go); returns those that stayed."""
    for d in dirs if dirs is not None else leftover_dirs():
        try:
            d.rmdir()
        except OSError:
            pass
    return [d for d in (dirs if dirs is not None else leftover_dirs()) if d.is_dir()]


def pids_in(name: str) -> list[int]:
    """Processes still in a host's cgroups (what a killed nspawn left behind)."""
    pids: set[int] = set()
    for d in host_dirs(name):
        if d.is_dir():
            for root, _dirs, files in os.walk(d):
                if "cgroup.procs" in files:
                    text = (Path(root) / "cgroup.procs").read_text()
                    pids.update(int(p) for p in text.split())
    return sorted(pids)
