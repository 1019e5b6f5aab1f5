"""A cgroup subtree per host, so hosts do not share each other's units.

WHY: systemd-nspawn with --keep-unit and no systemd on the machine creates its
`supervisor` and `payload` cgroups under its own cgroup; started from the machine's root
cgroup, every host got the SAME /payload, and its systemd put e.g.
/payload/system.slice/ssh.service in one directory shared by all hosts. Units then failed
at random with status=219/CGROUP, "Failed to kill control group ... Input/output error",
and a stop on one host could wait on another host's processes. Starting each nspawn in
/vfleet-lab/<host> of the hierarchies systemd uses gives each host its own tree.

The host's cpuset group holds it to its CPUs (vfleet/lab/cpus.py says which and why): a
process inside cannot widen its affinity past them, as it could a plain CPU affinity."""

from __future__ import annotations

import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
# The hierarchies systemd (252, hybrid mode) manages units in; others stay shared.
HIERARCHIES = ("systemd", "unified")
# cgroup v1's cpuset controller (hybrid mode); on a pure cgroup2 machine the unified tree has it.
CPUSET_V1 = CGROUP_ROOT / "cpuset"
LAB_GROUP = "vfleet-lab"


def cpuset_root() -> Path | None:
    """The hierarchy whose cpuset.cpus binds a group, or None where neither v1 nor v2 has one."""
    if (CPUSET_V1 / "cpuset.cpus").is_file():
        return CPUSET_V1
    controllers = CGROUP_ROOT / "cgroup.controllers"
    if controllers.is_file() and "cpuset" in controllers.read_text().split():
        return CGROUP_ROOT
    return None


def host_dirs(name: str) -> list[Path]:
    """/sys/fs/cgroup/<hierarchy>/vfleet-lab/<name> for each hierarchy mounted here, and the
    cpuset one."""
    dirs = []
    for h in HIERARCHIES:
        base = CGROUP_ROOT / h
        if (base / "cgroup.procs").is_file():
            dirs.append(base / LAB_GROUP / name)
    if not dirs and (CGROUP_ROOT / "cgroup.procs").is_file():  # pure cgroup2 machine
        dirs.append(CGROUP_ROOT / LAB_GROUP / name)
    cpuset = cpuset_root()
    if cpuset is not None and cpuset / LAB_GROUP / name not in dirs:
        dirs.append(cpuset / LAB_GROUP / name)
    return dirs


def prepare(name: str, cpus: str) -> list[Path]:
    """Create the host's cgroups, its cpuset holding `cpus` (a cpulist such as '1' or '0-1');
    returns the directories the host's nspawn must join."""
    dirs = host_dirs(name)
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    bind(name, cpus)
    return dirs


def bind(name: str, cpus: str) -> bool:
    """Hold host `name` (running or about to start) to `cpus`; a running host's processes
    move at once. False where this machine has no cpuset controller."""
    root = cpuset_root()
    if root is None:
        return False
    group, host = root / LAB_GROUP, root / LAB_GROUP / name
    host.mkdir(parents=True, exist_ok=True)
    if root == CPUSET_V1:
        # v1: a group's CPUs and memory nodes must be set before a process may join it
        for key in ("cpuset.cpus", "cpuset.mems"):
            if not (group / key).read_text().strip():
                (group / key).write_text((root / key).read_text())
        if not (host / "cpuset.mems").read_text().strip():
            (host / "cpuset.mems").write_text((group / "cpuset.mems").read_text())
    else:
        for parent in (root, group):
            (parent / "cgroup.subtree_control").write_text("+cpuset")
    (host / "cpuset.cpus").write_text(cpus)
    return True


def bound_cpus(name: str) -> str:
    """The cpulist host `name`'s cpuset holds it to ('' without one)."""
    root = cpuset_root()
    path = root / LAB_GROUP / name / "cpuset.cpus" if root else None
    return path.read_text().strip() if path and path.is_file() else ""


def leftover_dirs() -> list[Path]:
    """Every cgroup directory under the lab's groups, deepest first."""
    found: list[Path] = []
    bases = [CGROUP_ROOT / h / LAB_GROUP for h in HIERARCHIES] + [CGROUP_ROOT / LAB_GROUP, CPUSET_V1 / LAB_GROUP]
    for base in bases:
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
