"""What a model's config.json says about its memory: parameter count (dense, MoE, MLA) and KV
bytes per token (standard attention, MLA, sliding-window layers).

Each rule follows how vLLM builds the model, not how the checkpoint is named:
- MoE (vllm/model_executor/models/mixtral.py, qwen2_moe.py, deepseek_v2.py): every expert is a
  full gated MLP of moe_intermediate_size (Mixtral: intermediate_size), all resident on the GPU;
  shared experts (DeepSeek n_shared_experts x moe_intermediate_size, Qwen2-MoE
  shared_expert_intermediate_size) are one more MLP; DeepSeek's first_k_dense_replace layers and
  Qwen2-MoE's mlp_only_layers stay dense. Counting them as one dense MLP made Mixtral-8x7B 13.5 GB
  instead of 93.4 GB.
- MLA (DeepSeek-V2/V3, kv_lora_rank set): vLLM's MLAAttentionSpec stores one latent of
  kv_lora_rank + qk_rope_head_dim per layer and token (no separate K and V, one "head"), and the
  latent is replicated on every TP rank, not split.
- Sliding window (vllm/v1/kv_cache_interface.py, SlidingWindowSpec.max_memory_usage_bytes): a
  windowed layer holds at most min(window - 1 + max_num_batched_tokens, max_model_len) tokens per
  request plus one block; full-attention layers hold max_model_len.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from vfleet.engine.strict_json import JsonFileError, nonneg_int, positive_int
from vfleet.roles.preflight._model_files import (
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    check_config,
    config_view,
)

DTYPE_BYTES = {
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "int8": 1,
}
# Model types whose transformers config class defaults tie_word_embeddings to True, so a config.json
# that omits the key shares the embedding with the LM head (GemmaConfig, Gemma2Config, Gemma3TextConfig;
# PretrainedConfig's own default is True too, but Llama/Qwen2/Mistral configs override it to False).
TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3", "gemma3_text"}
# Where transformers' config class, not config.json, says which layers are windowed: Gemma2Config
# alternates (layer i slides when (i + 1) % 2), Gemma3TextConfig slides 5 of every 6
# (sliding_window_pattern); newer config.json files spell it out as layer_types.
SLIDING_PATTERN_DEFAULT = {"gemma2": 2, "gemma3": 6, "gemma3_text": 6}
# Config classes whose use_sliding_window defaults to False (Qwen2Config, Qwen2MoeConfig, Qwen3Config,
# Qwen3MoeConfig): their config.json carries a sliding_window that is off unless switched on.
SLIDING_OFF_BY_DEFAULT = {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"}
MISSING_FIX = "the planner needs it: use the model's own config.json"


def dtype_bytes(dtype: str | None, default: int = 2) -> int:
    """Bytes per element; 'auto'/unknown -> 2 (vLLM serves fp32 checkpoints in 16-bit)."""
    if not dtype or str(dtype).lower() == "auto":
        return default
    return DTYPE_BYTES.get(str(dtype).lower().replace("torch.", ""), default)


@dataclass
class MoE:
    """Routed and shared experts, and which layers have them."""

    experts: int
    intermediate: int
    per_token: int
    shared_intermediate: int
    dense_layers: frozenset[int]

    @classmethod
    def from_config(cls, c: dict[str, Any], layers: int, label: str) -> "MoE | None":
        """From a config that model_files.check_config passed: types and ranges are known, so
        only a missing key can be wrong here."""
        experts = c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts") or 0
        if experts <= 1:
            return None
        inter = c.get("moe_intermediate_size") or positive_int(
            c, "intermediate_size", label, MAX_INTERMEDIATE, fix=MISSING_FIX
        )
        shared = (c.get("shared_expert_intermediate_size") or 0) + (c.get("n_shared_experts") or 0) * inter
        first_dense = c.get("first_k_dense_replace") or 0
        freq = c.get("moe_layer_freq") or c.get("decoder_sparse_step") or 1
        step_ok = (lambda i: i % freq == 0) if "moe_layer_freq" in c else (lambda i: (i + 1) % freq == 0)
        dense = {i for i in range(layers) if i < first_dense or not step_ok(i)}
        dense |= {i for i in c.get("mlp_only_layers") or [] if i < layers}
        return cls(experts, inter, c.get("num_experts_per_tok") or 1, shared, frozenset(dense))


@dataclass
class MLA:
    """DeepSeek's multi-head latent attention dimensions."""

    kv_lora_rank: int
    rope_dim: int
    nope_dim: int
    v_dim: int
    q_lora_rank: int | None

    @classmethod
    def from_config(cls, c: dict[str, Any], label: str) -> "MLA | None":
        if c.get("kv_lora_rank") is None:
            return None
        dims = [
            nonneg_int(c, k, label, MAX_HIDDEN, required=True, fix=MISSING_FIX)
            for k in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
        ]
        return cls(c["kv_lora_rank"], dims[0], dims[1], dims[2], c.get("q_lora_rank"))


