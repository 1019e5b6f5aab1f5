"""A speculative draft in the planner: its weights and its KV layers, which vLLM holds in the
same GPU memory and the same KV cache pool as the target's.

vLLM 0.32.0 loads a draft model inside the memory profiler that measures the target's weights
(vllm/v1/worker/gpu_model_runner.py load_model; vllm/v1/spec_decode/draft_model.py loads it,
never sharing embeddings or lm_head), registers its attention layers in the same KV cache spec
(get_kv_cache_spec covers every layer) and sizes blocks by the sum of bytes over all layers
(vllm/v1/core/kv_cache_utils.py), so "GPU KV cache size: N tokens" is charged for both: on the
CPU build a copy of the lab's model as its own draft halved the tokens (1,048,576 -> 524,288
in the same 1 GiB), measured here. The draft runs at the target's TP and KV dtype.

- draft_model, eagle, eagle3: the draft's config.json (its layers, KV heads, head size) and
  its safetensors bytes (EAGLE heads are small: one or a few layers);
- mtp: the target's own next-token layers (config.json num_nextn_predict_layers), whose weights
  are in the target's checkpoint already: only their KV;
- ngram: nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vfleet.config.speculative import Speculative
from vfleet.roles.preflight._capacity.model import ModelShape, kv_bytes_per_token, kv_bytes_per_token_per_layer

__all__ = ["Draft", "draft_of", "draft_kv_bytes_per_token"]


@dataclass(frozen=True)
class Draft:
    """What a draft adds: its config (None for mtp: the target's own layers), its weight
    bytes, and the number of target-shaped KV layers MTP adds."""

    config: dict[str, Any] | None
    weights_bytes: int = 0
    mtp_layers: int = 0


def draft_of(spec: Speculative | None, facts: dict[str, Any]) -> Draft | None:
    """The draft a host's speculative_decoding adds, from its facts (None: nothing to add, or
    its files not read: the speculative check says why)."""
    if spec is None or spec.method == "ngram":
        return None
    if spec.method == "mtp":
        layers = (facts.get("model_config") or {}).get("num_nextn_predict_layers")
        return Draft(None, 0, layers) if isinstance(layers, int) and layers > 0 else None
    draft = facts.get("speculative_draft") or {}
    if not draft.get("config"):
        return None
    return Draft(draft["config"], int(draft.get("weights_bytes") or 0))


def draft_kv_bytes_per_token(draft: Draft, target: ModelShape, kv_dtype_bytes: int, tp: int) -> int:
    """The draft's KV bytes per token per GPU (added to the target's in the same pool)."""
    if draft.config is None:
        return draft.mtp_layers * kv_bytes_per_token_per_layer(target, kv_dtype_bytes, tp)
    return kv_bytes_per_token(ModelShape.from_config(draft.config, "the draft's config.json"), kv_dtype_bytes, tp)
