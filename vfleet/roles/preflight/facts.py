"""Preflight facts: pyinfra-style classes (a shell `command` + a `process(output)` parser), and the
batching that makes a whole preflight cost one connection and one round trip per host.

`gather_script(facts, vars)` writes ONE POSIX sh script that runs every fact's command (in
parallel, each in its own subshell with its stdout, stderr and exit code captured apart), then
prints them as delimited sections. A missing command fails only its own section. `split_sections`
cuts the output back into sections; `parse_sections` runs each fact's parser. The raw GPU
sections are kept verbatim so that they can be written as a snapshot in the GPU profile layout.

This module is the public face: the work lives in one module per job, re-exported here so that
`from vfleet.roles.preflight.facts import ...` keeps working:
    fact_paths.py     where on the host the facts look (model dir, venv, env file)
    fact_table.py     the Fact classes, FACTS, BY_NAME, Section
    fact_gather.py    one script for all facts, and its output cut back into sections
    fact_assembly.py  fact values -> the facts dict the checks and the report use
"""
from __future__ import annotations

from .fact_assembly import NON_GPU_KEYS, _merge_gpus, assemble
from .fact_gather import (COMMAND_TIMEOUT_S, MARK, SECTION_RE, gather_script, parse_sections,
                          raw_outputs, split_sections)
from .fact_paths import env_file_path, model_dir, service_name, vllm_root
from .fact_table import (BY_NAME, FACTS, GPU_FACTS, NVSMI_GUARD, Fact, GpuQuery, Kernel,
                         ModelConfig, ModelFiles, ModelFs, NcclConf, NcclEnvFile, NvidiaSmi,
                         OsRelease, PcieAcs, Section, Shm, SmiXml, Topology, TokenizerConfig,
                         VllmInstalled, Weights, facts_for)

__all__ = ["BY_NAME", "COMMAND_TIMEOUT_S", "FACTS", "GPU_FACTS", "MARK", "NON_GPU_KEYS",
           "NVSMI_GUARD", "SECTION_RE", "Fact", "GpuQuery", "Kernel", "ModelConfig", "ModelFiles",
           "ModelFs", "NcclConf", "NcclEnvFile", "NvidiaSmi", "OsRelease", "PcieAcs", "Section",
           "Shm", "SmiXml", "Topology", "TokenizerConfig", "VllmInstalled", "Weights", "_merge_gpus",
           "assemble", "env_file_path", "facts_for", "gather_script", "model_dir", "parse_sections",
           "raw_outputs", "service_name", "split_sections", "vllm_root"]
