"""Host snapshot directory: the GPU profile layout (docs/architecture.md) plus facts.json.

    nvidia-smi.txt   query-gpu.csv   topo.txt   smi-q.xml (optional)   facts.json

The GPU files hold the raw command outputs, so the same parsers read them as read a live host,
and the lab's simulated nvidia-smi can replay them. facts.json holds the other facts (OS, shm,
model filesystem, NCCL files, installed vLLM, config.json, weights) and the GPU state. Derived
facts (the NCCL decision, NVLink between the TP GPUs) are recomputed from the host's config on
read, exactly as a live gather does, so `facts_from_snapshot(dir, cfg) == parse_gathered(output, cfg)`.
A profile without facts.json (the lab's) still gives GPU facts; the others are unknown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.fact_protocol import Output

from ._facts import NON_GPU_KEYS, SNAPSHOT_FACTS, assemble

FACTS_JSON = "facts.json"
LAB_PROFILE_JSON = "lab-profile.json"


def snapshot_write(dest_dir: str | Path, raw_outputs: dict[str, str], facts: dict[str, Any]) -> Path:
    """Write raw GPU outputs ({'nvidia-smi.txt': text, ...}, from `facts.raw_outputs`) and the
    non-GPU facts. Returns the directory."""
    d = Path(dest_dir)
    d.mkdir(parents=True, exist_ok=True)
    names = {f.snapshot_file for f in SNAPSHOT_FACTS if f.snapshot_file}
    for name, text in raw_outputs.items():
        if name not in names:
            raise ValueError(f"{name} is not a snapshot file ({sorted(names)})")
        (d / name).write_text(text, encoding="utf-8")
    other = {k: facts.get(k) for k in NON_GPU_KEYS}
    other["gpu_state"] = facts.get("gpu_state")
    (d / FACTS_JSON).write_text(json.dumps(other, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return d


def read_values(src_dir: str | Path) -> dict[str, Any]:
    """Fact values from a snapshot dir (before assembly)."""
    d = Path(src_dir)
    values: dict[str, Any] = {}
    lab = _lab_failure(d)
    for f in SNAPSHOT_FACTS:
        if f.snapshot_file is None:
            continue
        p = d / f.snapshot_file
        values[f.key] = f.process_output(Output(_capture_text(p)) if p.is_file() else lab)
    fj = d / FACTS_JSON
    if fj.is_file():
        extra = json.loads(fj.read_text(encoding="utf-8"))
        if not isinstance(extra, dict):
            raise ValueError(f"{fj}: expected a JSON object of facts, got {type(extra).__name__}")
        values.update(extra)
    return values


def _capture_text(path: Path) -> str:
    """A captured command output. An empty or binary file is a broken capture, not a host
    without nvidia-smi: say so, so the operator captures again instead of installing drivers."""
    data = path.read_bytes()
    if not data.strip():
        raise ValueError(f"{path} is empty (a broken capture)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not text (a broken capture)") from None
    if "\x00" in text:
        raise ValueError(f"{path} is not text (a broken capture)")
    return text


def _lab_failure(d: Path) -> Output | None:
    """The lab's failure profiles (vfleet/lab/profiles/{broken-driver,no-gpu}/lab-profile.json) describe
    what the simulated nvidia-smi prints instead of holding captures: read them the same way."""
    p = d / LAB_PROFILE_JSON
    if not p.is_file():
        return None
    spec = json.loads(p.read_text(encoding="utf-8"))
    if spec.get("nvidia_smi") == "fail":
        return Output(spec.get("stdout", ""), spec.get("stderr", ""), int(spec.get("exit_code", 1)))
    return None  # "absent": nvidia-smi not installed


def facts_from_snapshot(src_dir: str | Path, cfg: HostConfig) -> dict[str, Any]:
    """The facts a live gather of the same host would give (see module doc)."""
    return assemble(read_values(src_dir), cfg)