def _sliding_layers(c: dict[str, Any], layers: int) -> int:
    """How many layers vLLM gives a SlidingWindowSpec (0 when the window is off or absent)."""
    switched_on = c.get("use_sliding_window", c.get("model_type") not in SLIDING_OFF_BY_DEFAULT)
    if not c.get("sliding_window") or not switched_on:
        return 0
    if isinstance(c.get("layer_types"), list):
        return min(layers, sum(1 for t in c["layer_types"] if t == "sliding_attention"))
    if c.get("model_type") in SLIDING_OFF_BY_DEFAULT and c.get("max_window_layers") is not None:
        return max(0, layers - c["max_window_layers"])  # Qwen2: layers from max_window_layers on
    pattern = c.get("sliding_window_pattern") or SLIDING_PATTERN_DEFAULT.get(c.get("model_type"))
    if pattern:
        return sum(1 for i in range(layers) if (i + 1) % pattern)
    return layers  # Mistral-7B-v0.1 and others: every layer is windowed


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
    moe: MoE | None = None
    mla: MLA | None = None
    sliding_window: int | None = None
    sliding_layers: int = 0

    label: str = "config.json"

    @classmethod
    def from_config(cls, config: dict[str, Any], label: str = "config.json") -> "ModelShape":
        """The shape, from a config.json held to model_files.check_config's bounds (a count read
        from it drives loops and figures); a missing or impossible key is a one-line
        JsonFileError naming `label` (the file) and the key."""
        c = config_view(check_config(config, label))  # multimodal wrappers keep the LM in text_config
        heads = positive_int(c, "num_attention_heads", label, MAX_HEADS, fix=MISSING_FIX)
        layers = positive_int(c, "num_hidden_layers", label, MAX_LAYERS, fix=MISSING_FIX)
        hidden = c.get("hidden_size") or 0
        head_dim = c.get("head_dim") or hidden // heads
        if not head_dim:
            raise JsonFileError(
                f"{label}: key 'head_dim' is missing and 'hidden_size' "
                f"({hidden or 'missing'}) gives none over {heads} heads; {MISSING_FIX}"
            )
        model_type = c.get("model_type")
        sliding = _sliding_layers(c, layers)
        return cls(
            layers=layers,
            heads=heads,
            kv_heads=c.get("num_key_value_heads") or heads,
            head_dim=head_dim,
            hidden=hidden,
            intermediate=c.get("intermediate_size"),
            vocab=c.get("vocab_size"),
            tie_word_embeddings=bool(c.get("tie_word_embeddings", model_type in TIED_BY_DEFAULT)),
            dtype=c.get("torch_dtype") or c.get("dtype"),
            # Qwen2 puts a bias on q/k/v without saying so in config.json.
            attention_bias=bool(c.get("attention_bias", model_type in ("qwen2", "qwen2_moe"))),
            max_position_embeddings=c.get("max_position_embeddings"),
            model_type=model_type,
            moe=MoE.from_config(c, layers, label),
            mla=MLA.from_config(c, label),
            sliding_window=c["sliding_window"] if sliding else None,
            sliding_layers=sliding,
            label=label,
        )


# --- KV bytes ----------------------------------------------------------------------------------


def kv_heads_per_gpu(shape: ModelShape, tp: int = 1) -> int:
    """KV heads each GPU stores: split across TP, replicated (>= 1) when TP exceeds them."""
    return max(1, math.ceil(shape.kv_heads / max(1, tp)))


