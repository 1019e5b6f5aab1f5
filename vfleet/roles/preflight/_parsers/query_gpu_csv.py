"""`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.

Why this parser is fussy: the header carries units (`memory.total [MiB]`) unless `nounits`, values
may carry them too (`143771 MiB`), unsupported values print as `[N/A]` / `[Not Supported]` (they
mean *unknown*, never 0), and R470 drivers reject the `compute_cap` field outright.
"""

from __future__ import annotations

import re
from typing import Any

# The field list of the GPU profile layout (docs/architecture.md); the gather script asks for exactly this
# so the raw output can be written as the snapshot's query-gpu.csv verbatim.
FIELDS: list[str] = [
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "memory.used",
    "compute_cap",
    "persistence_mode",
    "ecc.errors.uncorrected.volatile.total",
    "power.limit",
    "temperature.gpu",
    "clocks.max.sm",
]
FIELDS_NO_CC: list[str] = [f for f in FIELDS if f != "compute_cap"]

UNKNOWN = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]", ""}
INVALID_FIELD_RE = re.compile(r'Field "([^"]+)" is not a valid field to query')


def invalid_field(output: str) -> str | None:
    """The field name an old driver refused (R470: compute_cap), else None."""
    m = INVALID_FIELD_RE.search(output or "")
    return m.group(1) if m else None


def _clean(value: str) -> str | None:
    v = value.strip()
    return None if v.lower() in UNKNOWN else v


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    m = re.match(r"\s*(-?\d+(?:\.\d+)?)", value)
    return float(m.group(1)) if m else None


def _int(value: str | None) -> int | None:
    n = _number(value)
    return None if n is None else int(n)


def _header_name(col: str) -> str:
    """'memory.total [MiB]' -> 'memory.total'."""
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", col.strip())


def parse_rows(output: str, fields: list[str] | None = None) -> list[dict[str, str | None]]:
    """Rows as {field: raw value or None}. With a header the CSV describes itself; without one
    (`noheader`) the caller must pass the field list it asked for."""
    lines = [ln for ln in (output or "").splitlines() if ln.strip()]
    if not lines or invalid_field(output):
        return []
    header = [_header_name(c) for c in lines[0].split(",")]
    if all(c in FIELDS for c in header):
        fields, lines = header, lines[1:]
    elif fields is None:
        return []  # not a CSV we asked for (an error text): no GPUs known from it
    rows = []
    for ln in lines:
        # GPU names never contain ", " but may contain commas in theory; split on the separator
        # nvidia-smi actually prints and let the last column absorb any excess.
        parts = [p for p in re.split(r",\s*", ln.strip(), maxsplit=len(fields) - 1)]
        if len(parts) < len(fields):
            continue
        rows.append({f: _clean(p) for f, p in zip(fields, parts)})
    return rows


def _persistence(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("enabled", "on")


def parse(output: str, fields: list[str] | None = None) -> list[dict[str, Any]]:
    """GPUs as dicts: index, name, uuid, bus_id, driver_version, memory_total_mib, memory_used_mib,
    compute_capability ("7.0" or None when unknown), persistence_mode, ecc_uncorrected,
    power_limit_w, temperature_c, clocks_max_sm_mhz."""
    gpus = []
    for r in parse_rows(output, fields):
        gpus.append(
            {
                "index": _int(r.get("index")),
                "name": r.get("name"),
                "uuid": r.get("uuid"),
                "bus_id": r.get("pci.bus_id"),
                "driver_version": r.get("driver_version"),
                "memory_total_mib": _int(r.get("memory.total")),
                "memory_used_mib": _int(r.get("memory.used")),
                "compute_capability": r.get("compute_cap"),
                "persistence_mode": _persistence(r.get("persistence_mode")),
                "ecc_uncorrected": _int(r.get("ecc.errors.uncorrected.volatile.total")),
                "power_limit_w": _number(r.get("power.limit")),
                "temperature_c": _int(r.get("temperature.gpu")),
                "clocks_max_sm_mhz": _int(r.get("clocks.max.sm")),
            }
        )
    return gpus
