"""Preflight facts: the host probes (a shell `command` + a parser, in the engine's fact protocol),
the one-round-trip script that gathers them, and the facts dict the checks read.

This module is the public face: the work lives in one module per job, re-exported here so that
`from vfleet.roles.preflight._facts import ...` reads one place:
    _fact_paths.py     where on the host the facts look (model dir), and the report's `paths`
    _fact_table.py     the fact classes, facts_for(cfg), SNAPSHOT_FACTS
    _fact_gather.py    one script for all facts; its output as fact values and raw snapshot files
    _fact_assembly.py  fact values -> the facts dict the checks and the report use
"""

from __future__ import annotations

from ._fact_assembly import NON_GPU_KEYS, assemble
from ._fact_gather import fact_values, gather_script, raw_outputs
from ._fact_paths import model_dir, report_paths
from ._fact_table import (
    COMMAND_TIMEOUT_S,
    NVSMI_GUARD,
    SNAPSHOT_FACTS,
    FlashinferKernels,
    GpuQuery,
    Kernel,
    ModelConfig,
    ModelFiles,
    ModelFs,
    NcclConf,
    NcclEnvFile,
    NvidiaSmi,
    OsRelease,
    PcieAcs,
    PreflightFact,
    Shm,
    SmiXml,
    TokenizerConfig,
    Topology,
    VllmInstalled,
    Weights,
    facts_for,
)

__all__ = [
    "COMMAND_TIMEOUT_S",
    "NON_GPU_KEYS",
    "NVSMI_GUARD",
    "SNAPSHOT_FACTS",
    "FlashinferKernels",
    "GpuQuery",
    "Kernel",
    "ModelConfig",
    "ModelFiles",
    "ModelFs",
    "NcclConf",
    "NcclEnvFile",
    "NvidiaSmi",
    "OsRelease",
    "PcieAcs",
    "PreflightFact",
    "Shm",
    "SmiXml",
    "Topology",
    "TokenizerConfig",
    "VllmInstalled",
    "Weights",
    "assemble",
    "fact_values",
    "facts_for",
    "gather_script",
    "model_dir",
    "raw_outputs",
    "report_paths",
]
