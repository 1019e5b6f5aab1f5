"""The bytes vLLM holds for a quantized model's weights, from config.json's quantization_config
(a pre-quantized checkpoint) or the inventory's `quantization` (weights quantized at load).

Why: without a safetensors index the planner estimates weights from config.json, and counting
every weight in 16 bits made an AWQ 7B 14.2 GiB instead of about 5.2, and Qwen2.5-7B with
`--quantization fp8` 15.2 GiB where vLLM 0.20.0 loaded 8.13 GiB (the plan's KV came out 5.5%
low). With a safetensors total the checkpoint's own size is exact, except when vLLM quantizes
at load: then the engine holds less than the files.

What each method stores per Linear weight (vLLM's layers, vllm/model_executor/layers/quantization/):
- awq (awq.py, awq_marlin.py): `bits`-bit weights packed into int32 (qweight), per group of
  `group_size` inputs an fp16 scale and a `bits`-bit zero point (qzeros, when zero_point);
  `modules_to_not_convert` stay 16-bit (matched as substrings of the module name).
- gptq (gptq.py, gptq_marlin.py): the same packing; qzeros are stored whatever `sym` says;
  group_size -1 is one group per output channel; lm_head only with `"lm_head": true`. The
  int32 g_idx (4 bytes per input, < 0.1% of a 7B) is left out.
- compressed-tensors (compressed_tensors.py): the config group that targets Linear gives
  num_bits and the scale's strategy (tensor, channel, group of group_size, block); a 16-bit
  scale per group plus a zero point when not symmetric; `ignore` names or `re:` patterns stay
  16-bit, and lm_head is converted unless ignored.
- fp8 (fp8.py): one byte a weight; a float32 scale per weight_block_size block, or one per
  tensor; `ignored_layers` / `modules_to_not_convert` stay 16-bit. Quantized at load (no
  quantization_config, `quantization: fp8`): every Linear but lm_head, per-tensor scales.
- bitsandbytes (bitsandbytes.py): 4-bit (nf4/fp4) with an absmax per 64 weights, float32, or
  8-bit plus a float32 per 256 blocks with double quantization; 8-bit (LLM.int8) one byte a
  weight and a float32 scale per output row; `llm_int8_skip_modules` stay 16-bit.
Embeddings, norms, biases and the MoE router always stay in the model's 16-bit dtype.
A method not listed here is counted at 16 bits, with a warning (more weight, less KV: the safe side).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from vfleet.engine.strict_json import JsonFileError, mapping, positive_int, type_name
from vfleet.roles.preflight._capacity.model import ModelShape, Module, grouped_modules, weight_modules
from vfleet.roles.preflight._model_files import config_view

__all__ = ["WeightFormat", "weight_format", "weight_bytes"]

MAX_BITS = 16
MAX_GROUP = 1 << 20
MAX_KEEP = 4096  # entries of an ignore list
MAX_KEEP_LEN = 512  # characters of one entry
MAX_MATCHES = 500_000  # layers x entries matched one by one (a 200-layer model with 2,500 entries)
FIX = "fix quantization_config in the model's config.json"


@dataclass(frozen=True)
class WeightFormat:
    """How one quantization method stores a converted Linear weight."""

    method: str
    bits: int  # bits of one converted weight
    group: int | None  # weights sharing a scale: None = one per output channel, 0 = per tensor
    group_bytes: float  # scale (+ zero point) bytes per group
    keep: tuple[str, ...] = ()  # module names (substrings) or `re:` patterns that stay 16-bit
    lm_head: bool = False  # the method converts lm_head too (unless kept)
    at_load: bool = False  # vLLM quantizes 16-bit files while loading them

    def kept(self, name: str) -> bool:
        return any(re.match(k[3:], name) if k.startswith("re:") else k in name for k in self.keep)

    def converts(self, m: Module) -> bool:
        return m.linear and (self.lm_head or m.name != "lm_head") and not self.kept(m.name)

    def module_bytes(self, m: Module) -> float:
        """Bytes of a converted module: packed weights plus one scale set per group."""
        groups = 0 if self.group == 0 else m.params / (self.group or m.inputs)
        return m.params * self.bits / 8 + groups * self.group_bytes

    @property
    def per_layer(self) -> bool:
        """An entry that may name one layer's module (a digit, or a pattern) is matched layer by
        layer; the others once per kind of layer."""
        return any(k.startswith("re:") or any(c.isdigit() for c in k) for k in self.keep)


def weight_bytes(shape: ModelShape, fmt: WeightFormat | None, dense_bytes: int) -> int:
    """All weights as vLLM holds them: converted modules at fmt's size, the rest at dense_bytes."""
    per_layer = fmt is not None and fmt.per_layer
    if per_layer and shape.layers * len(fmt.keep) > MAX_MATCHES:
        raise JsonFileError(
            f"{shape.label}: quantization_config names {len(fmt.keep)} modules to keep over "
            f"{shape.layers} layers, more than the planner matches ({MAX_MATCHES:,} pairs); "
            "give the weights' size (model_size_bytes, or the safetensors files beside config.json)"
        )
    modules = [(m, 1) for m in weight_modules(shape)] if per_layer else grouped_modules(shape)
    total = 0.0
    for m, n in modules:
        total += n * (fmt.module_bytes(m) if fmt is not None and fmt.converts(m) else m.params * dense_bytes)
    return math.ceil(total)


