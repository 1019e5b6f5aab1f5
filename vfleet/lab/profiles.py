"""GPU profiles: directories of captured nvidia-smi outputs that a host's simulator replays.

A profile is named (a directory under vfleet/lab/profiles/) or given as a path. Installing it into
a host writes /etc/vfleet-lab/gpu/ and /usr/bin/nvidia-smi in the host's overlay; the
simulator reads the directory at every call, so a swap while the host runs is seen at once."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from vfleet.engine.errors import VfleetError

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
SIMULATOR = Path(__file__).resolve().parent / "nvidia_smi.py"
# the simulator's table of valid --query-gpu fields, installed into each host's profile directory
SIMULATOR_FIELDS = Path(__file__).resolve().parent / "nvidia_smi_fields.txt"
DEFAULT_PROFILE = "h200-1"
GUEST_PROFILE_DIR = "etc/vfleet-lab/gpu"
GUEST_NVIDIA_SMI = "usr/bin/nvidia-smi"
CONTRACT_FILES = (
    "nvidia-smi.txt",
    "query-gpu.csv",
    "topo.txt",
    "smi-q.xml",
    "smi-q.txt",
    "lab-profile.json",
    "README.md",
)
REQUIRED_FILES = ("nvidia-smi.txt", "query-gpu.csv", "topo.txt")


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    mode: str  # "replay" | "fail" | "absent"


def available() -> list[str]:
    return sorted(p.name for p in PROFILES_DIR.iterdir() if p.is_dir())


def resolve(spec: str) -> Profile:
    """A profile name (vfleet/lab/profiles/<name>) or a directory path -> validated Profile."""
    path = Path(spec)
    if "/" not in spec and not path.is_dir():
        path = PROFILES_DIR / spec
    if not path.is_dir():
        raise VfleetError(
            f"lab: GPU profile {spec!r} not found (neither {PROFILES_DIR}/{spec} "
            f"nor a directory); fix: use one of {', '.join(available())} or a "
            "directory with nvidia-smi.txt, query-gpu.csv, topo.txt"
        )
    path = path.resolve()
    meta_file = path / "lab-profile.json"
    try:
        meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    except ValueError as exc:
        raise VfleetError(f"lab: {meta_file} is not valid JSON ({exc}); fix the file") from exc
    mode = meta.get("nvidia_smi", "replay")
    if mode == "replay":
        missing = [f for f in REQUIRED_FILES if not (path / f).is_file()]
        if missing:
            raise VfleetError(
                f"lab: GPU profile {path} lacks {', '.join(missing)}; fix: capture "
                "them on a real host (see vfleet/lab/README.md) or pick another profile"
            )
    elif mode not in ("fail", "absent"):
        raise VfleetError(f'lab: {meta_file}: nvidia_smi={mode!r} unknown; fix: use "replay", "fail" or "absent"')
    return Profile(name=path.name, path=path, mode=mode)


def install(profile: Profile, root: Path) -> None:
    """Put `profile` into the host rooted at `root` (an overlay, running or not)."""
    target = root / GUEST_PROFILE_DIR
    smi = root / GUEST_NVIDIA_SMI
    staging = target.with_name("gpu.new")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for name in CONTRACT_FILES:
        if (profile.path / name).is_file():
            shutil.copyfile(profile.path / name, staging / name)
    shutil.copyfile(SIMULATOR_FIELDS, staging / "help-query-gpu.txt")
    (staging / "PROFILE").write_text(profile.name + "\n")
    old = target.with_name("gpu.old")
    if target.exists():
        if old.exists():
            shutil.rmtree(old)
        target.rename(old)
    staging.rename(target)
    if old.exists():
        shutil.rmtree(old)
    if profile.mode == "absent":
        if smi.exists() or smi.is_symlink():
            smi.unlink()
        return
    tmp = smi.with_name(".nvidia-smi.tmp")
    shutil.copyfile(SIMULATOR, tmp)
    tmp.chmod(0o755)
    tmp.replace(smi)
