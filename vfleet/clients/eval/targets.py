"""What eval needs of the inventory: the target (URL, served model name, key) of a vLLM host or a
gateway, the `measured` record the inventory can fill, and the note about batch invariance.

measured_for is the one place a report's setup record is filled: today from the HostConfig
(what was deployed); live readings of the host (GPU, memory used, the running argv) extend it."""

from __future__ import annotations

from typing import Any

from vfleet.clients.eval.runner import EvalTarget
from vfleet.clients.measured import record
from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError

BATCH_INVARIANT = "VLLM_BATCH_INVARIANT"


def _model(cfg: HostConfig) -> str:
    if not cfg.served_model_name:
        raise VfleetError(f"{cfg.name}: no model_name (or served_model_name) in the inventory: which model to ask for?")
    return str(cfg.served_model_name)


def host_target(cfg: HostConfig) -> EvalTarget:
    return EvalTarget(cfg.base_url, _model(cfg), cfg.api_key, cfg.name)


def gateway_target(cfg: HostConfig) -> EvalTarget:
    return EvalTarget(cfg.gateway_url, _model(cfg), cfg.api_key, f"gateway {cfg.name}", verify=cfg.gateway_verify)


def measured_for(cfg: HostConfig) -> dict[str, Any]:
    """The setup a report was measured on, as far as the inventory knows it."""
    return record(
        vllm_version=cfg.vllm_version,
        model=cfg.served_model_name or cfg.model_name,
        dtype=cfg.dtype,
        quantization=cfg.quantization,
        kv_cache_dtype=cfg.kv_cache_dtype,
    )


def _on(value: str | None) -> bool:
    """vLLM reads the variable as an int (vllm_is_batch_invariant: int(val) != 0)."""
    try:
        return int(str(value).strip()) != 0
    except ValueError:
        return False


def batch_invariance_note(cfg: HostConfig) -> str | None:
    """One line when the host's vLLM has batch invariance and its vllm_env does not turn it on."""
    row = vllm_facts.env_var(BATCH_INVARIANT, cfg.vllm_version)
    if row is None or _on(cfg.vllm_env.get(BATCH_INVARIANT)):
        return None
    return (
        f"note: {cfg.name}: vLLM {cfg.vllm_version} has {BATCH_INVARIANT}=1 and its vllm_env does not set it: "
        "replies can drift with what else is in the batch, so compare divergence, not exact tokens "
        "(docs/eval.md)"
    )
