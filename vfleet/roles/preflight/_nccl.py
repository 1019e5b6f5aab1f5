"""Which NCCL environment the vLLM unit gets, decided from the link matrix between the
tensor-parallel GPUs (rules and values in vfleet/config/data/vllm_facts.yaml, `nccl:`).

Why: any NVLink between the TP GPUs wants P2P on (disabling it there halves throughput or worse),
while plain PCIe across host bridges or sockets (PHB/NODE/SYS) hung the seed box at NCCL init
until P2P and SHM were turned off. PIX/PXB (one switch) is fine with defaults. An operator's
explicit `nccl_env` (or NCCL_* in `vllm_env`) in the inventory wins over the decision, and is
reported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig

from ._parsers.topo_matrix import is_nvlink, link_rank


@dataclass
class NcclDecision:
    env: dict[str, str]
    reason: str
    tp_gpus: list[int]
    links: dict[str, str] = field(default_factory=dict)  # "0-1" -> "NV12"
    worst_link: str | None = None
    nvlink_between_tp: bool | None = None  # every TP pair directly on NVLink
    any_nvlink: bool | None = None
    operator_env: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tp_gpu_indices(cfg: HostConfig) -> list[int]:
    """GPUs the service uses: `cuda_visible_devices` ("0,1" or a list) else the first TP ones."""
    tp = cfg.tensor_parallel_size
    cvd = cfg.cuda_visible_devices
    if cvd is None:
        return list(range(tp))
    items = cvd if isinstance(cvd, tuple) else cvd.split(",")
    return [int(x) for x in items][:tp]


def operator_env(cfg: HostConfig) -> dict[str, str]:
    """NCCL variables the inventory sets on purpose: `nccl_env`, and NCCL_* keys of `vllm_env`."""
    env = {k: v for k, v in cfg.vllm_env.items() if k.startswith("NCCL_")}
    env.update(cfg.nccl_env or {})
    return env


def decide(topo: dict[str, Any] | None, cfg: HostConfig) -> NcclDecision:
    """The NCCL environment for this host's unit."""
    table = vllm_facts.nccl_table()
    gpus = tp_gpu_indices(cfg)
    operator = operator_env(cfg)
    if len(gpus) < 2:
        d = NcclDecision({}, "single GPU: no inter-GPU traffic, NCCL defaults", gpus)
    elif not topo or not topo.get("matrix") or max(gpus) >= len(topo["matrix"]):
        d = NcclDecision({}, "topology unknown: NCCL defaults (check `nvidia-smi topo -m`)", gpus)
    else:
        links = {f"{a}-{b}": topo["matrix"][a][b] for a, b in combinations(gpus, 2)}
        codes = [c for c in links.values() if c]
        nv = [c for c in codes if is_nvlink(c)]
        ranked = [c for c in codes if link_rank(c) is not None]
        worst = max(ranked, key=link_rank) if ranked else None
        all_nv = bool(codes) and len(nv) == len(codes)
        if nv:
            how = "every pair" if all_nv else f"{len(nv)} of {len(codes)} pairs"
            d = NcclDecision({}, f"NVLink between the TP GPUs ({how}): P2P stays on", gpus)
        elif worst in table["p2p_off_links"]:
            d = NcclDecision(
                dict(table["p2p_off_env"]),
                f"PCIe only, worst path {worst} (across host bridge/socket): P2P and SHM off to avoid NCCL init hangs",
                gpus,
            )
        else:
            d = NcclDecision({}, f"PCIe behind one switch (worst {worst}): P2P on", gpus)
        d.links, d.worst_link, d.nvlink_between_tp, d.any_nvlink = links, worst, all_nv, bool(nv)
    if operator:
        d.operator_env = operator
        d.env = {**d.env, **operator}
        d.reason += "; inventory nccl_env applied on top"
    return d


def effective_env(env_file: dict[str, str] | None, nccl_conf: dict[str, str] | None) -> dict[str, str]:
    """What NCCL sees from files today: /etc/nccl.conf, overridden by the process environment."""
    return {**(nccl_conf or {}), **(env_file or {})}
