"""The GPU memory vLLM sets aside for LoRA adapters, per GPU: what the planner takes from the KV
cache when a host serves lora_adapters.

vLLM allocates, when the model loads and before the KV cache is sized, a zeroed stack of
--max-loras slots for every layer it can apply LoRA to, each at --max-lora-rank, whatever the
adapters' own target modules (vllm 0.32.0: vllm/lora/utils.py get_supported_lora_modules, "all
linear layers support LoRA", plus the model's embedding_modules; the stacks in
vllm/lora/layers/base_linear.py, vocab_parallel_embedding.py and logits_processor.py
create_lora_weights), in the model's dtype:

- a column-parallel layer (qkv_proj: 3 slices, gate_up_proj: 2): A = rank x input per slice,
  B = output / TP x rank;
- a row-parallel layer (o_proj, down_proj): A = rank x input / TP, B = output x rank;
- embed_tokens: A = vocab x rank, B = hidden x rank; lm_head: A = rank x hidden,
  B = vocab / TP x rank.

A mixture-of-experts model's expert stacks are not counted (the figure is then low).
"""
from __future__ import annotations

from vfleet.roles.preflight.capacity.model import ModelShape

__all__ = ["lora_bytes_per_gpu"]


def lora_bytes_per_gpu(shape: ModelShape, rank: int, slots: int, dtype_bytes: int, tp: int = 1) -> int:
    """Bytes of the LoRA stacks on one GPU for `slots` adapters of rank up to `rank`."""
    h, q, kv = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    per_layer = (3 * rank * h + (q + 2 * kv) // tp * rank      # qkv_proj
                 + rank * q // tp + h * rank)                   # o_proj
    if shape.intermediate:
        i = shape.intermediate
        per_layer += 2 * rank * h + 2 * i // tp * rank + rank * i // tp + h * rank   # gate_up, down
    vocab = shape.vocab or 0
    embeddings = vocab * rank + h * rank + rank * h + vocab // tp * rank
    return slots * dtype_bytes * (shape.layers * per_layer + embeddings)
