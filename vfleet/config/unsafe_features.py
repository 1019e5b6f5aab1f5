"""Features that turn off or widen vLLM's protection, each behind an explicit opt-in.

Why a table: a flag in vllm_extra_args or a variable in vllm_env can open endpoints the API
key does not reach or let clients read the host's files. Such a feature is refused unless the
inventory names it in `vllm_allow_unsafe`, and then preflight and smoke warn about it. The
table says, per feature, which flags and environment variables belong to it.
"""
from __future__ import annotations

__all__ = ["UNSAFE_FEATURES"]

# feature name -> what it opens (for the docs and the warning line)
UNSAFE_FEATURES: dict[str, str] = {
    "dev_mode": "VLLM_SERVER_DEV_MODE: vLLM's debug endpoints outside /v1, which the API key does not cover",
    "runtime_lora": "VLLM_ALLOW_RUNTIME_LORA_UPDATING: clients load and unload LoRA adapters",
    "local_media": "--allowed-local-media-path: clients read files under that folder of the host",
    "remote_code": "trust_remote_code: the model folder's own Python code runs in the service",
}
