"""The smallest tensor x pipeline parallel layout that holds a model with room for its KV cache,
and whether it needs more than one host.

Why: "a 70B model in fp16 does not fit 8x V100 32G with room for KV cache" is a question the
planner can answer before anyone buys or wires a second box. vLLM's own advice (docs/serving/
parallelism_scaling.md): TP up to the GPUs of one node, PP across nodes. So candidates keep a
TP group inside a host (TP divides the GPUs per host), are ordered by GPU count and then by
fewer pipeline stages, and the first whose plan passes wins.

How one stage is planned: pipeline parallelism gives each stage a contiguous share of the
layers (vllm/distributed/utils.py get_pp_indices: ceil-ish split), so the busiest stage holds
ceil(layers / PP) layers' weights and KV cache per token, plus the embedding (first stage) or
the LM head (last stage). The stage is planned as a model of that many layers with the
single-host planner (vfleet/roles/preflight/_capacity/__init__.py plan), weights scaled by the layer share plus
one vocab x hidden matrix: on the safe side, like the rest of the planner.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from vfleet.engine.errors import VfleetError
from vfleet.roles.preflight._capacity.model import ModelShape, dtype_bytes
from vfleet.roles.preflight._model_files import config_view

__all__ = ["ParallelPlan", "plan_parallel", "stage_config"]

# The candidates are TP sizes dividing the GPUs of a host times PP sizes up to the layer count
# (model_files.MAX_LAYERS): both ranges bounded, so the search is.
MAX_GPUS_PER_HOST = 1024
MAX_HOSTS = 100_000


@dataclass
class ParallelPlan:
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpus: int
    gpus_per_host: int
    hosts: int
    multi_host: bool
    fits: bool
    stage: dict[str, Any] | None  # the busiest stage's Plan (per GPU figures)
    tried: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def stage_config(config: dict[str, Any], pp: int) -> dict[str, Any]:
    """config.json of the busiest pipeline stage: ceil(layers / pp) layers (layer_types cut alike)."""
    c = dict(config)
    inner = c.get("text_config") if isinstance(c.get("text_config"), dict) else c
    inner = dict(inner)
    layers = config_view(config)["num_hidden_layers"]  # checked by ModelShape.from_config first
    n = math.ceil(layers / pp)
    inner["num_hidden_layers"] = n
    if isinstance(inner.get("layer_types"), list):
        inner["layer_types"] = inner["layer_types"][:n]
    if inner is not c and "text_config" in c:
        c["text_config"] = inner
        return c
    return inner


def _tp_ok(shape: ModelShape, tp: int) -> bool:
    """vLLM: attention heads divisible by TP; KV heads divisible by TP or replicated (TP % kv == 0)."""
    return shape.heads % tp == 0 and (shape.kv_heads % tp == 0 or tp % shape.kv_heads == 0)


def _hosts_for(tp: int, pp: int, gpus_per_host: int) -> int:
    """Hosts a layout needs, each holding the same number of whole stages (what vfleet/config/replicas.py
    accepts: hosts x GPUs per host = TP x PP, TP inside a host); a huge number when it cannot."""
    per_host = gpus_per_host // tp
    n = math.ceil(pp / per_host)
    return n if n == 1 or pp % n == 0 else 1 << 30


def plan_parallel(
    config: dict[str, Any],
    gpu_memory_mib: int,
    *,
    gpus_per_host: int,
    hosts: int = 1,
    weights_bytes: int | None = None,
    dtype: str | None = "auto",
    **plan_kwargs: Any,
) -> ParallelPlan:
    """The first (fewest GPUs, then fewest stages) TP x PP whose busiest stage passes the
    planner on these GPUs, using at most `hosts` hosts of `gpus_per_host` GPUs each.
    `plan_kwargs` go to capacity.plan (gpu_memory_utilization, max_model_len, max_num_seqs, ...)."""
    from vfleet.roles.preflight._capacity import plan  # the package imports this module's names lazily

    if not (1 <= gpus_per_host <= MAX_GPUS_PER_HOST and 1 <= hosts <= MAX_HOSTS):
        raise VfleetError(
            f"plan: --gpus-per-host must be 1 to {MAX_GPUS_PER_HOST} and --hosts 1 to {MAX_HOSTS}, "
            f"got {gpus_per_host} and {hosts}"
        )
    shape = ModelShape.from_config(config, plan_kwargs.get("config_label", "config.json"))
    wb = dtype_bytes(shape.dtype if (not dtype or dtype == "auto") else dtype)
    tried: list[str] = []
    candidates = sorted(
        (
            (tp, pp)
            for tp in range(1, gpus_per_host + 1)
            if gpus_per_host % tp == 0 and _tp_ok(shape, tp)
            for pp in range(1, shape.layers + 1)
            if _hosts_for(tp, pp, gpus_per_host) <= hosts
        ),
        key=lambda c: (c[0] * c[1], c[1]),
    )
    for tp, pp in candidates:
        stage_weights = None
        if weights_bytes:
            share = math.ceil(shape.layers / pp) / shape.layers
            stage_weights = math.ceil(weights_bytes * share) + (
                int(shape.vocab or 0) * shape.hidden * wb if pp > 1 else 0
            )
        p = plan(
            stage_config(config, pp) if pp > 1 else config,
            gpu_memory_mib,
            tp=tp,
            dtype=dtype,
            weights_bytes=stage_weights,
            **plan_kwargs,
        )
        n_hosts = _hosts_for(tp, pp, gpus_per_host)
        if p.status != "fail":
            return ParallelPlan(tp, pp, tp * pp, tp * pp // n_hosts, n_hosts, n_hosts > 1, True, p.to_dict(), tried)
        tried.append(f"TP {tp} x PP {pp}: {p.warnings[0] if p.warnings else p.status}")
    return ParallelPlan(
        0,
        0,
        0,
        gpus_per_host,
        0,
        hosts > 1,
        False,
        None,
        tried[-3:] + [f"no TP x PP over {hosts} host(s) of {gpus_per_host} GPUs fits"],
    )
