"""Capacity planner: how many tokens of KV cache a host has for a model, and what that means for
`max_model_len` and `max_num_seqs`, before vLLM is ever started.

Why plan at all: vLLM refuses to start when one `max_model_len` request does not fit its KV cache,
and silently preempts requests when `max_num_seqs` full-length sequences do not fit. Both are
knowable from config.json and the GPU's memory. vLLM's own start-up log (`GPU KV cache size: N
tokens`) is the ground truth afterwards: `parse_kv_cache_log` reads it so the two can be compared,
and tests/unit/data/planner/validation.json holds the figures the planner is checked against.

Accounting (vLLM V1, vllm/v1/worker/gpu_worker.py determine_available_memory): KV per GPU =
memory x gpu_memory_utilization - weights/TP - the profiling pass's peak (activations, sampler
logits, non-torch memory) - its CUDA-graph estimate; `--kv-cache-memory-bytes` replaces all of it.
vLLM then logs KV / (bytes per token over all layers) as 'GPU KV cache size', also for models with
sliding-window layers (vllm/v1/core/kv_cache_utils.py: blocks // KV cache groups x block size):
the window only lowers what one request reserves (model.kv_bytes_per_request). Later vLLM
releases log max_concurrency x max_model_len there instead (vLLM issue #51041 quotes
_report_kv_cache_config), which for a hybrid model is a different number: compare such a log
with Plan.max_concurrency, not with kv_capacity_tokens.
The model arithmetic (MoE, MLA, sliding windows) is in vfleet/roles/preflight/_capacity/model.py.
Units: KiB/GiB are powers of two.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.strict_json import read_json
from vfleet.roles.preflight._capacity.draft import Draft, draft_kv_bytes_per_token, draft_of
from vfleet.roles.preflight._capacity.figures import check_cpu_space, check_inputs
from vfleet.roles.preflight._capacity.lora import lora_bytes_per_gpu, lora_reserve_bytes
from vfleet.roles.preflight._capacity.model import (  # noqa: F401  (the planner's public names)
    DTYPE_BYTES,
    TIED_BY_DEFAULT,
    ModelShape,
    activation_bytes_per_token,
    dtype_bytes,
    estimate_param_count,
    estimate_weight_bytes,
    kv_bytes,
    kv_bytes_per_request,
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
    kv_heads_per_gpu,
)
from vfleet.roles.preflight._capacity.quant import weight_bytes, weight_format
from vfleet.roles.preflight._fact_paths import model_dir
from vfleet.roles.preflight._model_files import INDEX_LIMIT, index_total_size, read_config
from vfleet.roles.preflight._safetensors_header import file_weight_bytes
from vfleet.roles.service import RANK_CHOICES, lora_slots, max_lora_rank

GIB = 1024**3
MIB = 1024**2

# Memory held back per GPU besides weights and KV cache, fitted to vLLM 0.20.0 on an H200 with a
# Llama-3.1-8B-shaped model (docs/evidence/h200-vllm-0.20.0/README.md: four starts varying
# max_num_batched_tokens, max_num_seqs and --enforce-eager; the terms below reproduce all four
# within 0.25 GiB, on the safe side, and predicted two later starts, a Qwen2.5-7B shape and an
# fp8 KV cache, within 0.3 % below vLLM's figure):
# - FIXED_RESERVE_BYTES = 1.125 GiB: what vLLM counts as non-KV besides the activation peak and
#   the sampler: non-torch allocations (cuBLAS workspaces, NCCL), the rotary cos/sin cache.
#   Measured 1.11 GiB at every batch size.
# - activation peak of the profiling forward pass over `max_num_batched_tokens` tokens: the
#   gate_up projection's output, tokens x 2 x intermediate/TP x dtype bytes (measured slope
#   57.7 KB/token for 57,344 predicted); for MoE layers the fused-expert buffers, tokens x top-k x
#   (3 x moe_intermediate/TP + hidden) + 2 x hidden (model.activation_bytes_per_token; measured
#   206.8 KB/token for Mixtral-8x7B, 204.8 predicted, and 79.1 for DeepSeek-V2-Lite, 83.5 predicted).
# - fp32 logits of the sampler's profiling run: max_num_seqs x vocab x 4.
# - CUDA_GRAPH_RESERVE_BYTES = 0.8 GiB unless enforce_eager: the CUDA graph pool plus the extra
#   peak of the compiled graph (0.59 GiB at max_num_seqs 256, 0.78 GiB at 1024 measured).
# It errs on the safe side (a little less KV than vLLM will find), which is the right direction
# for a plan that decides whether a configuration starts.
FIXED_RESERVE_BYTES = 1152 * MIB
CUDA_GRAPH_RESERVE_BYTES = 800 * MIB
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_BLOCK_SIZE = 16
MAX_SUGGESTED_SEQS = 1024


def safetensors_weight_bytes(path: str | Path) -> int | None:
    """Sum of numel x dtype size over every tensor of a file or a directory of *.safetensors,
    reading only the 8-byte header length and the JSON header of each file, each checked
    (_safetensors_header.py)."""
    return file_weight_bytes(path)


def weights_bytes_from_dir(path: str | Path) -> int | None:
    """Weight bytes of a model folder without reading tensors: model.safetensors.index.json's
    metadata.total_size when present (sharded checkpoints, exact for quantised ones), else the
    safetensors headers; None when the folder has neither (then the planner estimates). Every
    figure is a positive integer below model_files.MAX_WEIGHT_BYTES, or a one-line error."""
    p = Path(path)
    index = p / "model.safetensors.index.json"
    if index.exists():
        total = index_total_size(read_json(index, INDEX_LIMIT), str(index))
        if total:
            return total
    return safetensors_weight_bytes(p) if p.is_dir() else None


def reserve_bytes(
    shape: ModelShape,
    tp: int = 1,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    act_dtype_bytes: int = 2,
    enforce_eager: bool = False,
) -> int:
    """Per-GPU memory kept for everything but weights and KV (see FIXED_RESERVE_BYTES)."""
    tokens = max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    seqs = max_num_seqs or DEFAULT_MAX_NUM_SEQS
    act = tokens * activation_bytes_per_token(shape, tp, act_dtype_bytes)
    logits = seqs * int(shape.vocab or 0) * 4
    graphs = 0 if enforce_eager else CUDA_GRAPH_RESERVE_BYTES
    return FIXED_RESERVE_BYTES + act + logits + graphs


@dataclass
class Plan:
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    weights_bytes: int
    weights_source: str
    weights_bytes_per_gpu: int
    gpu_memory_bytes: int
    gpu_memory_utilization: float
    tensor_parallel_size: int
    budget_bytes_per_gpu: int
    reserve_bytes_per_gpu: int
    kv_cache_bytes_per_gpu: int
    kv_capacity_tokens: int
    max_model_len: int | None
    max_num_seqs: int | None
    max_concurrency: float | None
    suggested_max_model_len: int | None
    suggested_max_num_seqs: int | None
    status: str = "pass"
    warnings: list[str] = field(default_factory=list)
    lora_bytes_per_gpu: int = 0  # the LoRA adapters' slots (capacity/lora.py)
    draft_weights_bytes_per_gpu: int = 0  # a speculative draft model's weights
    draft_kv_bytes_per_token_per_gpu: int = 0  # its KV layers (in kv_bytes_per_token_per_gpu too)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan(
    config: dict[str, Any],
    gpu_memory_mib: int,
    *,
    tp: int = 1,
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    dtype: str | None = "auto",
    kv_cache_dtype: str | None = "auto",
    weights_bytes: int | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    reserve: int | None = None,
    max_num_batched_tokens: int | None = None,
    enforce_eager: bool = False,
    kv_cache_memory_bytes: int | None = None,
    config_label: str = "config.json",
    quantization: str | None = None,
    lora: tuple[int, int] | None = None,
    draft: Draft | None = None,
) -> Plan:
    """KV capacity of one TP group of identical GPUs, and what fits in it.

    weights: safetensors total when known (exact, and right for quantised checkpoints; scaled
    down when vLLM quantizes at load, `quantization: fp8`), else the estimate from config.json
    in the serving dtype and the checkpoint's quantization (capacity/quant.py). budget per GPU = memory x utilisation; KV per
    GPU = budget - weights/TP - reserve, or kv_cache_memory_bytes when given (vLLM then skips its
    own sizing: gpu_worker.determine_available_memory returns the flag as is); tokens = KV /
    per-GPU bytes per token, down to whole blocks. `config_label` names the config's file in
    errors; an impossible figure (capacity/figures.py) is refused, never planned with.
    `lora`: (max LoRA rank, slots) of a host serving adapters; their stacks (capacity/lora.py)
    come out of the KV cache like the weights. `draft`: a speculative draft's weights and KV
    layers (capacity/draft.py), in the same memory and the same KV pool as the target's."""
    check_inputs(
        gpu_memory_mib=gpu_memory_mib,
        tp=tp,
        gpu_memory_utilization=gpu_memory_utilization,
        weights_bytes=weights_bytes or None,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        kv_cache_memory_bytes=kv_cache_memory_bytes or None,
        block_size=block_size,
    )
    shape = ModelShape.from_config(config, config_label)
    model_dtype = shape.dtype if (not dtype or dtype == "auto") else dtype
    wb = dtype_bytes(model_dtype)
    kvb = dtype_bytes(model_dtype if (not kv_cache_dtype or kv_cache_dtype == "auto") else kv_cache_dtype)
    weights, source, note = _weights(shape, config, quantization, weights_bytes, wb, config_label)
    mem = int(gpu_memory_mib) * MIB
    budget = int(mem * float(gpu_memory_utilization))
    batched = max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    res = reserve if reserve is not None else reserve_bytes(shape, tp, batched, max_num_seqs, wb, enforce_eager)
    draft_kv = draft_kv_bytes_per_token(draft, shape, kvb, tp) if draft else 0
    draft_w = math.ceil(draft.weights_bytes / tp) if draft else 0
    per_tok_gpu = kv_bytes_per_token(shape, kvb, tp) + draft_kv
    lora_gpu = lora_bytes_per_gpu(shape, lora[0], lora[1], wb, tp) if lora else 0
    if lora and reserve is None:
        res += lora_reserve_bytes(lora[0], lora[1], enforce_eager)
    free_gpu = budget - math.ceil(weights / tp) - lora_gpu - draft_w - res
    kv_gpu = int(kv_cache_memory_bytes) if kv_cache_memory_bytes else free_gpu
    tokens = max(0, kv_gpu) // per_tok_gpu // block_size * block_size
    mml = max_model_len or shape.max_position_embeddings
    per_request = (
        (kv_bytes_per_request(shape, mml, batched, kvb, tp, block_size) + draft_kv * -(-mml // block_size) * block_size)
        if mml
        else None
    )
    p = Plan(
        kv_bytes_per_token=kv_bytes_per_token(shape, kvb),
        kv_bytes_per_token_per_gpu=per_tok_gpu,
        weights_bytes=weights,
        weights_source=source,
        weights_bytes_per_gpu=math.ceil(weights / tp),
        gpu_memory_bytes=mem,
        gpu_memory_utilization=float(gpu_memory_utilization),
        tensor_parallel_size=tp,
        budget_bytes_per_gpu=budget,
        reserve_bytes_per_gpu=res,
        kv_cache_bytes_per_gpu=max(0, kv_gpu),
        kv_capacity_tokens=tokens,
        max_model_len=mml,
        max_num_seqs=max_num_seqs,
        max_concurrency=(tokens * per_tok_gpu / per_request) if per_request else None,
        suggested_max_model_len=None,
        suggested_max_num_seqs=None,
        lora_bytes_per_gpu=lora_gpu,
        draft_weights_bytes_per_gpu=draft_w,
        draft_kv_bytes_per_token_per_gpu=draft_kv,
    )
    if note:
        p.warnings.append(note)
    if kv_cache_memory_bytes and kv_gpu > mem - math.ceil(weights / tp) - res:
        p.status = "fail"
        p.warnings.append(
            f"kv_cache_memory_bytes {kv_gpu / GIB:.1f} GiB + weights + reserve exceed the "
            f"GPU's {mem / GIB:.1f} GiB: vLLM runs out of memory allocating it"
        )
    if tokens <= 0:
        p.status = "fail"
        p.warnings.append(
            f"no room for KV cache: weights {weights / GIB:.1f} GiB / TP {tp} + reserve "
            f"{res / GIB:.1f} GiB exceed {gpu_memory_utilization:g} x {mem / GIB:.1f} GiB per GPU"
        )
        return p
    if mml:
        _check_fit(p, mml, max_num_seqs)
    return p


def _weights(
    shape: ModelShape,
    config: dict[str, Any],
    quantization: str | None,
    file_bytes: int | None,
    dense_bytes: int,
    label: str,
) -> tuple[int, str, str | None]:
    """(weight bytes vLLM holds, where the figure came from, a warning or None). The files'
    total is what a checkpoint holds, quantized or not; vLLM quantizing at load holds less,
    in the ratio of the two estimates."""
    fmt, note = weight_format(config, quantization, label)
    estimate = weight_bytes(shape, fmt, dense_bytes)
    method = f" ({fmt.method}{' at load' if fmt.at_load else ''})" if fmt else ""
    if not file_bytes:
        return estimate, "estimate" + method, note
    if fmt is not None and fmt.at_load:
        return round(file_bytes * estimate / weight_bytes(shape, None, dense_bytes)), "safetensors" + method, note
    return file_bytes, "safetensors", None


def _check_fit(p: Plan, mml: int, max_num_seqs: int | None) -> None:
    """vLLM refuses to start when one max_model_len request does not fit (concurrency < 1), and
    preempts when max_num_seqs of them do not; sliding-window layers make a request smaller than
    max_model_len tokens of every layer, so the test is on concurrency, not on tokens."""
    conc = p.max_concurrency or 0.0
    p.suggested_max_num_seqs = max(1, min(MAX_SUGGESTED_SEQS, int(conc)))
    p.suggested_max_model_len = mml if conc >= 1 else min(mml, p.kv_capacity_tokens)
    if conc < 1:
        p.status = "fail"
        p.warnings.append(
            f"max_model_len {mml} exceeds the KV cache ({p.kv_capacity_tokens} tokens): vLLM "
            f"refuses to start; use max_model_len <= {p.suggested_max_model_len}"
        )
    elif max_num_seqs and max_num_seqs > conc:
        p.status = "warn"
        p.warnings.append(
            f"max_num_seqs {max_num_seqs} x max_model_len {mml} > KV capacity {p.kv_capacity_tokens} "
            f"tokens ({conc:.2f}x concurrency): at full length only {int(conc)} fit, the rest get "
            f"preempted; suggested max_num_seqs {p.suggested_max_num_seqs}"
        )


def cpu_kv_capacity_tokens(
    config: dict[str, Any],
    cpu_kvcache_space_gib: float,
    kv_cache_dtype: str | None = "auto",
    dtype: str | None = "auto",
    config_label: str = "config.json",
    draft: Draft | None = None,
) -> int:
    """vLLM CPU build: the KV cache is exactly VLLM_CPU_KVCACHE_SPACE GiB, so
    tokens = GiB x 2^30 / KV bytes per token (what it logs as 'CPU KV cache size: N tokens'),
    a speculative draft's layers included (capacity/draft.py)."""
    check_cpu_space(cpu_kvcache_space_gib)
    shape = ModelShape.from_config(config, config_label)
    model_dtype = shape.dtype if (not dtype or dtype == "auto") else dtype
    kvb = dtype_bytes(model_dtype if (not kv_cache_dtype or kv_cache_dtype == "auto") else kv_cache_dtype)
    per_token = kv_bytes_per_token(shape, kvb) + (draft_kv_bytes_per_token(draft, shape, kvb, 1) if draft else 0)
    return int(float(cpu_kvcache_space_gib) * GIB) // per_token


# --- what vLLM itself says at start-up --------------------------------------------------------

_NUM = r"(\d[\d,_]*)"
KV_LOG_RE = re.compile(rf"(?:GPU|CPU) KV cache size:\s*{_NUM}\s*tokens")
V0_BLOCKS_RE = re.compile(rf"# GPU blocks:\s*{_NUM}")
CONCURRENCY_RE = re.compile(rf"Maximum concurrency for\s*{_NUM}\s*tokens per request:\s*([\d.,]+)x")


def _int(s: str) -> int:
    return int(s.replace(",", "").replace("_", ""))


def parse_kv_cache_log(text: str, block_size: int = DEFAULT_BLOCK_SIZE) -> int | None:
    """KV capacity in tokens from a vLLM start-up log (the last start wins): V1 'GPU KV cache
    size: 123,456 tokens', CPU build 'CPU KV cache size: N tokens', V0 '# GPU blocks: N' x
    block_size. None when the log has none of them."""
    m = list(KV_LOG_RE.finditer(text or ""))
    if m:
        return _int(m[-1].group(1))
    b = list(V0_BLOCKS_RE.finditer(text or ""))
    if b:
        return _int(b[-1].group(1)) * block_size
    return None


def parse_max_concurrency(text: str) -> float | None:
    """'Maximum concurrency for 4,096 tokens per request: 12.34x' -> 12.34 (last one wins)."""
    m = list(CONCURRENCY_RE.finditer(text or ""))
    return float(m[-1].group(2).replace(",", "")) if m else None


def parse_max_concurrency_detail(text: str) -> tuple[int, float] | None:
    """(tokens per request, concurrency) from the same line."""
    m = list(CONCURRENCY_RE.finditer(text or ""))
    return (_int(m[-1].group(1)), float(m[-1].group(2).replace(",", ""))) if m else None


# --- from a host's config and facts -----------------------------------------------------------


def plan_for_host(cfg: HostConfig, facts: dict[str, Any]) -> Plan | None:
    """Plan with the host's smallest GPU in the TP group; None without config.json or GPUs."""
    config = facts.get("model_config")
    gpus = facts.get("gpus") or []
    if not config or not gpus:
        return None
    mems = [g.get("memory_total_mib") for g in gpus if g.get("memory_total_mib")]
    if not mems:
        return None
    return plan(
        config,
        min(mems),
        tp=cfg.tensor_parallel_size,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        max_model_len=cfg.max_model_len,
        max_num_seqs=cfg.max_num_seqs,
        dtype=cfg.dtype,
        kv_cache_dtype=cfg.kv_cache_dtype,
        weights_bytes=facts.get("weights_bytes"),
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        enforce_eager=cfg.enforce_eager,
        kv_cache_memory_bytes=cfg.kv_cache_memory_bytes,
        config_label=f"{model_dir(cfg)}/config.json",
        quantization=cfg.quantization,
        lora=lora_of(cfg, facts),
        draft=draft_of(cfg.speculative, facts),
    )


def lora_of(cfg: HostConfig, facts: dict[str, Any]) -> tuple[int, int] | None:
    """(max rank, slots) of the host's adapters from their facts (_adapter_facts.py), or None
    without adapters or while a rank is unknown (the adapter checks say why)."""
    ranks = [f.get("rank") for f in (facts.get("lora_adapters") or {}).values()]
    if not cfg.lora_adapters or not ranks or not all(isinstance(r, int) and 1 <= r <= RANK_CHOICES[-1] for r in ranks):
        return None
    return max_lora_rank(ranks), lora_slots(cfg)


def load_config(path: str | Path) -> dict[str, Any]:
    """config.json from a file or a model directory, read bounded and checked (_model_files.py)."""
    return read_config(path)
