"""The vLLM flags vfleet renders from inventory variables: the one table the unit's command
line (vfleet/roles/service/_argv.py) is built from, and the one the extra-args check
(vfleet/config/extra_args.py) refuses in vllm_extra_args.

Why one table: a flag repeated in vllm_extra_args overrides vfleet's (argparse keeps the last
value), and then the gateway, smoke, preflight and the capacity planner describe a server
other than the one running. A flag added here is rendered and refused at once; a flag argv.py
rendered without a row here would fail tests/unit/test_extra_args.py.

It lives in the configuration layer (not in roles/service) because the inventory check runs
when the fleet is loaded, below the roles.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Callable, Mapping

from vfleet.config.hostconfig import HostConfig

__all__ = [
    "RenderedFlag",
    "VALUED",
    "SWITCHES",
    "LOG_REQUESTS",
    "MODEL",
    "REPLICA",
    "LORA",
    "SPECULATIVE",
    "managed_flags",
]


@dataclass(frozen=True)
class RenderedFlag:
    flag: str
    variable: str  # what the inventory sets instead
    value: Callable[[HostConfig], object]  # None or "": not rendered (vLLM's default)


# (flag VALUE) pairs, in command-line order
VALUED: tuple[RenderedFlag, ...] = (
    RenderedFlag("--served-model-name", "served_model_name", lambda c: c.served_model_name),
    RenderedFlag("--host", "vllm_host", lambda c: c.vllm_host),
    RenderedFlag("--port", "vllm_port", lambda c: c.vllm_port),
    RenderedFlag("--dtype", "dtype", lambda c: c.dtype),
    RenderedFlag("--tensor-parallel-size", "tensor_parallel_size", lambda c: c.tensor_parallel_size),
    RenderedFlag(
        "--pipeline-parallel-size",
        "pipeline_parallel_size",
        lambda c: c.pipeline_parallel_size if c.pipeline_parallel_size > 1 else None,
    ),
    RenderedFlag("--max-model-len", "max_model_len", lambda c: c.max_model_len),
    RenderedFlag("--gpu-memory-utilization", "gpu_memory_utilization", lambda c: c.gpu_memory_utilization),
    RenderedFlag("--kv-cache-memory-bytes", "kv_cache_memory_bytes", lambda c: c.kv_cache_memory_bytes),
    RenderedFlag("--max-num-seqs", "max_num_seqs", lambda c: c.max_num_seqs),
    RenderedFlag("--max-num-batched-tokens", "max_num_batched_tokens", lambda c: c.max_num_batched_tokens),
    RenderedFlag("--quantization", "quantization", lambda c: c.quantization),
    RenderedFlag(
        "--kv-cache-dtype", "kv_cache_dtype", lambda c: None if c.kv_cache_dtype == "auto" else c.kv_cache_dtype
    ),
    RenderedFlag("--block-size", "block_size", lambda c: c.block_size),
    RenderedFlag("--swap-space", "swap_space", lambda c: c.swap_space),
    RenderedFlag("--chat-template", "chat_template", lambda c: c.chat_template),
    RenderedFlag("--shutdown-timeout", "shutdown_timeout", lambda c: c.shutdown_timeout),
)

# booleans: True renders the flag, False its `--no-` form where the value is tri-state
# (None: vLLM's default), and nothing where False is vLLM's default
SWITCHES: tuple[RenderedFlag, ...] = (
    RenderedFlag("--enable-chunked-prefill", "enable_chunked_prefill", lambda c: c.enable_chunked_prefill),
    RenderedFlag("--enable-prefix-caching", "enable_prefix_caching", lambda c: c.enable_prefix_caching),
    RenderedFlag("--enforce-eager", "enforce_eager", lambda c: c.enforce_eager or None),
    RenderedFlag("--trust-remote-code", "trust_remote_code", lambda c: c.trust_remote_code or None),
)

# disable_log_requests renders whichever spelling the pinned version takes (argv.py); both, and
# the positive flag the newer one negates, are its
LOG_REQUESTS = RenderedFlag("--disable-log-requests", "disable_log_requests", lambda c: c.disable_log_requests)
LOG_REQUESTS_SPELLINGS = ("--disable-log-requests", "--no-enable-log-requests", "--enable-log-requests")

# the model: `vllm serve MODEL` or `--model MODEL` (vllm_facts.entrypoint)
MODEL = RenderedFlag("--model", "model_name or model_path", lambda c: c.model_path)

# what the replica renderer adds for a multi-host replica (vfleet/roles/replica/_ray_render.py)
REPLICA: dict[str, str] = {
    flag: "replica and replica_backend (vfleet renders it for a multi-host replica)"
    for flag in ("--distributed-executor-backend", "--nnodes", "--node-rank", "--master-addr", "--headless")
}
REPLICA["--master-port"] = "replica_master_port"

# what lora_adapters renders (vfleet/roles/service/_lora_flags.py)
LORA: dict[str, str] = {
    flag: "lora_adapters"
    for flag in ("--enable-lora", "--no-enable-lora", "--max-loras", "--max-lora-rank", "--lora-modules")
}
# what speculative_decoding renders (vfleet/roles/service/_speculative_flags.py), and 0.32's
# shorthands that set the same keys
SPECULATIVE: dict[str, str] = {
    flag: "speculative_decoding" for flag in ("--speculative-config", "--spec-method", "--spec-model", "--spec-tokens")
}


@lru_cache(maxsize=1)
def managed_flags() -> Mapping[str, str]:
    """Every flag vfleet renders (both forms of a switch) -> the variable to set instead."""
    out = {r.flag: r.variable for r in (*VALUED, *SWITCHES, MODEL)}
    out.update({"--no-" + r.flag[2:]: r.variable for r in SWITCHES})
    out.update({f: LOG_REQUESTS.variable for f in LOG_REQUESTS_SPELLINGS})
    out.update(REPLICA)
    out.update(LORA)
    out.update(SPECULATIVE)
    return MappingProxyType(out)
