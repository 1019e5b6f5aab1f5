"""The preflight warning for a host that runs with vLLM's protection widened on purpose: the
features listed in vllm_allow_unsafe that its vllm_extra_args / vllm_env switch on, and
trust_remote_code (vfleet/config/extra_args.py unsafe_warnings). Without the opt-in the
inventory does not load at all; with it, every preflight says so, per host."""

from __future__ import annotations

from vfleet.config.extra_args import unsafe_warnings
from vfleet.config.hostconfig import HostConfig

from ._check_base import WARN, Check


def check_unsafe(cfg: HostConfig) -> Check | None:
    """One `vllm.unsafe` warning listing each widened protection; None when there is none."""
    lines = unsafe_warnings(cfg)
    if not lines:
        return None
    return Check(
        "vllm.unsafe",
        WARN,
        "; ".join(lines),
        "keep these only where every client that reaches the host is trusted (docs/security.md); "
        "remove them from vllm_allow_unsafe / vllm_extra_args / vllm_env / trust_remote_code otherwise",
    )
