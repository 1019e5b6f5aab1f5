"""Preflight: gather a host's facts in one round trip, audit them against the inventory, and
plan its capacity. Pure logic: the caller runs `gather_script(vars)` on the host (over SSH, with
`sh`) and hands back its stdout.

    script = gather_script(vars)                 # one POSIX sh script for every fact
    facts  = parse_gathered(stdout, vars)         # JSON-serialisable facts
    checks = host_checks(vars, facts)             # [Check(id, status, message, fix)]
    extra  = fleet_checks({host: (vars, facts)}, {group: [hosts]})
    snapshot_write(dir, gathered_raw_outputs(stdout), facts); facts_from_snapshot(dir, vars)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from . import facts as _facts
from .checks import Check, host_checks, upgrade_checks
from .facts import FACTS, Fact, Section, raw_outputs, split_sections
from .fleet_checks import fleet_checks
from .snapshot import facts_from_snapshot, snapshot_write

__all__ = ["FACTS", "Fact", "Check", "Section", "gather_script", "parse_gathered", "gathered_raw_outputs",
           "host_checks", "upgrade_checks", "fleet_checks", "snapshot_write", "facts_from_snapshot",
           "split_sections", "raw_outputs", "snapshot_from_gathered"]


def gather_script(vars: dict[str, Any]) -> str:
    """One sh script that prints every fact of the host as delimited sections."""
    return _facts.gather_script(_facts.facts_for(vars), vars)


def parse_gathered(output: str, vars: dict[str, Any]) -> dict[str, Any]:
    """Facts from the script's stdout: gpus[], driver_version, cuda_version, topology{...},
    os, kernel, shm_bytes, model_fs, nccl_env_file, nccl_conf, vllm_installed, model_config,
    weights_bytes, gpu_state ('ok' | 'no-driver' | 'broken-driver' | 'no-gpus')."""
    sections = split_sections(output)
    if not sections:
        # An empty or cut-off output (SSH trouble) must not read as "no driver".
        raise ValueError("no preflight sections in the output: the gather script did not run to the end")
    return _facts.assemble(_facts.parse_sections(sections, FACTS), vars)


def gathered_raw_outputs(output: str) -> dict[str, str]:
    """{snapshot file: raw text} (nvidia-smi.txt, query-gpu.csv, topo.txt[, smi-q.xml])."""
    return raw_outputs(split_sections(output))


def snapshot_from_gathered(dest_dir: str | Path, output: str, vars: dict[str, Any]) -> dict[str, Any]:
    """Convenience for the lead: parse, write the snapshot, return the facts."""
    f = parse_gathered(output, vars)
    snapshot_write(dest_dir, gathered_raw_outputs(output), f)
    return f
