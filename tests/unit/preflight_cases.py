"""Shared ground of the preflight check tests: facts of a GPU profile (real captures, or the
synthetic seed V100 box) through the same assembly a live gather uses, with the non-GPU facts set
per test (pyinfra's "fake facts"); the seed box's variables (V100) and host configs built from
variables the way a run builds them; hosts without a usable GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.unit.configs import host_config
from vfleet.config.hostconfig import HostConfig
from vfleet.roles.preflight import _checks as C
from vfleet.roles.preflight._facts import assemble
from vfleet.roles.preflight._snapshot import read_values

FIX = Path(__file__).parent / "data" / "facts" / "fixtures"
QWEN = json.loads((FIX / "qwen2.5-7b-instruct.config.json").read_text())
GIB = 1024**3


def _profile_dir(tmp: Path, nvsmi: str, query: str, topo: str) -> Path:
    d = tmp / "p"
    d.mkdir(exist_ok=True)
    for name, src in (("nvidia-smi.txt", nvsmi), ("query-gpu.csv", query), ("topo.txt", topo)):
        (d / name).write_text((FIX / src).read_text())
    return d


def config(vars: dict[str, Any] | None = None) -> HostConfig:
    """The HostConfig of a vLLM host that sets only `vars` (the schema's defaults for the rest,
    no model named unless `vars` names one): what preflight reads."""
    return host_config(vars, base={})


def facts(cfg: HostConfig, profile: str | Path = "profile_v100_8_pcie", **over: Any) -> dict[str, Any]:
    """Facts of a profile plus healthy defaults for the rest (override per test)."""
    values = read_values(FIX / profile if isinstance(profile, str) else profile)
    values.update(
        {
            "os": {"ID": "debian", "VERSION_ID": "12"},
            "kernel": "6.1.0-18-amd64",
            "shm_bytes": 16 * GIB,
            "nccl_env_file": {},
            "nccl_conf": {},
            "vllm_installed": None,
            "model_config": QWEN,
            "weights": None,
            "model_fs": {
                "path": "/srv/models/qwen",
                "fstype": "ext4",
                "free_bytes": 500 * GIB,
                "mount": "/",
                "network": False,
            },
        }
    )
    values.update(over)
    return assemble(values, cfg)


def by_id(checks: list[C.Check], cid: str) -> C.Check:
    found = [c for c in checks if c.id == cid]
    assert found, f"{cid} not in {[c.id for c in checks]}"
    return found[0]


V100 = {
    "vllm_version": "0.5.4",
    "dtype": "float16",
    "tensor_parallel_size": 2,
    "max_model_len": 4096,
    "max_num_seqs": 16,
    "gpu_memory_utilization": 0.9,
}
V100_CFG = config(V100)


def a100_profile(tmp_path: Path) -> Path:
    """4x A100 SXM4 (real nvidia-smi) with the DGX A100 NV12 topology's first four GPUs."""
    d = _profile_dir(
        tmp_path,
        "smi_4xA100_SXM4_drv555.42.02_cuda12.5.txt",
        "synthetic_query_NA_values.csv",
        "topo_dgx_a100_nv12_10nic_tabs.txt",
    )
    (d / "query-gpu.csv").unlink()  # the table alone: CC comes from the name table
    return d


def _no_gpu(state: str) -> dict[str, Any]:
    from vfleet.roles.preflight._parsers import nvidia_smi_table

    text = {
        "no-driver": "",
        "broken-driver": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    }[state]
    values = {
        "nvidia_smi": nvidia_smi_table.parse(text, rc=127 if state == "no-driver" else 9),
        "query_gpu": None,
        "topo": None,
        "shm_bytes": 16 * GIB,
        "model_fs": {"path": "/srv", "fstype": "ext4", "free_bytes": 100 * GIB, "mount": "/", "network": False},
    }
    return assemble(values, config())
