"""Checks for GPUs without FlashAttention-2 (Volta, compute capability 7.0, and Turing): which
attention backend vLLM will use there, and the memory settings a V100 start-up fails on.

Why: vllm_facts.yaml already says these GPUs lack `flash-attn-2`, and the 8x V100 field report
(issue 27) shows what follows when nothing reads it: an inventory that asks for FlashAttention,
and start-ups that run out of memory while capturing CUDA graphs. Each check returns None on a
GPU it does not concern (an H200 gets none of them). The table (backends by engine, the 0.92
ceiling) is vfleet/roles/preflight/data/volta.yaml, each row with its source.

- gpu.attention_backend: the backend the pinned release picks there (V0: XFormers; V1 from
  0.10.2: FlexAttention) and a warning (V0 falls back) or a failure (V1 refuses) where
  vllm_env's VLLM_ATTENTION_BACKEND or `--attention-backend` in vllm_extra_args asks for a
  FlashAttention backend.
- gpu.cuda_graphs (CC 7.0): until vLLM counts CUDA graphs in its memory profile (vllm#30515,
  opt-in with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1, not on by default in any release
  that runs on a V100), its budget (total x gpu_memory_utilization) goes to weights, activations
  and KV cache, and the graphs are captured afterwards in what is left (vllm#11251). So the
  headroom after the weights and the KV cache vLLM sizes is total x (1 - utilization); below the
  planner's capture estimate (capacity.CUDA_GRAPH_RESERVE_BYTES, measured on an H200, 8B model)
  the capture is likely to OOM: advise enforce_eager, or the utilization that leaves room.
- gpu.memory_utilization (CC 7.0): warn above 0.92 (the field report's ceiling).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig
from vfleet.roles.preflight import _capacity as capacity

from ._check_base import FAIL, PASS, WARN, Check, gib, min_cc_gpu

__all__ = ["volta_checks", "engine_on_gpu"]

DATA = Path(__file__).resolve().parent / "data" / "volta.yaml"
VOLTA_CC = (7, 0)
NO_FA2 = "flash-attn-2"
ESTIMATE_ENV = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
MIB = 1024**2


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return yaml.safe_load(DATA.read_text(encoding="utf-8"))


def engine_on_gpu(version: str | None, cc: str | None) -> str | None:
    """The engine `version` runs on a GPU of compute capability `cc`: its default engine, except
    that releases whose V1 lacked CC < 8.0 (vllm_releases `cc70: v0-only`) run V0 there."""
    engine = vllm_facts.engine_for(version)
    release = vllm_facts.release_info(version)
    below_8 = (vllm_facts.cc_tuple(cc) or (99, 0)) < (8, 0)
    return "V0" if below_8 and release is not None and release.cc70 == "v0-only" else engine


def _backend_row(version: str | None, engine: str | None) -> dict[str, Any] | None:
    rows = [
        r
        for r in _table()["attention_backends"]
        if r["engine"] == engine and (not r.get("first") or vllm_facts.version_ge(version, r["first"]))
    ]
    return rows[-1] if rows else None


def requested_backend(cfg: HostConfig) -> tuple[str, str] | None:
    """(backend, where the inventory sets it): `--attention-backend` in vllm_extra_args wins
    over VLLM_ATTENTION_BACKEND in vllm_env (vLLM reads the flag first)."""
    args = list(cfg.vllm_extra_args)
    for i, a in enumerate(args):
        if a.startswith("--attention-backend="):
            return a.split("=", 1)[1], "vllm_extra_args (--attention-backend)"
        if a == "--attention-backend" and i + 1 < len(args):
            return args[i + 1], "vllm_extra_args (--attention-backend)"
    env = cfg.vllm_env.get("VLLM_ATTENTION_BACKEND")
    return (env, "vllm_env (VLLM_ATTENTION_BACKEND)") if env else None


def check_attention_backend(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    names = sorted(
        {g.get("name") or "?" for g in facts.get("gpus") or [] if NO_FA2 in vllm_facts.gpu_lacks(g.get("name"))}
    )
    if not names:
        return None
    gpu = min_cc_gpu(facts) or {}
    version = cfg.vllm_version
    engine = engine_on_gpu(version, gpu.get("compute_capability"))
    row = _backend_row(version, engine)
    lacking = f"{', '.join(names)} (no FlashAttention-2)"
    if row is None:
        return Check(
            "gpu.attention_backend",
            WARN,
            f"{lacking}, and vLLM {version} ({engine}) has no backend known for them",
            "pin a release that runs on these GPUs (see vllm.gpu_support)",
        )
    uses = f"vLLM {version} ({engine} engine) uses the {row['backend']} attention backend"
    asked = requested_backend(cfg)
    if asked and asked[0].upper() in _table()["flash_attention_backends"]["names"]:
        status, then = (
            (WARN, "ignores it and falls back")
            if row["on_fa_request"] == "fallback"
            else (FAIL, f"refuses to start ({row['says']})")
        )
        return Check(
            "gpu.attention_backend",
            status,
            f"{asked[1]} asks for {asked[0]}, but {lacking}: {uses} there, and {then}",
            f"remove {asked[0]} from {asked[1]}: vLLM picks {row['backend']} by itself",
        )
    return Check("gpu.attention_backend", PASS, f"{lacking}: {uses}")


def _volta(facts: dict[str, Any]) -> dict[str, Any] | None:
    gpu = min_cc_gpu(facts)
    return gpu if gpu and vllm_facts.cc_tuple(gpu["compute_capability"]) == VOLTA_CC else None


def check_cuda_graphs(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    gpu = _volta(facts)
    if gpu is None:
        return None
    if cfg.enforce_eager:
        return Check("gpu.cuda_graphs", PASS, "enforce_eager: no CUDA graphs are captured")
    if cfg.vllm_env.get(ESTIMATE_ENV) == "1":
        return Check("gpu.cuda_graphs", PASS, f"{ESTIMATE_ENV}=1: vLLM counts CUDA graphs in its budget")
    mems = [g["memory_total_mib"] for g in facts.get("gpus") or [] if g.get("memory_total_mib")]
    if not mems:
        return None
    total = min(mems) * MIB
    util = cfg.gpu_memory_utilization
    headroom = total * (1 - util)
    need = capacity.CUDA_GRAPH_RESERVE_BYTES
    where = (
        f"{gib(headroom)} of {gpu.get('name')}'s {gib(total)} stays outside vLLM's budget "
        f"(1 - gpu_memory_utilization {util:g}) after weights and KV cache; CUDA graph capture needs "
        f"~{gib(need)} there (CC 7.0: vLLM does not count graphs in its profile)"
    )
    if headroom < need:
        ceiling = math.floor((1 - need / total) * 100) / 100
        return Check(
            "gpu.cuda_graphs",
            WARN,
            f"{where}: the start is likely to run out of memory at 'Capturing cudagraphs'",
            f"set enforce_eager: true (no graphs: slower decoding of small "
            f"batches), or gpu_memory_utilization <= {ceiling:.2f}",
        )
    return Check("gpu.cuda_graphs", PASS, where)


def check_volta_memory_utilization(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    gpu = _volta(facts)
    if gpu is None:
        return None
    ceiling = float(_table()["volta_max_gpu_memory_utilization"]["value"])
    util = cfg.gpu_memory_utilization
    if util > ceiling:
        total_mib = gpu.get("memory_total_mib")  # None where nvidia-smi printed [N/A]
        left = f"{gib((1 - util) * total_mib * MIB)} per GPU" if total_mib else f"{1 - util:.0%} of each GPU"
        return Check(
            "gpu.memory_utilization",
            WARN,
            f"gpu_memory_utilization {util:g} on {gpu.get('name')} "
            f"(CC 7.0) is above {ceiling:g}: CUDA graphs, NCCL buffers and the CUDA context get {left}",
            f"set gpu_memory_utilization: {ceiling:g} or lower (0.9 is vLLM's default)",
        )
    return Check("gpu.memory_utilization", PASS, f"gpu_memory_utilization {util:g} (<= {ceiling:g} on CC 7.0)")


def volta_checks(cfg: HostConfig, facts: dict[str, Any]) -> list[Check]:
    """The checks above that concern this host's GPUs."""
    found = [
        check_attention_backend(cfg, facts),
        check_cuda_graphs(cfg, facts),
        check_volta_memory_utilization(cfg, facts),
    ]
    return [c for c in found if c is not None]
