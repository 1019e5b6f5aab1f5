"""vLLM / CUDA / GPU facts, read from roles/data/vllm_facts.yaml.

Why a data file: these facts change with every vLLM release, and each one has to be traceable to
where it came from. The code below only looks rows up; every row in the YAML carries `source:`.
Other roles (the unit renderer, the upgrade audit) use `flags_supported` / `flag_available` so
that only flags the pinned version accepts end up on the command line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

DATA_FILE = Path(__file__).parent / "data" / "vllm_facts.yaml"


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    """The whole table set (cached; the file is small and read-only at run time)."""
    with open(DATA_FILE, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


# --- versions ---------------------------------------------------------------------------------

def parse_version(v: str | None) -> tuple[int, ...] | None:
    """'0.10.2' -> (0, 10, 2); '0.5.4.post1' / '0.11.0rc1' / '0.32.0+cpu' -> leading numbers.

    Tolerant on purpose: versions come from pip metadata and hand-written inventories."""
    if v is None:
        return None
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(v))
    if not m:
        return None
    parts = tuple(int(x) for x in m.group(1).split("."))
    return parts + (0,) * (3 - len(parts)) if len(parts) < 3 else parts


def version_ge(a: str | None, b: str | None) -> bool:
    """a >= b on numeric prefixes; False when either is unknown."""
    pa, pb = parse_version(a), parse_version(b)
    if pa is None or pb is None:
        return False
    n = max(len(pa), len(pb))
    return pa + (0,) * (n - len(pa)) >= pb + (0,) * (n - len(pb))


def cc_tuple(cc: str | None) -> tuple[int, int] | None:
    """'7.0' -> (7, 0). Compute capabilities compare as (major, minor)."""
    if not cc:
        return None
    m = re.match(r"\s*(\d+)\.(\d+)", str(cc))
    return (int(m.group(1)), int(m.group(2))) if m else None


# --- GPUs -------------------------------------------------------------------------------------

def gpu_info(name: str | None) -> dict[str, Any] | None:
    """The GPU table row whose `match` regex is found in an nvidia-smi GPU name, else None."""
    if not name:
        return None
    for row in data()["gpus"]:
        if re.search(row["match"], name, re.IGNORECASE):
            return row
    return None


def cc_for_name(name: str | None) -> str | None:
    """Compute capability from the GPU name: the fallback when the driver (R470) cannot be asked
    for `compute_cap`."""
    row = gpu_info(name)
    return row["cc"] if row else None


def gpu_lacks(name: str | None) -> list[str]:
    row = gpu_info(name)
    return list(row["lacks"]) if row else []


def dtype_requirement(dtype: str | None) -> dict[str, Any] | None:
    """The requirement row for a dtype ('bfloat16', 'bf16'), or None if the dtype needs nothing."""
    if not dtype:
        return None
    for row in data()["dtype_requirements"]:
        if str(dtype).lower() in row["aliases"]:
            return row
    return None


def quantization_requirement(quant: str | None) -> dict[str, Any] | None:
    if not quant:
        return None
    for row in data()["quantization_requirements"]:
        if str(quant).lower() == row["quantization"]:
            return row
    return None


# --- drivers and releases ---------------------------------------------------------------------

def min_driver_for_cuda(cuda: str | None) -> str | None:
    """Exact minimum Linux driver for a CUDA X.Y (None if the table lacks that CUDA)."""
    for row in data()["cuda_driver"]:
        if cuda is not None and parse_version(row["cuda"])[:2] == (parse_version(cuda) or ())[:2]:
            return row["min_driver"]
    return None


def max_cuda_for_driver(driver: str | None) -> str | None:
    """Newest CUDA whose minimum driver this driver meets (what `CUDA Version:` would say)."""
    best = None
    for row in data()["cuda_driver"]:
        if version_ge(driver, row["min_driver"]):
            best = row["cuda"]
    return best


@dataclass(frozen=True)
class Release:
    """What a vLLM release pins. `approximate` = the version fell between table rows."""
    version: str
    torch: str
    cuda: str
    min_driver: str
    min_cc: str
    cc70: str
    note: str
    source: str
    approximate: bool = False


def release_info(version: str | None) -> Release | None:
    """Row for a vLLM version; a version between rows takes the row below it (approximate)."""
    pv = parse_version(version)
    if pv is None:
        return None
    below = None
    for row in data()["vllm_releases"]:
        first = parse_version(row["first"])
        last = parse_version(row["last"]) if row["last"] else None
        if pv[:3] >= first and (last is None or pv[:3] <= last):
            return _release(version, row, False)
        if pv[:3] >= first:
            below = row
    return _release(version, below, True) if below else None


def _release(version: str, row: dict[str, Any], approx: bool) -> Release:
    return Release(str(version), row["torch"], row["cuda"], str(row["min_driver"]), row["min_cc"],
                   row["cc70"], row.get("note", ""), row["source"], approx)


def engine_for(version: str | None) -> str | None:
    """Default engine generation (V0/V1) of a release: metric names follow it."""
    engine = None
    for row in data()["engine_default"]:
        if version_ge(version, row["first"]):
            engine = row["engine"]
    return engine


# --- flags ------------------------------------------------------------------------------------

def normalize_flag(flag: str) -> str:
    """'swap_space' / 'swap-space' / '--swap-space' -> '--swap-space'."""
    f = str(flag).strip().split("=", 1)[0]
    return "--" + f.lstrip("-").replace("_", "-")


def _flag_row(flag: str) -> dict[str, Any] | None:
    want = normalize_flag(flag)
    for row in data()["flags"]:
        if row["flag"] == want:
            return row
    return None


def flag_status(flag: str, version: str | None) -> str:
    """'ok' | 'deprecated' | 'not-yet' | 'removed' | 'unknown' (flag not in the table)."""
    row = _flag_row(flag)
    if row is None:
        return "unknown"
    if row["added"] and not version_ge(version, row["added"]):
        return "not-yet"
    if row["removed"] and version_ge(version, row["removed"]):
        return "removed"
    if row["deprecated"] and version_ge(version, row["deprecated"]):
        return "deprecated"
    return "ok"


def flag_row(flag: str) -> dict[str, Any] | None:
    """The table row of a flag (added/deprecated/removed/replaced_by/source), or None."""
    return _flag_row(flag)


def flags_supported(version: str | None) -> set[str]:
    """Flags from the table that `version` accepts (deprecated ones included: they still work)."""
    return {r["flag"] for r in data()["flags"] if flag_status(r["flag"], version) in ("ok", "deprecated")}


def flag_available(flag: str, version: str | None) -> bool:
    """True when the pinned version accepts the flag.

    A flag the table does not know is assumed available: we only drop what we *know* a release
    rejects, so an operator's extra argument is never silently lost (the service's own start-up
    error is then the ground truth)."""
    return flag_status(flag, version) in ("ok", "deprecated", "unknown")


def var_flags() -> dict[str, str]:
    """Inventory variable -> CLI flag it renders to."""
    return dict(data()["var_flags"])


# --- metrics ----------------------------------------------------------------------------------

def metric_names(version: str | None) -> set[str]:
    """Metric names a release exports (V0 names before the V1 default, new names after)."""
    col = "new" if engine_for(version) == "V1" else "old"
    return {r[col] for r in data()["metrics"]}


def metric_renames(old_version: str | None, new_version: str | None) -> list[tuple[str, str]]:
    """(name before, name after) for every metric whose name differs between two releases."""
    e_old, e_new = engine_for(old_version), engine_for(new_version)
    if e_old is None or e_new is None or e_old == e_new:
        return []
    a, b = ("old", "new") if e_old == "V0" else ("new", "old")
    return [(r[a], r[b]) for r in data()["metrics"] if r[a] != r[b]]


# --- NCCL -------------------------------------------------------------------------------------

def nccl_table() -> dict[str, Any]:
    return data()["nccl"]
