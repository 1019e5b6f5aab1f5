"""The gather script's stdout turned into facts, raw snapshot files, or both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.fact_protocol import read_outputs

from ._facts import assemble, fact_values, raw_outputs
from ._snapshot import snapshot_write


def parse_gathered(output: str, cfg: HostConfig) -> dict[str, Any]:
    """Facts from the script's stdout: gpus[], driver_version, cuda_version, topology{...},
    os, kernel, shm_bytes, model_fs, nccl_env_file, nccl_conf, vllm_installed, model_config,
    weights_bytes, gpu_state ('ok' | 'no-driver' | 'broken-driver' | 'no-gpus')."""
    outputs = read_outputs(output)
    if not outputs:
        # An empty or cut-off output (SSH trouble) must not read as "no driver".
        raise ValueError("no preflight sections in the output: the gather script did not run to the end")
    return assemble(fact_values(outputs, cfg), cfg)


def gathered_raw_outputs(output: str) -> dict[str, str]:
    """{snapshot file: raw text} (nvidia-smi.txt, query-gpu.csv, topo.txt[, smi-q.xml])."""
    return raw_outputs(read_outputs(output))


def snapshot_from_gathered(dest_dir: str | Path, output: str, cfg: HostConfig) -> dict[str, Any]:
    """Convenience for the lead: parse, write the snapshot, return the facts."""
    f = parse_gathered(output, cfg)
    snapshot_write(dest_dir, gathered_raw_outputs(output), f)
    return f
