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

Measured on the H200 (docs/evidence/h200-lora-spec/README.md, vLLM 0.20.0, Llama-3.1-8B shape):
the stacks are exact (vLLM's "Model loading took" grew by 0.17 and 5.50 GiB, planned 0.172 and
5.505). Besides them, with LoRA on vLLM captures every CUDA graph twice (a graph's key carries
`has_lora`: PIECEWISE 51 -> 102, FULL 35 -> 70) and its graph estimate grew 0.36 -> 0.86 GiB at
both ranks, and at 4 slots of rank 256 a further ~0.28 GiB went (the profiling pass's LoRA
buffers, presumably): lora_reserve_bytes keeps 0.5 GiB for the graphs (none with
enforce_eager) and 0.28 MiB per slot x rank, so the planner stays on its safe side (below
vLLM) with adapters too.
"""

from __future__ import annotations

from vfleet.roles.preflight._capacity.model import ModelShape

__all__ = ["lora_bytes_per_gpu", "lora_reserve_bytes"]

MIB = 2**20
LORA_GRAPH_RESERVE_BYTES = 512 * MIB  # the second set of CUDA graphs (0.86 - 0.36 GiB measured)
LORA_BUFFER_BYTES_PER_SLOT_RANK = 287 * 1024  # 0.28 GiB / (4 slots x rank 256), measured once


def lora_bytes_per_gpu(shape: ModelShape, rank: int, slots: int, dtype_bytes: int, tp: int = 1) -> int:
    """Bytes of the LoRA stacks on one GPU for `slots` adapters of rank up to `rank`."""
    h, q, kv = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    per_layer = (
        3 * rank * h
        + (q + 2 * kv) // tp * rank  # qkv_proj
        + rank * q // tp
        + h * rank
    )  # o_proj
    if shape.intermediate:
        i = shape.intermediate
        per_layer += 2 * rank * h + 2 * i // tp * rank + rank * i // tp + h * rank  # gate_up, down
    vocab = shape.vocab or 0
    embeddings = vocab * rank + h * rank + rank * h + vocab // tp * rank
    return slots * dtype_bytes * (shape.layers * per_layer + embeddings)


def lora_reserve_bytes(rank: int, slots: int, enforce_eager: bool) -> int:
    """What LoRA adds to the non-KV reserve besides its stacks (module doc)."""
    return (0 if enforce_eager else LORA_GRAPH_RESERVE_BYTES) + slots * rank * LORA_BUFFER_BYTES_PER_SLOT_RANK