def _keep(qc: Mapping[str, Any], keys: tuple[str, ...], label: str) -> tuple[str, ...]:
    """An ignore list: strings, each a module name or a `re:` pattern that compiles."""
    out: list[str] = []
    for key in keys:
        value = qc.get(key)
        if value is None:
            continue
        if (
            not isinstance(value, list)
            or len(value) > MAX_KEEP
            or not all(isinstance(v, str) and 0 < len(v) <= MAX_KEEP_LEN for v in value)
        ):
            raise JsonFileError(
                f"{label}: key 'quantization_config.{key}': expected a list of module names, "
                f"got {type_name(value)}; {FIX}"
            )
        for v in value:
            if v.startswith("re:"):
                try:
                    re.compile(v[3:])
                except re.error as exc:
                    raise JsonFileError(
                        f"{label}: key 'quantization_config.{key}': {v[:60]!r} is not a "
                        f"regular expression ({exc}); {FIX}"
                    ) from None
        out += value
    return tuple(dict.fromkeys(out))


def _int(qc: Mapping[str, Any], keys: tuple[str, ...], label: str, upper: int, default: int) -> int:
    """The first of `keys` present (AutoAWQ writes w_bit/q_group_size, transformers bits/group_size);
    -1 passes (GPTQ's and AWQ's 'one group per output channel')."""
    for key in keys:
        if qc.get(key) == -1:
            return -1
        if qc.get(key) is not None:
            return positive_int(qc, key, f"{label}: quantization_config", upper, fix=FIX)
    return default


def _group(size: int) -> int | None:
    return None if size == -1 else size


def _awq(qc: Mapping[str, Any], label: str) -> WeightFormat:
    bits = _int(qc, ("bits", "w_bit"), label, MAX_BITS, 4)
    zero = qc.get("zero_point", True) is not False
    return WeightFormat(
        "awq",
        bits,
        _group(_int(qc, ("group_size", "q_group_size"), label, MAX_GROUP, 128)),
        2 + (bits / 8 if zero else 0),
        _keep(qc, ("modules_to_not_convert",), label),
    )


def _gptq(qc: Mapping[str, Any], label: str) -> WeightFormat:
    bits = _int(qc, ("bits",), label, MAX_BITS, 4)
    return WeightFormat(
        "gptq",
        bits,
        _group(_int(qc, ("group_size",), label, MAX_GROUP, 128)),
        2 + bits / 8,
        lm_head=qc.get("lm_head") is True,
    )


