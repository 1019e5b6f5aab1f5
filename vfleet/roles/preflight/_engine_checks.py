"""Engine settings vLLM refuses at start-up for reasons preflight can see first: swap space
against the host's RAM, and a token budget below max_model_len without chunked prefill.

- engine.swap_space: vLLM (CacheConfig.verify_with_parallel_config, vllm/config/cache.py)
  multiplies swap_space (GiB per GPU, default 4) by tensor_parallel_size and compares it with
  the host's total RAM: above 70 % it raises "Too large swap space. X GiB out of the Y GiB
  total CPU memory is allocated for the swap space.", above 40 % it warns "Possibly too large
  swap space." (the rule and its messages: vLLM 0.5.x config.py through 0.10.1.1's
  config/cache.py, whose V1 log "[cache.py:216] Possibly too large swap space. 4.00 GiB out of
  the 7.63 GiB total CPU memory" shows it runs on V1 too; the error as users hit it:
  Ksuriuri/index-tts-vllm#99). Only while the flag exists: vllm#36216 removed swap_space in
  0.18.0 (vllm_facts.yaml flags), so later pins get no check.
- engine.batched_tokens: with chunked prefill off, SchedulerConfig.verify_max_model_len raises
  "max_num_batched_tokens (X) is smaller than max_model_len (Y). ... Please increase
  max_num_batched_tokens or decrease max_model_len." (vllm#28981 quotes it from vLLM 0.11,
  verl#7626 from 0.24, unsloth-zoo#1211: the same rule in every release 0.15.0-0.29.0; V0's
  form in verl#259). Chunked prefill is on by default on V1 (vllm#11061: "V1 always uses chunked
  prefills"; facts.md). A V100 runs V0 until 0.10.2 (volta_checks.engine_on_gpu), where it is off
  unless asked for, except that V0 turns it on by itself when max_model_len > 32768 on CUDA and
  the model is not multimodal, MLA, sliding-window or pooling and neither LoRA nor speculative
  decoding is on (EngineArgs._set_default_args_v0, "Enable chunked prefill by default for long
  context (> 32K)": https://github.com/vllm-project/vllm/blob/v0.10.1.1/vllm/engine/arg_utils.py;
  create_engine_config held the same rule since 0.5.x). Preflight sees those exclusions in the
  model's config.json and in vllm_extra_args; without the model's config it cannot tell, and
  warns instead of failing. vLLM's own default budget is never below max_model_len without
  chunked prefill, so only a set max_num_batched_tokens is checked.
"""

from __future__ import annotations

import math
from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig

from ._check_base import FAIL, GIB, PASS, WARN, Check, gib, is_cpu_build, min_cc_gpu
from ._volta_checks import engine_on_gpu

__all__ = ["engine_checks"]

DEFAULT_SWAP_GIB = 4  # vLLM's --swap-space default (EngineArgs.swap_space = 4)
SWAP_FAIL_FRACTION = 0.7  # vLLM raises above this share of RAM
SWAP_WARN_FRACTION = 0.4  # and warns above this one


