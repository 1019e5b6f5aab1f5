"""The one reader of a model folder's JSON files (config.json, tokenizer_config.json,
model.safetensors.index.json), and the bounds every figure read from them must keep.

Why bounds: a checkpoint is someone else's file. Each count read from it drives arithmetic or a
loop in the planner (layers drive per-layer loops, the layer count of a pipeline stage, the
list of sliding layers), and its figures end up in the plan and the gateway's max_conns. So a
count outside what any real model has (num_hidden_layers 10**12, heads 0 or -8, a negative
total_size) is refused here with one line naming the file and the key, before anything uses
it. The bounds are far above every published model (the largest have ~160 layers, 128 heads,
a 256k vocabulary, a 10M context, ~2 TB of weights), so they only stop impossible figures.

`check_config` validates the keys the checks and the planner read, where present: an absent
key is a config that says nothing (the planner then says which key it lacks), a present one
of the wrong type or range is refused. It is applied to every config.json however it came:
read here from a local folder, from a host's gather output, or from a snapshot's facts.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from vfleet.engine.strict_json import (
    MIB,
    JsonFileError,
    boolean,
    loads_strict,
    mapping,
    nonneg_int,
    positive_int,
    positive_number,
    read_json,
    short_str,
    type_name,
)

__all__ = [
    "JsonFileError",
    "CONFIG_LIMIT",
    "TOKENIZER_CONFIG_LIMIT",
    "INDEX_LIMIT",
    "MAX_LAYERS",
    "MAX_HEADS",
    "MAX_VOCAB",
    "MAX_CONTEXT",
    "MAX_WEIGHT_BYTES",
    "check_config",
    "config_view",
    "parse_config",
    "read_config",
    "parse_tokenizer_meta",
    "check_tokenizer_meta",
    "index_total_size",
]

# Read limits. config.json files are a few KB; tokenizer_config.json can carry tens of thousands
# of added tokens (Gemma 3's is 1.2 MB); the shard index lists every tensor (DeepSeek-V3's ~90k
# entries are ~8 MB).
CONFIG_LIMIT = 4 * MIB
TOKENIZER_CONFIG_LIMIT = 16 * MIB
INDEX_LIMIT = 64 * MIB

MAX_LAYERS = 10_000
MAX_HEADS = 100_000
MAX_VOCAB = 10**8
MAX_CONTEXT = 10**8
MAX_HIDDEN = 10**6  # hidden_size, head_dim, the MLA ranks
MAX_INTERMEDIATE = 10**7
MAX_EXPERTS = 100_000
MAX_ROPE_FACTOR = 10_000.0
MAX_WEIGHT_BYTES = 10**15  # 1 PB: some 500 times the largest checkpoint published
MAX_AUTO_MAP = 1_000

FIX = "fix the model's config.json"

_Check = Callable[[Mapping[str, Any], str, str], Any]


def _pos(upper: int) -> _Check:
    return lambda obj, key, label: positive_int(obj, key, label, upper, required=False, fix=FIX)


def _nonneg(upper: int) -> _Check:
    return lambda obj, key, label: nonneg_int(obj, key, label, upper, fix=FIX)


def _bool(obj: Mapping[str, Any], key: str, label: str) -> Any:
    return boolean(obj, key, label, fix=FIX)


def _str(obj: Mapping[str, Any], key: str, label: str) -> Any:
    return short_str(obj, key, label, fix=FIX)


def _layer_types(obj: Mapping[str, Any], key: str, label: str) -> None:
    value = obj.get(key)
    if value is None:
        return
    if (
        not isinstance(value, list)
        or len(value) > MAX_LAYERS
        or not all(isinstance(t, str) and len(t) <= 64 for t in value)
    ):
        raise JsonFileError(
            f"{label}: key '{key}': expected a list of at most {MAX_LAYERS} layer names, "
            f"got {type_name(value) if not isinstance(value, list) else 'another list'}; {FIX}"
        )


def _layer_list(obj: Mapping[str, Any], key: str, label: str) -> None:
    value = obj.get(key)
    if value is None:
        return
    if (
        not isinstance(value, list)
        or len(value) > MAX_LAYERS
        or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < MAX_LAYERS for i in value)
    ):
        raise JsonFileError(
            f"{label}: key '{key}': expected a list of at most {MAX_LAYERS} layer numbers "
            f"from 0 to {MAX_LAYERS - 1}, got {type_name(value)}; {FIX}"
        )


def _rope_scaling(obj: Mapping[str, Any], key: str, label: str) -> None:
    value = obj.get(key)
    if value is None:
        return
    rs = mapping(value, label, key)
    where = f"{key}.factor"
    positive_number({where: rs.get("factor")}, where, label, MAX_ROPE_FACTOR, fix=FIX)
    where = f"{key}.original_max_position_embeddings"
    positive_int(
        {where: rs.get("original_max_position_embeddings")}, where, label, MAX_CONTEXT, required=False, fix=FIX
    )
    for k in ("rope_type", "type"):
        short_str({f"{key}.{k}": rs.get(k)}, f"{key}.{k}", label, fix=FIX)


def _quantization(obj: Mapping[str, Any], key: str, label: str) -> None:
    value = obj.get(key)
    if value is not None:
        qc = mapping(value, label, key)
        short_str({f"{key}.quant_method": qc.get("quant_method")}, f"{key}.quant_method", label, fix=FIX)


def _auto_map(obj: Mapping[str, Any], key: str, label: str) -> None:
    value = obj.get(key)
    if value is None:
        return
    am = mapping(value, label, key)
    refs = [r for v in am.values() for r in (v if isinstance(v, list) else [v])]
    if len(refs) > MAX_AUTO_MAP or not all(r is None or (isinstance(r, str) and len(r) <= 256) for r in refs):
        raise JsonFileError(f"{label}: key '{key}': expected class references like 'module.Class'; {FIX}")


# Every config.json key the checks and the planner read, with what it must be when present.
CONFIG_KEYS: dict[str, _Check] = {
    "num_hidden_layers": _pos(MAX_LAYERS),
    "num_attention_heads": _pos(MAX_HEADS),
    "num_key_value_heads": _pos(MAX_HEADS),
    "head_dim": _pos(MAX_HIDDEN),
    "hidden_size": _pos(MAX_HIDDEN),
    "intermediate_size": _pos(MAX_INTERMEDIATE),
    "moe_intermediate_size": _pos(MAX_INTERMEDIATE),
    "shared_expert_intermediate_size": _nonneg(MAX_INTERMEDIATE),
    "vocab_size": _pos(MAX_VOCAB),
    "max_position_embeddings": _pos(MAX_CONTEXT),
    "num_local_experts": _nonneg(MAX_EXPERTS),
    "num_experts": _nonneg(MAX_EXPERTS),
    "n_routed_experts": _nonneg(MAX_EXPERTS),
    "num_experts_per_tok": _pos(MAX_EXPERTS),
    "n_shared_experts": _nonneg(MAX_EXPERTS),
    "first_k_dense_replace": _nonneg(MAX_LAYERS),
    "moe_layer_freq": _pos(MAX_LAYERS),
    "decoder_sparse_step": _pos(MAX_LAYERS),
    "mlp_only_layers": _layer_list,
    "kv_lora_rank": _pos(MAX_HIDDEN),
    "q_lora_rank": _pos(MAX_HIDDEN),
    "qk_rope_head_dim": _nonneg(MAX_HIDDEN),
    "qk_nope_head_dim": _nonneg(MAX_HIDDEN),
    "v_head_dim": _nonneg(MAX_HIDDEN),
    "sliding_window": _pos(MAX_CONTEXT),
    "max_window_layers": _nonneg(MAX_LAYERS),
    "sliding_window_pattern": _pos(MAX_LAYERS),
    "layer_types": _layer_types,
    "use_sliding_window": _bool,
    "tie_word_embeddings": _bool,
    "attention_bias": _bool,
    "model_type": _str,
    "torch_dtype": _str,
    "dtype": _str,
    "rope_scaling": _rope_scaling,
    "quantization_config": _quantization,
    "auto_map": _auto_map,
}


def check_config(config: Any, label: str = "config.json") -> dict[str, Any]:
    """config.json as a dict whose keys the planner and the checks read are of the right type
    and range (module doc); a JsonFileError naming `label` and the key otherwise. A text_config
    (multimodal wrappers keep the language model there) is held to the same rules."""
    cfg = mapping(config, label)
    for key, check in CONFIG_KEYS.items():
        check(cfg, key, label)
    inner = cfg.get("text_config")
    if inner is not None:
        inner = mapping(inner, label, "text_config")
        for key, check in CONFIG_KEYS.items():
            check(inner, key, f"{label}: text_config")
    return dict(cfg)


def config_view(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys the language model's figures come from: text_config's over the top level."""
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, Mapping) else dict(config)


