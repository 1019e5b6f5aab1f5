"""Capacity planner: how many tokens of KV cache a host has for a model, and what that means for
`max_model_len` and `max_num_seqs`, before vLLM is ever started.

Why plan at all: vLLM refuses to start when `max_model_len` exceeds its KV cache, and silently
preempts requests when `max_num_seqs` full-length sequences do not fit. Both are knowable from
config.json and the GPU's memory. vLLM's own start-up log (`GPU KV cache size: N tokens`) is the
ground truth afterwards: `parse_kv_cache_log` reads it so the two can be compared.

Arithmetic (vllm-facts.md, "KV cache arithmetic"):
    KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x dtype_bytes
    per GPU with tensor parallelism: kv_heads / TP (at least 1: vLLM replicates a KV head when
    TP > kv_heads).
Units: KiB/GiB are powers of two. The seed documents' "320 KB per token" is 327,680 B = 320 KiB,
and "7.0 GiB" for Qwen2.5-7B is exact in GiB; their "about 2.6 GB" for 8,192 tokens is
2,684,354,560 B = 2.5 GiB = 2.68 GB (decimal), i.e. rounding aside the same number.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

GIB = 1024 ** 3
MIB = 1024 ** 2

DTYPE_BYTES = {
    "float16": 2, "half": 2, "fp16": 2, "bfloat16": 2, "bf16": 2,
    "float32": 4, "float": 4, "fp32": 4,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1,
}

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
#   57.7 KB/token for 57,344 predicted).
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
# Model types whose transformers config class defaults tie_word_embeddings to True, so a config.json
# that omits the key shares the embedding with the LM head (GemmaConfig, Gemma2Config, Gemma3TextConfig;
# PretrainedConfig's own default is True too, but Llama/Qwen2/Mistral configs override it to False).
TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3", "gemma3_text"}


def dtype_bytes(dtype: str | None, default: int = 2) -> int:
    """Bytes per element; 'auto'/unknown -> 2 (vLLM serves fp32 checkpoints in 16-bit)."""
    if not dtype or str(dtype).lower() == "auto":
        return default
    return DTYPE_BYTES.get(str(dtype).lower().replace("torch.", ""), default)


@dataclass
class ModelShape:
    """The config.json fields the arithmetic needs, with HF's defaults applied."""
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    intermediate: int | None
    vocab: int | None
    tie_word_embeddings: bool
    dtype: str | None
    attention_bias: bool
    max_position_embeddings: int | None
    model_type: str | None

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "ModelShape":
        c = dict(config)
        if isinstance(c.get("text_config"), dict):  # multimodal wrappers keep the LM inside
            c = {**c, **c["text_config"]}
        heads = int(c["num_attention_heads"])
        hidden = int(c.get("hidden_size") or 0)
        head_dim = c.get("head_dim") or (hidden // heads if hidden else None)
        if not head_dim:
            raise ValueError("config.json has neither head_dim nor hidden_size")
        model_type = c.get("model_type")
        return cls(
            layers=int(c["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(c.get("num_key_value_heads") or heads),
            head_dim=int(head_dim),
            hidden=hidden,
            intermediate=c.get("intermediate_size"),
            vocab=c.get("vocab_size"),
            tie_word_embeddings=bool(c.get("tie_word_embeddings", model_type in TIED_BY_DEFAULT)),
            dtype=c.get("torch_dtype") or c.get("dtype"),
            # Qwen2 puts a bias on q/k/v without saying so in config.json.
            attention_bias=bool(c.get("attention_bias", model_type == "qwen2")),
            max_position_embeddings=c.get("max_position_embeddings"),
            model_type=model_type,
        )


def kv_heads_per_gpu(shape: ModelShape, tp: int = 1) -> int:
    """KV heads each GPU stores: split across TP, replicated (>= 1) when TP exceeds them."""
    return max(1, math.ceil(shape.kv_heads / max(1, tp)))


def kv_bytes_per_token(shape: ModelShape, kv_dtype_bytes: int = 2, tp: int = 1) -> int:
    """2 x layers x kv_heads x head_dim x dtype_bytes; per GPU when tp > 1."""
    heads = shape.kv_heads if tp <= 1 else kv_heads_per_gpu(shape, tp)
    return 2 * shape.layers * heads * shape.head_dim * kv_dtype_bytes


def kv_bytes_per_token_per_layer(shape: ModelShape, kv_dtype_bytes: int = 2) -> int:
    return 2 * shape.kv_heads * shape.head_dim * kv_dtype_bytes


def kv_bytes(shape: ModelShape, tokens: int, kv_dtype_bytes: int = 2, tp: int = 1) -> int:
    return tokens * kv_bytes_per_token(shape, kv_dtype_bytes, tp)


def estimate_param_count(shape: ModelShape) -> int:
    """Parameters of a Llama-like decoder: embeddings + layers x (attention + gated MLP + 2 norms)
    + final norm + lm_head (unless tied). Qwen2.5-7B-Instruct comes out at 7.62e9, as published."""
    if not (shape.hidden and shape.intermediate and shape.vocab):
        raise ValueError("estimate needs hidden_size, intermediate_size and vocab_size")
    h, q, kv = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    attn = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if shape.attention_bias else 0)
    mlp = 3 * h * int(shape.intermediate)
    per_layer = attn + mlp + 2 * h
    embed = int(shape.vocab) * h
    lm_head = 0 if shape.tie_word_embeddings else int(shape.vocab) * h
    return embed + shape.layers * per_layer + h + lm_head


def estimate_weight_bytes(shape: ModelShape, dtype: str | None = None) -> int:
    return estimate_param_count(shape) * dtype_bytes(dtype or shape.dtype)


def safetensors_weight_bytes(path: str | Path) -> int | None:
    """Sum of numel x dtype size over every tensor of a file or a directory of *.safetensors,
    reading only the 8-byte header length and the JSON header of each file."""
    from roles.preflight.parsers.misc import read_safetensors_header, tensor_bytes

    p = Path(path)
    files = sorted(p.glob("*.safetensors")) if p.is_dir() else [p]
    files = [f for f in files if f.is_file()]
    if not files:
        return None
    return sum(tensor_bytes(read_safetensors_header(f)) for f in files)


def reserve_bytes(shape: ModelShape, tp: int = 1, max_num_batched_tokens: int | None = None,
                  max_num_seqs: int | None = None, act_dtype_bytes: int = 2,
                  enforce_eager: bool = False) -> int:
    """Per-GPU memory kept for everything but weights and KV (see FIXED_RESERVE_BYTES)."""
    tokens = max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    seqs = max_num_seqs or DEFAULT_MAX_NUM_SEQS
    inter = int(shape.intermediate or 4 * shape.hidden)
    act = tokens * (2 * inter // max(1, tp)) * act_dtype_bytes
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan(config: dict[str, Any], gpu_memory_mib: int, *, tp: int = 1,
         gpu_memory_utilization: float = 0.9, max_model_len: int | None = None,
         max_num_seqs: int | None = None, dtype: str | None = "auto",
         kv_cache_dtype: str | None = "auto", weights_bytes: int | None = None,
         block_size: int = DEFAULT_BLOCK_SIZE, reserve: int | None = None,
         max_num_batched_tokens: int | None = None, enforce_eager: bool = False) -> Plan:
    """KV capacity of one TP group of identical GPUs, and what fits in it.

    weights: safetensors total when known (exact, and right for quantised checkpoints), else the
    Llama-like estimate in the serving dtype. budget per GPU = memory x utilisation; KV per GPU =
    budget - weights/TP - reserve; tokens = KV / per-GPU bytes per token, down to whole blocks."""
    shape = ModelShape.from_config(config)
    model_dtype = shape.dtype if (not dtype or dtype == "auto") else dtype
    wb = dtype_bytes(model_dtype)
    kvb = dtype_bytes(model_dtype if (not kv_cache_dtype or kv_cache_dtype == "auto") else kv_cache_dtype)
    tp = max(1, int(tp))
    if weights_bytes:
        weights, source = int(weights_bytes), "safetensors"
    else:
        weights, source = estimate_param_count(shape) * wb, "estimate"
    mem = int(gpu_memory_mib) * MIB
    budget = int(mem * float(gpu_memory_utilization))
    res = reserve if reserve is not None else reserve_bytes(shape, tp, max_num_batched_tokens,
                                                             max_num_seqs, wb, enforce_eager)
    per_tok_gpu = kv_bytes_per_token(shape, kvb, tp)
    kv_gpu = budget - math.ceil(weights / tp) - res
    tokens = max(0, kv_gpu) // per_tok_gpu // block_size * block_size
    mml = max_model_len or shape.max_position_embeddings
    p = Plan(
        kv_bytes_per_token=kv_bytes_per_token(shape, kvb), kv_bytes_per_token_per_gpu=per_tok_gpu,
        weights_bytes=weights, weights_source=source, weights_bytes_per_gpu=math.ceil(weights / tp),
        gpu_memory_bytes=mem, gpu_memory_utilization=float(gpu_memory_utilization),
        tensor_parallel_size=tp, budget_bytes_per_gpu=budget, reserve_bytes_per_gpu=res,
        kv_cache_bytes_per_gpu=max(0, kv_gpu), kv_capacity_tokens=tokens, max_model_len=mml,
        max_num_seqs=max_num_seqs, max_concurrency=(tokens / mml) if mml else None,
        suggested_max_model_len=None, suggested_max_num_seqs=None)
    if tokens <= 0:
        p.status = "fail"
        p.warnings.append(
            f"no room for KV cache: weights {weights / GIB:.1f} GiB / TP {tp} + reserve "
            f"{res / GIB:.1f} GiB exceed {gpu_memory_utilization:g} x {mem / GIB:.1f} GiB per GPU")
        return p
    if mml:
        p.suggested_max_model_len = min(mml, tokens)
        p.suggested_max_num_seqs = max(1, min(MAX_SUGGESTED_SEQS, tokens // mml)) if tokens >= mml else 1
        if mml > tokens:
            p.status = "fail"
            p.warnings.append(f"max_model_len {mml} exceeds the KV cache ({tokens} tokens): vLLM "
                              f"refuses to start; use max_model_len <= {tokens}")
        elif max_num_seqs and max_num_seqs * mml > tokens:
            p.status = "warn"
            p.warnings.append(
                f"max_num_seqs {max_num_seqs} x max_model_len {mml} = {max_num_seqs * mml} tokens "
                f"> KV capacity {tokens}: at full length only {tokens // mml} fit, the rest get "
                f"preempted; suggested max_num_seqs {p.suggested_max_num_seqs}")
    return p


def cpu_kv_capacity_tokens(config: dict[str, Any], cpu_kvcache_space_gib: float,
                           kv_cache_dtype: str | None = "auto", dtype: str | None = "auto") -> int:
    """vLLM CPU build: the KV cache is exactly VLLM_CPU_KVCACHE_SPACE GiB, so
    tokens = GiB x 2^30 / KV bytes per token (what it logs as 'CPU KV cache size: N tokens')."""
    shape = ModelShape.from_config(config)
    model_dtype = shape.dtype if (not dtype or dtype == "auto") else dtype
    kvb = dtype_bytes(model_dtype if (not kv_cache_dtype or kv_cache_dtype == "auto") else kv_cache_dtype)
    return int(float(cpu_kvcache_space_gib) * GIB) // kv_bytes_per_token(shape, kvb)


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


# --- from a host's vars and facts -------------------------------------------------------------

def plan_for_host(vars: dict[str, Any], facts: dict[str, Any]) -> Plan | None:
    """Plan with the host's smallest GPU in the TP group; None without config.json or GPUs."""
    config = facts.get("model_config") or vars.get("model_config")
    gpus = facts.get("gpus") or []
    if not config or not gpus:
        return None
    mems = [g.get("memory_total_mib") for g in gpus if g.get("memory_total_mib")]
    if not mems:
        return None
    return plan(config, min(mems), tp=int(vars.get("tensor_parallel_size") or 1),
                gpu_memory_utilization=float(vars.get("gpu_memory_utilization") or 0.9),
                max_model_len=vars.get("max_model_len"), max_num_seqs=vars.get("max_num_seqs"),
                dtype=vars.get("dtype") or "auto", kv_cache_dtype=vars.get("kv_cache_dtype") or "auto",
                weights_bytes=facts.get("weights_bytes"),
                max_num_batched_tokens=vars.get("max_num_batched_tokens"),
                enforce_eager=bool(vars.get("enforce_eager")))


def load_config(path: str | Path) -> dict[str, Any]:
    """config.json from a file or a model directory."""
    p = Path(path)
    return json.loads((p / "config.json" if p.is_dir() else p).read_text())
