"""Host checks on KV-cache capacity: whether the planned KV cache (_capacity) holds
max_model_len, and max_num_seqs requests of that length, on the GPUs (check_capacity) or, for
the CPU build, in the fixed `cpu_kvcache_space_gib` (check_cpu_capacity). A draft model's KV
cache shares the pool and is counted in. host_checks runs one or the other, last but one."""

from __future__ import annotations

from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.strict_json import JsonFileError

from . import _capacity as capacity
from ._capacity.draft import draft_of
from ._check_base import FAIL, PASS, WARN, Check, gib as _gib


def check_capacity(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    try:
        p = capacity.plan_for_host(cfg, facts)
    except JsonFileError as e:  # a key the planner needs is missing (present ones were checked)
        return Check("capacity.kv", WARN, f"capacity not planned: {e}")
    if p is None:
        return None
    draft = p.draft_kv_bytes_per_token_per_gpu * p.tensor_parallel_size  # a draft's layers share the pool
    per_token = f"{p.kv_bytes_per_token + draft} B/token" + (f", the draft's {draft} included" if draft else "")
    base = (
        f"KV cache ~{p.kv_capacity_tokens} tokens ({_gib(p.kv_cache_bytes_per_gpu)}/GPU, "
        f"{per_token}); max_model_len {p.max_model_len}, "
        f"concurrency at full length {p.max_concurrency or 0:.2f}"
    )
    if p.status == PASS:
        return Check("capacity.kv", PASS, base)
    if p.kv_capacity_tokens <= 0:
        fix = "use more GPUs (tensor_parallel_size), a smaller/quantised model, or raise gpu_memory_utilization"
    elif p.max_model_len and p.max_concurrency < 1:  # (a windowed layer caps what one request holds)
        fix = (
            f"set max_model_len <= {p.suggested_max_model_len}, or raise gpu_memory_utilization / tensor_parallel_size"
        )
    else:
        fix = (
            f"set max_num_seqs <= {p.suggested_max_num_seqs} (or accept preemption at full length), or "
            "lower max_model_len"
        )
    return Check("capacity.kv", p.status, base + ": " + "; ".join(p.warnings), fix)


def check_cpu_capacity(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """CPU build: the KV cache is exactly `cpu_kvcache_space_gib` (VLLM_CPU_KVCACHE_SPACE) GiB."""
    model = facts.get("model_config")
    space = cfg.cpu_kvcache_space_gib
    if not model or not space:
        return None
    try:
        tokens = capacity.cpu_kv_capacity_tokens(
            model, float(space), cfg.kv_cache_dtype, cfg.dtype, draft=draft_of(cfg.speculative, facts)
        )
    except JsonFileError as e:  # a key the planner needs is missing (present ones were checked)
        return Check("capacity.kv", WARN, f"capacity not planned: {e}")
    mml = cfg.max_model_len or model.get("max_position_embeddings")
    seqs = cfg.max_num_seqs
    base = f"CPU KV cache {space} GiB = {tokens} tokens"
    if mml and int(mml) > tokens:
        return Check(
            "capacity.kv",
            FAIL,
            f"{base} < max_model_len {mml}: vLLM refuses to start",
            f"raise cpu_kvcache_space_gib or set max_model_len <= {tokens}",
        )
    if mml and seqs and int(seqs) * int(mml) > tokens:
        return Check(
            "capacity.kv",
            WARN,
            f"{base}: max_num_seqs {seqs} x max_model_len {mml} does not fit",
            f"set max_num_seqs <= {max(1, tokens // int(mml))} or raise cpu_kvcache_space_gib",
        )
    return Check("capacity.kv", PASS, f"{base}" + (f"; {tokens / int(mml):.2f}x concurrency at {mml}" if mml else ""))
