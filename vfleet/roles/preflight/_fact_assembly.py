"""From fact values to the facts dict the checks and the report use.

Both a live gather and a snapshot go through `assemble`, which is what makes snapshot -> facts
equal live -> facts; derived facts (merged GPU rows, the NCCL decision, paths) live here only."""

from __future__ import annotations

from typing import Any

from vfleet.config.hostconfig import HostConfig

from . import _model_files as model_files, _safetensors_header as safetensors_header
from ._fact_paths import model_dir, report_paths
from ._parsers import nvidia_smi_table

# Facts a snapshot keeps in facts.json (the GPU ones live in the profile files).
NON_GPU_KEYS = [
    "os",
    "kernel",
    "shm_bytes",
    "mem_total_bytes",
    "model_fs",
    "nccl_env_file",
    "nccl_conf",
    "nccl_sources",
    "vllm_installed",
    "flashinfer_kernels",
    "model_config",
    "model_files",
    "tokenizer_config",
    "weights",
    "pcie_acs",
    "unit_files",
]


def _merge_gpus(query: list[dict[str, Any]] | None, table: dict[str, Any]) -> list[dict[str, Any]]:
    """The query CSV is the source; the plain table stands in when the query failed. A missing
    compute capability (R470) is filled from the GPU-name table, and says so."""
    from vfleet.config import vllm_facts  # local: keep parsers importable without the data file

    gpus = [dict(g) for g in (query or [])]
    if not gpus:
        gpus = [
            {
                "index": g["index"],
                "name": g["name"],
                "uuid": None,
                "bus_id": g["bus_id"],
                "driver_version": table.get("driver_version"),
                "memory_total_mib": g["memory_total_mib"],
                "memory_used_mib": g["memory_used_mib"],
                "compute_capability": None,
                "persistence_mode": g["persistence_mode"],
                "ecc_uncorrected": g["ecc_uncorrected"],
                "power_limit_w": None,
                "temperature_c": None,
                "clocks_max_sm_mhz": None,
            }
            for g in table.get("gpus", [])
        ]
    for g in gpus:
        if g.get("compute_capability"):
            g["cc_source"] = "nvidia-smi"
        else:
            g["compute_capability"] = vllm_facts.cc_for_name(g.get("name"))
            g["cc_source"] = "name-table" if g["compute_capability"] else None
    return gpus


def _check_model_facts(facts: dict[str, Any], cfg: HostConfig) -> None:
    """The model folder's facts held to _model_files.py's rules, whether a live parse or a
    snapshot's facts.json gave them: a key of the wrong type or out of range is a one-line error
    naming the file and the key, never a figure the planner would use."""
    where = model_dir(cfg)
    if facts["model_config"] is not None:
        facts["model_config"] = model_files.check_config(facts["model_config"], f"{where}/config.json")
    if facts["tokenizer_config"] is not None:
        facts["tokenizer_config"] = model_files.check_tokenizer_meta(
            facts["tokenizer_config"], f"{where}/tokenizer_config.json"
        )
    facts["weights"] = safetensors_header.check_weights_fact(facts["weights"], f"{where}/*.safetensors")


def assemble(values: dict[str, Any], cfg: HostConfig) -> dict[str, Any]:
    """Facts dict (JSON-serialisable) from fact values. Both a live gather and a snapshot go
    through here, which is what makes snapshot -> facts equal live -> facts."""
    from . import _nccl as nccl

    table = values.get("nvidia_smi") or nvidia_smi_table.parse("", rc=127)
    xml = values.get("smi_xml") or {}
    gpu_state = values.get("gpu_state") or table["state"]
    gpus = _merge_gpus(values.get("query_gpu"), table) if gpu_state in ("ok", "no-gpus") else []
    driver = (
        table.get("driver_version")
        or next((g.get("driver_version") for g in gpus if g.get("driver_version")), None)
        or xml.get("driver_version")
    )
    cuda = table.get("cuda_version") or xml.get("cuda_version")
    topo = values.get("topo") if gpu_state == "ok" else None
    decision = nccl.decide(topo, cfg)
    topology = {
        "matrix": topo["matrix"] if topo else None,
        "gpus": topo["gpus"] if topo else [],
        "nics": topo["nics"] if topo else [],
        "cpu_affinity": topo["cpu_affinity"] if topo else [],
        "numa_affinity": topo["numa_affinity"] if topo else [],
        "tp_gpus": decision.tp_gpus,
        "tp_links": decision.links,
        "worst_tp_link": decision.worst_link,
        "nvlink_between_tp": decision.nvlink_between_tp,
        "any_nvlink_between_tp": decision.any_nvlink,
        "nccl_env": decision.env,
        "nccl_reason": decision.reason,
        "nccl_operator_env": decision.operator_env,
    }
    facts: dict[str, Any] = {
        "gpu_state": gpu_state,
        "gpus": gpus,
        "gpu_count": len(gpus),
        "driver_version": driver,
        "cuda_version": cuda,
        "nvidia_smi_version": table.get("smi_version"),
        "topology": topology,
    }
    for k in NON_GPU_KEYS:
        facts[k] = values.get(k)
    facts["nccl_env_file"] = facts["nccl_env_file"] or {}
    facts["nccl_conf"] = facts["nccl_conf"] or {}
    _check_model_facts(facts, cfg)
    facts["weights_bytes"] = facts["weights"]["bytes"] if facts["weights"] else None
    facts["paths"] = report_paths(cfg)
    return facts
