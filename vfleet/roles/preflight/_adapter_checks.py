"""Preflight's checks of a host's LoRA adapters against its model, before anything is copied:
an adapter trained for another base model, or whose rank vLLM cannot take, is refused with
the fix (vLLM would refuse it only when a client first asks for it, mid-serving).

Pure functions of (HostConfig, facts): facts["lora_adapters"] (_adapter_facts.py) and
facts["model_config"] (the model's config.json). The fit is read from the shapes of the
adapter's weights: a peft tensor `...layers.<i>.<path>.<module>.lora_A.weight` is [r, in],
`lora_B` is [out, r], and (in, out) of each Llama-style projection follows from config.json.
"""

from __future__ import annotations

import re
from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.roles.service import RANK_CHOICES

from ._check_base import FAIL, PASS, Check

__all__ = ["check_adapters", "projection_dims"]

_TENSOR = re.compile(r"layers\.(\d+)\.(?:[\w]+\.)*?(\w+)\.lora_([AB])\.weight$")


def projection_dims(config: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """(in, out) of each decoder projection a Llama-style config.json implies."""
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
        return {}
    kv = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or hidden // heads
    inter = config.get("intermediate_size")
    dims = {
        "q_proj": (hidden, heads * head_dim),
        "k_proj": (hidden, kv * head_dim),
        "v_proj": (hidden, kv * head_dim),
        "o_proj": (heads * head_dim, hidden),
    }
    if isinstance(inter, int):
        dims.update({"gate_proj": (hidden, inter), "up_proj": (hidden, inter), "down_proj": (inter, hidden)})
    return dims


def _misfit(shapes: dict[str, list[int]], rank: int, config: dict[str, Any]) -> tuple[str | None, int]:
    """The first tensor that does not fit the model (None: all fit), and how many were compared."""
    dims, layers = projection_dims(config), config.get("num_hidden_layers")
    compared = 0
    for name, shape in sorted(shapes.items()):
        m = _TENSOR.search(name)
        if not m or m.group(2) not in dims or len(shape) != 2:
            continue
        layer, module, side = int(m.group(1)), m.group(2), m.group(3)
        if isinstance(layers, int) and layer >= layers:
            return f"{name} is for layer {layer}, the model has {layers} layers", compared
        d_in, d_out = dims[module]
        want = [rank, d_in] if side == "A" else [d_out, rank]
        if shape != want:
            return f"{name} is {shape}, the model's {module} takes {want} at rank {rank}", compared
        compared += 1
    return None, compared


def _one(cfg: HostConfig, name: str, f: dict[str, Any], config: dict[str, Any] | None) -> Check:
    what = f"model.lora.{name}"
    if "error" in f:
        return Check(
            what,
            FAIL,
            f"adapter {name}: {f['error']}",
            "point its source at the folder peft's save_pretrained wrote (adapter_config.json and "
            "adapter_model.safetensors), or fill the Hugging Face cache with `hf download`",
        )
    rank = f.get("rank")
    if not isinstance(rank, int) or isinstance(rank, bool) or not 1 <= rank <= RANK_CHOICES[-1]:
        return Check(
            what,
            FAIL,
            f"adapter {name}: rank {rank!r} in adapter_config.json; vLLM serves ranks 1 to {RANK_CHOICES[-1]}",
            "retrain or re-save the adapter with a rank vLLM takes",
        )
    if not f.get("shapes") or not config:
        return Check(
            what,
            PASS,
            f"adapter {name}: rank {rank} (weights or model config not readable yet: their fit is not checked)",
        )
    misfit, compared = _misfit(f["shapes"], rank, config)
    base = f" (adapter_config.json names {f['base']!r})" if f.get("base") else ""
    if misfit:
        return Check(
            what,
            FAIL,
            f"adapter {name} does not fit model {cfg.served_model_name}: {misfit}",
            f"serve it beside the base model it was trained for{base}, or remove it from lora_adapters",
        )
    return Check(what, PASS, f"adapter {name}: rank {rank}, {compared} tensors fit the model")


def check_adapters(cfg: HostConfig, facts: dict[str, Any]) -> list[Check]:
    """One check per adapter (none without adapters or before their facts were read)."""
    adapters = facts.get("lora_adapters") or {}
    return [_one(cfg, name, f, facts.get("model_config")) for name, f in adapters.items()]
