"""Plain `nvidia-smi` output: the driver version, the CUDA version the *driver* supports (not an
installed toolkit), the GPU rows; and the two failure modes a preflight must name: no driver
installed (`nvidia-smi: not found`) and a driver that is installed but not loaded/working.
"""

from __future__ import annotations

import re
from typing import Any

HEADER_RE = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\S+)\s+Driver Version:\s*(?P<driver>\S+)(?:\s+CUDA Version:\s*(?P<cuda>[\w.]+))?"
)
GPU_ROW_RE = re.compile(
    r"^\|\s*(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<pm>On|Off)\s*\|\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
    r"[0-9A-Fa-f]{2}\.[0-7])\s+(?P<disp>\S+)\s*\|\s*(?P<ecc>[^|]*?)\s*\|"
)
MEM_RE = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
BROKEN_RE = re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver", re.I)
NOT_FOUND_RE = re.compile(r"nvidia-smi: (?:command )?not found|nvidia-smi: No such file", re.I)
NO_DEVICES_RE = re.compile(r"No devices were found", re.I)


def state(output: str, rc: int | None = 0) -> str:
    """'ok' | 'no-driver' (nvidia-smi missing) | 'broken-driver' (cannot talk to the driver) |
    'no-gpus' (driver fine, no device)."""
    text = output or ""
    if rc == 127 or NOT_FOUND_RE.search(text):
        return "no-driver"
    if BROKEN_RE.search(text):
        return "broken-driver"
    if NO_DEVICES_RE.search(text):
        return "no-gpus"
    if not HEADER_RE.search(text):
        return "broken-driver" if (rc or 0) != 0 else "no-driver"
    return "ok"


def _unknown(v: str | None) -> str | None:
    return None if v is None or v.strip() in ("N/A", "[N/A]", "") else v.strip()


def parse(output: str, rc: int | None = 0) -> dict[str, Any]:
    """{state, smi_version, driver_version, cuda_version, gpus: [{index, name, persistence_mode,
    bus_id, ecc_uncorrected, memory_total_mib, memory_used_mib}]}."""
    st = state(output, rc)
    result: dict[str, Any] = {
        "state": st,
        "smi_version": None,
        "driver_version": None,
        "cuda_version": None,
        "gpus": [],
    }
    if st not in ("ok", "no-gpus"):
        return result
    m = HEADER_RE.search(output)
    if m:
        result.update(
            smi_version=m.group("smi"), driver_version=m.group("driver"), cuda_version=_unknown(m.group("cuda"))
        )
    lines = output.splitlines()
    for i, ln in enumerate(lines):
        g = GPU_ROW_RE.match(ln)
        if not g:
            continue
        mem = MEM_RE.search(lines[i + 1]) if i + 1 < len(lines) else None
        ecc = _unknown(g.group("ecc"))
        result["gpus"].append(
            {
                "index": int(g.group("index")),
                "name": g.group("name").strip(),
                "persistence_mode": g.group("pm") == "On",
                "bus_id": g.group("bus"),
                "ecc_uncorrected": int(ecc) if ecc and ecc.isdigit() else None,
                "memory_used_mib": int(mem.group(1)) if mem else None,
                "memory_total_mib": int(mem.group(2)) if mem else None,
            }
        )
    return result