def kv_bytes_per_token_per_layer(shape: ModelShape, kv_dtype_bytes: int = 2, tp: int = 1) -> int:
    """One layer, one token, one GPU: 2 x kv_heads/TP x head_dim, or MLA's replicated latent."""
    if shape.mla:
        return (shape.mla.kv_lora_rank + shape.mla.rope_dim) * kv_dtype_bytes
    heads = shape.kv_heads if tp <= 1 else kv_heads_per_gpu(shape, tp)
    return 2 * heads * shape.head_dim * kv_dtype_bytes


def kv_bytes_per_token(shape: ModelShape, kv_dtype_bytes: int = 2, tp: int = 1) -> int:
    """All layers, one token, per GPU when tp > 1: the unit of vLLM's 'GPU KV cache size'."""
    return shape.layers * kv_bytes_per_token_per_layer(shape, kv_dtype_bytes, tp)


def kv_bytes(shape: ModelShape, tokens: int, kv_dtype_bytes: int = 2, tp: int = 1) -> int:
    return tokens * kv_bytes_per_token(shape, kv_dtype_bytes, tp)


def kv_bytes_per_request(
    shape: ModelShape,
    max_model_len: int,
    max_num_batched_tokens: int,
    kv_dtype_bytes: int = 2,
    tp: int = 1,
    block_size: int = 16,
) -> int:
    """KV one request of max_model_len tokens reserves, as vLLM's admission check counts it:
    full layers whole blocks of max_model_len, windowed layers
    cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block) + 1 blocks."""
    per_layer_block = kv_bytes_per_token_per_layer(shape, kv_dtype_bytes, tp) * block_size
    full = math.ceil(max_model_len / block_size)
    sliding = full
    if shape.sliding_layers:
        sliding = math.ceil(min(shape.sliding_window - 1 + max_num_batched_tokens, max_model_len) / block_size) + 1
    full_layers = shape.layers - shape.sliding_layers
    return per_layer_block * (full_layers * full + shape.sliding_layers * sliding)


# --- parameters --------------------------------------------------------------------------------


class Module(NamedTuple):
    """One weight of the model as vLLM names it: `params` summed over the module's experts,
    `inputs` its input features (the axis a quantization group runs along), `linear` when it is
    a Linear layer a quantization method may convert (norms, biases, embeddings and the MoE
    router are not: vLLM builds the router without a quant_config)."""

    name: str
    params: int
    linear: bool
    inputs: int = 1


def _attention_modules(shape: ModelShape, p: str) -> list[Module]:
    h = shape.hidden
    if shape.mla:
        m = shape.mla
        qk = shape.heads * (m.nope_dim + m.rope_dim)
        q = (
            [
                Module(f"{p}.q_a_proj", h * m.q_lora_rank, True, h),
                Module(f"{p}.q_a_layernorm", m.q_lora_rank, False),
                Module(f"{p}.q_b_proj", m.q_lora_rank * qk, True, m.q_lora_rank),
            ]
            if m.q_lora_rank
            else [Module(f"{p}.q_proj", h * qk, True, h)]
        )
        return q + [
            Module(f"{p}.kv_a_proj_with_mqa", h * (m.kv_lora_rank + m.rope_dim), True, h),
            Module(f"{p}.kv_a_layernorm", m.kv_lora_rank, False),
            Module(f"{p}.kv_b_proj", m.kv_lora_rank * shape.heads * (m.nope_dim + m.v_dim), True, m.kv_lora_rank),
            Module(f"{p}.o_proj", shape.heads * m.v_dim * h, True, shape.heads * m.v_dim),
        ]
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    out = [
        Module(f"{p}.q_proj", h * q, True, h),
        Module(f"{p}.k_proj", h * kv, True, h),
        Module(f"{p}.v_proj", h * kv, True, h),
        Module(f"{p}.o_proj", q * h, True, q),
    ]
    return out + ([Module(f"{p}.qkv_bias", q + 2 * kv, False)] if shape.attention_bias else [])