def _compressed_tensors(qc: Mapping[str, Any], label: str) -> WeightFormat | None:
    groups = mapping(qc.get("config_groups") or {}, label, "quantization_config.config_groups")
    linear = [g for g in groups.values() if isinstance(g, Mapping) and "Linear" in (g.get("targets") or [])]
    weights = linear[0].get("weights") if linear else None
    if not isinstance(weights, Mapping):
        return None
    where = f"{label}: quantization_config.config_groups"
    bits = positive_int(weights, "num_bits", where, MAX_BITS, fix=FIX)
    strategy = weights.get("strategy") or "tensor"
    block = weights.get("block_structure")
    if strategy == "group":
        group: int | None = positive_int(weights, "group_size", where, MAX_GROUP, fix=FIX)
    elif (
        strategy == "block"
        and isinstance(block, list)
        and len(block) == 2
        and all(isinstance(b, int) and not isinstance(b, bool) and 0 < b <= 4096 for b in block)
    ):
        group = block[0] * block[1]
    elif strategy == "channel":
        group = None
    elif strategy == "tensor":
        group = 0
    else:
        return None
    zero = weights.get("symmetric", True) is False
    return WeightFormat(
        "compressed-tensors", bits, group, 2 + (bits / 8 if zero else 0), _keep(qc, ("ignore",), label), lm_head=True
    )


def _fp8(qc: Mapping[str, Any], label: str) -> WeightFormat:
    block = qc.get("weight_block_size")
    if block is not None and not (
        isinstance(block, list)
        and len(block) == 2
        and all(isinstance(b, int) and not isinstance(b, bool) and 0 < b <= 4096 for b in block)
    ):
        raise JsonFileError(
            f"{label}: key 'quantization_config.weight_block_size': expected two positive "
            f"integers, got {type_name(block)}; {FIX}"
        )
    return WeightFormat(
        "fp8", 8, block[0] * block[1] if block else 0, 4, _keep(qc, ("ignored_layers", "modules_to_not_convert"), label)
    )


def _bitsandbytes(qc: Mapping[str, Any], label: str) -> WeightFormat:
    keep = _keep(qc, ("llm_int8_skip_modules",), label)
    if qc.get("load_in_8bit") is True:
        return WeightFormat("bitsandbytes", 8, None, 4, keep)
    double = qc.get("bnb_4bit_use_double_quant") is True
    return WeightFormat("bitsandbytes", 4, 64, 1 + 4 / 256 if double else 4, keep)


CHECKPOINT_METHODS = {
    "awq": _awq,
    "gptq": _gptq,
    "compressed-tensors": _compressed_tensors,
    "compressed_tensors": _compressed_tensors,
    "fp8": _fp8,
    "bitsandbytes": _bitsandbytes,
}
# `quantization:` values vLLM accepts for an AWQ/GPTQ checkpoint: they pick a kernel, not a size.
KERNEL_ALIASES = {"awq_marlin": "awq", "gptq_marlin": "gptq", "gptq_marlin_24": "gptq", "marlin": "gptq"}
FP8_AT_LOAD = WeightFormat("fp8", 8, 0, 4, at_load=True)


def weight_format(
    config: Mapping[str, Any], quantization: str | None, label: str = "config.json"
) -> tuple[WeightFormat | None, str | None]:
    """(the format vLLM holds the weights in, or None for 16-bit; a warning when the method is
    not priced here). The checkpoint's quantization_config wins; without one, `quantization:
    fp8` quantizes at load."""
    qc = config_view(config).get("quantization_config")
    if isinstance(qc, Mapping):
        method = str(qc.get("quant_method") or "").lower()
        parse = CHECKPOINT_METHODS.get(KERNEL_ALIASES.get(method, method))
        fmt = parse(qc, label) if parse else None
        if fmt is None:
            return None, (
                f"{label}: quantization_config {method or '(no quant_method)'} is not priced by the "
                "planner: weights counted at 16 bits (less KV than vLLM will find); give "
                "model_size_bytes or the safetensors files for the exact size"
            )
        return fmt, None
    quant = str(quantization or "").lower()
    if quant in ("fp8", "fp8_e4m3"):
        return FP8_AT_LOAD, None
    if quant:
        return None, (
            f"quantization {quant} at load is not priced by the planner: weights counted at 16 bits "
            "(less KV than vLLM will find)"
        )
    return None, None
