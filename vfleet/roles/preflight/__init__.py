"""Preflight: gather a host's facts in one round trip, audit them against the inventory, and
plan its capacity. Pure logic: the caller runs `gather_script(cfg)` on the host (over SSH, with
`sh`) and hands back its stdout; `cfg` is the host's HostConfig.

    script = gather_script(cfg)                   # one POSIX sh script for every fact
    facts  = parse_gathered(stdout, cfg)          # JSON-serialisable facts
    checks = host_checks(cfg, facts)              # [Check(id, status, message, fix)]
    extra  = fleet_checks({host: facts}, {group: [hosts]})
    snapshot_write(dir, gathered_raw_outputs(stdout), facts); facts_from_snapshot(dir, cfg)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.fact_protocol import read_outputs

from .checks import Check, host_checks, upgrade_checks
from .facts import assemble, fact_values, gather_script, raw_outputs
from .fleet_checks import fleet_checks
from .snapshot import facts_from_snapshot, snapshot_write

__all__ = ["Check", "gather_script", "parse_gathered", "gathered_raw_outputs", "host_checks", "upgrade_checks",
           "fleet_checks", "snapshot_write", "facts_from_snapshot", "snapshot_from_gathered"]


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