def _mlp_modules(shape: ModelShape, layer: int, p: str) -> list[Module]:
    """Gated MLP (3 x hidden x intermediate); an MoE layer holds every expert, the router and the
    shared experts (vLLM loads them all on each GPU: expert weights are split by TP, not skipped)."""
    h, moe = shape.hidden, shape.moe
    if moe is None or layer in moe.dense_layers:
        if not shape.intermediate:
            raise JsonFileError(
                f"{shape.label}: key 'intermediate_size' is missing (layer {layer} is a dense MLP); {MISSING_FIX}"
            )
        i = shape.intermediate
        return [
            Module(f"{p}.gate_proj", h * i, True, h),
            Module(f"{p}.up_proj", h * i, True, h),
            Module(f"{p}.down_proj", i * h, True, i),
        ]
    out = [
        Module(f"{p}.experts", moe.experts * 3 * h * moe.intermediate, True, h),
        Module(f"{p}.gate", h * moe.experts, False),
    ]
    if moe.shared_intermediate:
        out.append(Module(f"{p}.shared_experts", 3 * h * moe.shared_intermediate, True, h))
    return out


def _layer_modules(shape: ModelShape, i: int) -> list[Module]:
    p = f"model.layers.{i}"
    return (
        _attention_modules(shape, f"{p}.self_attn")
        + _mlp_modules(shape, i, f"{p}.mlp")
        + [Module(f"{p}.layernorms", 2 * shape.hidden, False)]
    )


def grouped_modules(shape: ModelShape) -> list[tuple[Module, int]]:
    """Every weight of a decoder as (module, how many layers have it): embeddings, per layer
    attention, MLP or experts and the two norms (named after the first layer of their kind:
    dense or MoE), the final norm and lm_head (unless tied). Grouped because a config may claim
    10,000 layers (model_files.MAX_LAYERS) and the planner runs once per TP x PP layout."""
    if not (shape.hidden and (shape.intermediate or shape.moe) and shape.vocab):
        raise JsonFileError(
            f"{shape.label}: the weight estimate needs hidden_size, intermediate_size and "
            "vocab_size; add them, or give the weights' size (model_size_bytes, or the "
            "safetensors files beside config.json)"
        )
    h, vocab = shape.hidden, int(shape.vocab)
    dense = range(shape.layers) if shape.moe is None else sorted(i for i in shape.moe.dense_layers if i < shape.layers)
    kinds = [(min(dense), len(dense))] if dense else []
    if shape.moe is not None and len(dense) < shape.layers:
        kinds.append(
            (next(i for i in range(shape.layers) if i not in shape.moe.dense_layers), shape.layers - len(dense))
        )
    out = [(Module("model.embed_tokens", vocab * h, False), 1)]
    out += [(m, n) for i, n in kinds for m in _layer_modules(shape, i)]
    out.append((Module("model.norm", h, False), 1))
    if not shape.tie_word_embeddings:
        out.append((Module("lm_head", vocab * h, True, h), 1))
    return out


def weight_modules(shape: ModelShape) -> list[Module]:
    """Every weight of a decoder, one entry per layer, named as in the checkpoint (what an
    ignore list naming one layer's module is matched against; capacity/quant.py)."""
    grouped = grouped_modules(shape)
    return (
        [m for m, _ in grouped[:1]]
        + [m for i in range(shape.layers) for m in _layer_modules(shape, i)]
        + [m for m, _ in grouped if m.name in ("model.norm", "lm_head")]
    )


def estimate_param_count(shape: ModelShape) -> int:
    """Parameters of a decoder (grouped_modules summed). Qwen2.5-7B-Instruct comes out at 7.62e9,
    Mixtral-8x7B at 46.7e9, DeepSeek-V2-Lite at 15.7e9, as published."""
    return sum(m.params * n for m, n in grouped_modules(shape))


def estimate_weight_bytes(shape: ModelShape, dtype: str | None = None) -> int:
    return estimate_param_count(shape) * dtype_bytes(dtype or shape.dtype)


def activation_bytes_per_token(shape: ModelShape, tp: int = 1, act_dtype_bytes: int = 2) -> int:
    """Per batched token, the profiling pass's activation peak (see reserve_bytes): a dense MLP's
    gate_up output (2 x intermediate/TP), or an MoE layer's fused-expert buffers, each token
    copied to top-k experts (w1 output 2 x I, activation I, w2 output hidden) plus the layer's
    input and output; the larger of the two when the model has both kinds of layer."""
    tp = max(1, tp)
    dense = 2 * int(shape.intermediate or 4 * shape.hidden) // tp
    moe = shape.moe
    if moe is None:
        return dense * act_dtype_bytes
    routed = moe.per_token * (3 * moe.intermediate // tp + shape.hidden) + 2 * shape.hidden
    return max(dense if moe.dense_layers else 0, routed) * act_dtype_bytes
