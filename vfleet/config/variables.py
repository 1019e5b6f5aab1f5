"""The variables vfleet understands: one table, read by the inventory checker and docs/variables.md.

Why a table: the schema check, the defaults the roles fall back on and docs/variables.md's
variable list all come from the same rows, so a variable cannot be documented with one
type and checked with another. The engine (vfleet/engine/) only knows how to check a table; which
variables exist, and what vLLM needs, is decided here. The rows themselves live in
vfleet/config/serving_variables.py (the vLLM service on each host) and
vfleet/config/fleet_variables.py (SSH connection, gateway, monitoring, replicas, lab); this module
joins them, in the table's order, and adds the aliases, the schema and the docs table.
"""

from __future__ import annotations

import json

from vfleet.config.fleet_variables import CONNECTION_VARIABLES, FLEET_VARIABLES
from vfleet.config.serving_variables import SERVING_VARIABLES
from vfleet.engine.schema_words import describe
from vfleet.engine.varschema import VariableSpec, VarSchema

__all__ = ["Variable", "VARIABLES", "SCHEMA", "markdown_table", "VLLM_GROUP", "GATEWAY_GROUP", "MONITORING_GROUP"]

# The inventory groups vfleet acts on: hosts that serve, and nginx in front of them.
VLLM_GROUP = "vllm"
GATEWAY_GROUP = "gateways"
# Hosts that run Prometheus for the fleet (`vfleet monitor --deploy`).
MONITORING_GROUP = "monitoring"

# The row type of the table (the engine's generic spec under the name the roles use).
Variable = VariableSpec


# The table, in the order of docs/variables.md: connection, vLLM install and service, gateway,
# monitoring, multi-node replicas, lab.
VARIABLES: list[Variable] = [*CONNECTION_VARIABLES, *SERVING_VARIABLES, *FLEET_VARIABLES]

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