def check_swap_space(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    if vllm_facts.flag_status("--swap-space", cfg.vllm_version) not in ("ok", "deprecated"):
        return None
    swap = DEFAULT_SWAP_GIB if cfg.swap_space is None else cfg.swap_space
    tp = cfg.tensor_parallel_size
    ram = facts.get("mem_total_bytes")
    said = f"swap_space {swap} GiB{' (vLLM default)' if cfg.swap_space is None else ''} x tensor_parallel_size {tp}"
    if ram is None:
        return Check("engine.swap_space", PASS, f"{said}: host RAM unknown (no MemTotal in /proc/meminfo), not checked")
    use = swap * GIB * tp
    share = f"{said} = {gib(use)} of the host's {gib(ram)} RAM ({use / ram:.0%})"
    fix = (
        f"set swap_space <= {max(0, math.floor(SWAP_WARN_FRACTION * ram / GIB / tp))} (GiB per GPU; 0 is "
        "allowed: preempted requests are then recomputed instead of swapped)"
    )
    if use > SWAP_FAIL_FRACTION * ram:
        return Check(
            "engine.swap_space",
            FAIL,
            f"{share}: above {SWAP_FAIL_FRACTION:.0%}, vLLM {cfg.vllm_version} "
            'refuses to start ("Too large swap space")',
            fix,
        )
    if use > SWAP_WARN_FRACTION * ram:
        return Check(
            "engine.swap_space",
            WARN,
            f'{share}: above {SWAP_WARN_FRACTION:.0%}, vLLM warns "Possibly '
            'too large swap space" and the pinned buffers crowd the host',
            fix,
        )
    return Check("engine.swap_space", PASS, share)


V0_LONG_CONTEXT = 32768  # V0 turns chunked prefill on above this max_model_len (_set_default_args_v0)
V0_UNCHUNKED_FLAGS = ("--enable-lora", "--speculative-config", "--speculative-model", "--speculative_model")
POOLING_TASKS = {"embed", "embedding", "classify", "score", "reward", "pooling"}


def _flag_values(args: tuple[str, ...], flag: str) -> list[str]:
    """Values given to `flag` in a vllm_extra_args list, as `--flag value` or `--flag=value`."""
    return [
        a.partition("=")[2] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
        for i, a in enumerate(args)
        if a == flag or a.startswith(flag + "=")
    ]


def _v0_exclusion(cfg: HostConfig, model: dict[str, Any]) -> str | None:
    """What keeps V0 from turning chunked prefill on for a long context, as far as preflight sees."""
    args = cfg.vllm_extra_args
    if cfg.lora_adapters:  # lora_adapters renders --enable-lora (vfleet/roles/service/_lora_flags.py)
        return "--enable-lora"
    if cfg.speculative:  # speculative_decoding renders --speculative-config
        return "--speculative-config"
    for flag in V0_UNCHUNKED_FLAGS:
        if _flag_values(args, flag):
            return flag
    if POOLING_TASKS & set(_flag_values(args, "--task") + _flag_values(args, "--runner")):
        return "a pooling model"
    if model.get("sliding_window") and model.get("use_sliding_window", True):
        return "a sliding-window model"
    if model.get("kv_lora_rank"):
        return "an MLA model"
    if model.get("vision_config") or model.get("audio_config"):
        return "a multimodal model"
    return None


def chunked_prefill(cfg: HostConfig, facts: dict[str, Any], mml: int) -> tuple[bool | None, str]:
    """(on, why): the inventory's enable_chunked_prefill, else the default of the engine that runs;
    on None when V0's long-context rule may apply but the model's config is unknown."""
    if cfg.enable_chunked_prefill is not None:
        return cfg.enable_chunked_prefill, f"enable_chunked_prefill: {str(cfg.enable_chunked_prefill).lower()}"
    cc = None if is_cpu_build(cfg) else (min_cc_gpu(facts) or {}).get("compute_capability")
    if engine_on_gpu(cfg.vllm_version, cc) == "V1":
        return True, f"vLLM {cfg.vllm_version}'s V1 engine"
    off = f"chunked prefill off by default on vLLM {cfg.vllm_version}'s engine here"
    if is_cpu_build(cfg) or mml <= V0_LONG_CONTEXT:
        return False, off
    model = facts.get("model_config")
    excluded = _v0_exclusion(cfg, model or {})
    if excluded:
        return False, f"{off}: V0 turns it on above max_model_len {V0_LONG_CONTEXT} but not for {excluded}"
    if model is None:
        return None, (
            f"V0 turns chunked prefill on above max_model_len {V0_LONG_CONTEXT} unless the model is "
            "multimodal, MLA, sliding-window or pooling; its config.json was not read"
        )
    return True, f"V0 turns chunked prefill on above max_model_len {V0_LONG_CONTEXT}"


def check_batched_tokens(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    budget = cfg.max_num_batched_tokens
    mml = cfg.max_model_len or (facts.get("model_config") or {}).get("max_position_embeddings")
    if budget is None or not mml:
        return None
    on, how = chunked_prefill(cfg, facts, int(mml))
    if on:
        return Check(
            "engine.batched_tokens",
            PASS,
            f"max_num_batched_tokens {budget} with chunked prefill (max_model_len {mml}; {how})",
        )
    if budget >= int(mml):
        return Check("engine.batched_tokens", PASS, f"max_num_batched_tokens {budget} >= max_model_len {mml} ({how})")
    said = (
        f"max_num_batched_tokens {budget} is below max_model_len {mml} ({how}): without chunked prefill vLLM "
        f'refuses to start ("max_num_batched_tokens ({budget}) is smaller than max_model_len ({mml})")'
    )
    fix = f"set max_num_batched_tokens: {mml} (or more), or enable_chunked_prefill: true, or max_model_len: {budget}"
    return Check("engine.batched_tokens", WARN if on is None else FAIL, said, fix)


def engine_checks(cfg: HostConfig, facts: dict[str, Any]) -> list[Check]:
    found = [check_swap_space(cfg, facts), check_batched_tokens(cfg, facts)]
    return [c for c in found if c is not None]
