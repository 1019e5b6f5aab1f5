"""Features that turn off or widen vLLM's protection, each behind an explicit opt-in.

Why a table: a flag in vllm_extra_args or a variable in vllm_env can open endpoints the API
key does not reach, let clients read the host's files or make the service import code. Such a
feature is refused unless the inventory names it in `vllm_allow_unsafe`
(vfleet/config/extra_args.py), and then preflight and smoke warn about it. The table says,
per feature, which flags and environment variables belong to it and what it opens.

Sources: vLLM's security guide (docs/usage/security.md, "API Key Authentication
Limitations": the key covers /v1, /v2 and /inference only; dev-mode, profiler and
tokenizer-info endpoints sit outside; "Dynamic LoRA Loading"; "Tool Server and MCP
Security"), vllm/envs.py, and the `--help=all` captures in vfleet/config/data/.

Not in the table, on purpose: --enable-server-load-tracking (it only fills the /load endpoint
that exists anyway), --enable-lora alone (adapters named by the inventory; loading at run time
needs VLLM_ALLOW_RUNTIME_LORA_UPDATING), VLLM_PLUGINS (it narrows which installed plugins load).
trust_remote_code is not here either: the variable itself is the explicit opt-in, and preflight
and smoke warn about it (`TRUST_REMOTE_CODE`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["UnsafeFeature", "UNSAFE_FEATURES", "TRUST_REMOTE_CODE", "env_is_on"]


@dataclass(frozen=True)
class UnsafeFeature:
    opens: str  # one line: what it opens (the error, the warning, the docs)
    flags: tuple[str, ...] = ()  # canonical vLLM flags; their `--no-` forms are safe
    env: tuple[str, ...] = ()  # environment variables (in vllm_env) that switch it on


UNSAFE_FEATURES: dict[str, UnsafeFeature] = {
    "cors": UnsafeFeature(
        "cross-origin browser access to the API (vLLM allows none by default), with credentials if --allow-credentials",
        flags=("--allowed-origins", "--allow-credentials"),
    ),
    "dev_mode": UnsafeFeature(
        "vLLM's development endpoints outside /v1, which the API key does not cover: "
        "/collective_rpc runs engine methods, /sleep and /reset_* stop or disrupt serving",
        env=("VLLM_SERVER_DEV_MODE",),
    ),
    "insecure_serialization": UnsafeFeature(
        "pickle on vLLM's internal sockets: whoever reaches them runs code in the service",
        env=("VLLM_ALLOW_INSECURE_SERIALIZATION",),
    ),
    "local_media": UnsafeFeature(
        'clients read files under that folder of the host (vLLM: "This is a security risk")',
        flags=("--allowed-local-media-path",),
    ),
    "plugin_code": UnsafeFeature(
        "Python code from outside the pinned vLLM is imported into the service (a middleware "
        "sees every request and its key)",
        flags=(
            "--middleware",
            "--tool-parser-plugin",
            "--reasoning-parser-plugin",
            "--logits-processors",
            "--worker-extension-cls",
            "--io-processor-plugin",
            "--model-class-overrides",
        ),
    ),
    "profiler": UnsafeFeature(
        "/start_profile and /stop_profile outside /v1, without the API key, writing traces on the host",
        flags=("--profiler-config",),
        env=("VLLM_TORCH_PROFILER_DIR",),
    ),
    "request_templates": UnsafeFeature(
        "clients send the chat template (Jinja the server renders) or multimodal processing "
        "arguments, which vLLM refuses by default",
        flags=("--trust-request-chat-template", "--trust-request-mm-kwargs"),
    ),
    "runtime_lora": UnsafeFeature(
        "clients load and unload LoRA adapters (/v1/load_lora_adapter), changing what the model answers",
        env=("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "VLLM_LORA_RESOLVER_CACHE_DIR"),
    ),
    "tokenizer_info": UnsafeFeature(
        "/tokenizer_info outside /v1, without the API key: the chat template and tokenizer settings",
        flags=("--enable-tokenizer-info-endpoint",),
    ),
    "tool_server": UnsafeFeature(
        "the Responses API calls tool servers; `demo` runs model-written Python in Docker without network isolation",
        flags=("--tool-server",),
        env=("VLLM_GPT_OSS_SYSTEM_TOOL_MCP_LABELS",),
    ),
}

TRUST_REMOTE_CODE = "trust_remote_code: the model folder's own Python code runs in the service"

_OFF = {"", "0", "false", "no", "off"}


def env_is_on(value: object) -> bool:
    """Whether a vllm_env value switches its feature on. vLLM reads these as int or as
    "1"/"true" (vllm/envs.py); anything but a plain off-word counts as on, so an odd spelling
    is never a way around the opt-in."""
    return str(value).strip().lower() not in _OFF
