"""Parsers of what the status probes print (vfleet/roles/status/_probes.py): pure functions of
text, tested from captured outputs (tests/unit/data/status/) without a host."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import Any

from vfleet.roles.preflight import parse_rows

__all__ = [
    "UnitState",
    "key_values",
    "unit_state",
    "journal_counts",
    "installed",
    "link_target",
    "weights_version",
    "gpus",
    "backend_codes",
    "drained",
    "FileHashes",
    "file_hashes",
    "STARTED",
    "PROCESS_EXIT",
    "RESTART_SCHEDULED",
    "GPU_MEMORY_FIELDS",
    "GPU_UTIL_FIELDS",
    "MARKER_LIMIT",
]

# systemd's journal message ids (src/systemd/sd-messages.h; the catalog's subjects quoted):
STARTED = "39f53479d3a045ac8e11786248231fbf"  # "A start job for unit @UNIT@ has finished successfully"
PROCESS_EXIT = "98e322203f7a4ed290d09fe03c09fe15"  # "Unit process exited"
RESTART_SCHEDULED = "5eb03494b6584870a536b337290809b3"  # "Automatic restarting of a unit has been scheduled"

GPU_MEMORY_FIELDS = ["index", "memory.used", "memory.total"]
GPU_UTIL_FIELDS = ["index", "utilization.gpu"]
MARKER_LIMIT = 64 * 1024  # the install marker is a few hundred bytes; more is not ours


def key_values(text: str) -> dict[str, str]:
    """`KEY=VALUE` lines (systemctl show, the probes' own lines); the first `=` splits."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class UnitState:
    """A unit as systemctl shows it; `since` is epoch seconds of its last state change."""

    load: str
    active: str
    sub: str
    enabled: str
    n_restarts: int | None
    since: int | None
    now: int | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _int(value: str | None) -> int | None:
    return int(value) if value and value.strip().lstrip("-").isdigit() else None


def unit_state(text: str) -> UnitState:
    kv = key_values(text)
    return UnitState(
        load=kv.get("LoadState") or "unknown",
        active=kv.get("ActiveState") or "unknown",
        sub=kv.get("SubState") or "",
        enabled=kv.get("UnitFileState") or "",
        n_restarts=_int(kv.get("NRestarts")),
        since=_int(kv.get("StateChangeEpoch")),
        now=_int(kv.get("Now")),
    )


def journal_counts(text: str) -> dict[str, int]:
    """Starts, exits of the main process and scheduled automatic restarts among the
    MESSAGE_ID lines of `journalctl -o cat --output-fields=MESSAGE_ID`."""
    ids = [line.strip() for line in text.splitlines()]
    return {
        "starts": ids.count(STARTED),
        "exits": ids.count(PROCESS_EXIT),
        "auto_restarts": ids.count(RESTART_SCHEDULED),
    }


def link_target(text: str) -> str | None:
    """readlink's answer: the target, None when nothing (no link)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line or None


def installed(text: str) -> dict[str, Any]:
    """`venv=<current link target>` then the venv's install marker (JSON written by the
    install role after `import vllm` printed the version): {"venv", "vllm_version"}."""
    head, _, marker = text.partition("\n")
    venv = key_values(head).get("venv") or None
    version = None
    if marker.strip() and len(marker) <= MARKER_LIMIT:
        try:
            verified = json.loads(marker).get("verified") or {}
            version = str(verified["version"]) if verified.get("version") else None
        except (ValueError, AttributeError, TypeError):
            version = None
    return {"venv": venv, "vllm_version": version}


def _number(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def gpus(memory_csv: str, util_csv: str) -> list[dict[str, Any]]:
    """Per GPU index: memory used and total (MiB) and utilisation (%), None where unknown
    (nvidia-smi's [N/A], or a query the driver refused)."""
    util = {r["index"]: _number(r.get("utilization.gpu")) for r in parse_rows(util_csv, GPU_UTIL_FIELDS)}
    out = []
    for r in parse_rows(memory_csv, GPU_MEMORY_FIELDS):
        out.append(
            {
                "index": r["index"],
                "memory_used_mib": _number(r.get("memory.used")),
                "memory_total_mib": _number(r.get("memory.total")),
                "util_pct": util.get(r["index"]),
            }
        )
    return out


def backend_codes(text: str) -> dict[str, int | None]:
    """`<host> <http status>` per backend (curl's %{http_code}: 000 when nothing answered)."""
    out: dict[str, int | None] = {}
    for line in text.splitlines():
        name, _, code = line.strip().partition(" ")
        if name:
            out[name] = int(code) if code.isdigit() and int(code) > 0 else None
    return out


def drained(text: str) -> list[str]:
    """The gateway's drained-hosts state file: one name a line."""
    return sorted({line.strip() for line in text.splitlines() if line.strip()})


@dataclass(frozen=True)
class FileHashes:
    """What the drift probe returns: systemd's version, and each file's sha256, or
    'missing' / 'unreadable'."""

    systemd: int | None
    unit: str
    env: str


def file_hashes(text: str) -> FileHashes:
    kv = key_values(text)
    words = (kv.get("systemd") or "").split()
    version = int(words[1]) if len(words) > 1 and words[1].isdigit() else None
    return FileHashes(version, kv.get("unit") or "unreadable", kv.get("env") or "unreadable")


def weights_version(target: str | None) -> str | None:
    """The verified copy the model link points at (<model>-<manifest id>), by its folder name."""
    return posixpath.basename(target.rstrip("/")) if target else None