def parse_config(text: bytes | str, label: str) -> dict[str, Any]:
    """config.json from its bytes or text, checked."""
    return check_config(loads_strict(text, label), label)


def read_config(path: str | Path) -> dict[str, Any]:
    """config.json from a file or a model folder, read bounded and checked."""
    p = Path(path)
    f = p / "config.json" if p.is_dir() else p
    return check_config(read_json(f, CONFIG_LIMIT), str(f))


# --- tokenizer_config.json ---------------------------------------------------------------------


def parse_tokenizer_meta(text: bytes | str, label: str) -> dict[str, Any]:
    """tokenizer_config.json -> {"chat_template": bool, "tokenizer_class": str | None}. A list
    of named templates (HF's multi-template form) counts when any has a body."""
    cfg = mapping(loads_strict(text, label), label)
    tpl = cfg.get("chat_template")
    if isinstance(tpl, list):
        has = any(isinstance(t, Mapping) and isinstance(t.get("template"), str) and t["template"].strip() for t in tpl)
    elif tpl is None or isinstance(tpl, str):
        has = bool((tpl or "").strip())
    else:
        raise JsonFileError(
            f"{label}: key 'chat_template': expected a string or a list of named templates, "
            f"got {type_name(tpl)}; fix the model's tokenizer_config.json"
        )
    return check_tokenizer_meta({"chat_template": has, "tokenizer_class": cfg.get("tokenizer_class")}, label)


def check_tokenizer_meta(meta: Any, label: str) -> dict[str, Any]:
    """The reduced tokenizer facts (also as a snapshot's facts.json holds them), checked."""
    m = mapping(meta, label)
    fix = "fix the model's tokenizer_config.json"
    has = boolean(m, "chat_template", label, fix=fix)
    return {"chat_template": bool(has), "tokenizer_class": short_str(m, "tokenizer_class", label, fix=fix)}


# --- model.safetensors.index.json --------------------------------------------------------------


def index_total_size(index: Any, label: str) -> int | None:
    """metadata.total_size of a shard index: the weight bytes, a positive integer of at most
    MAX_WEIGHT_BYTES; None when the index does not say."""
    idx = mapping(index, label)
    meta = idx.get("metadata")
    if meta is None:
        return None
    meta = mapping(meta, label, "metadata")
    return positive_int(
        {"metadata.total_size": meta.get("total_size")},
        "metadata.total_size",
        label,
        MAX_WEIGHT_BYTES,
        required=False,
        fix="fix the model's model.safetensors.index.json",
    )
