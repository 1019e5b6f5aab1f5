"""The rows of the variable table about everything around the vLLM service: how vfleet reaches
a host (SSH), the nginx gateway in front of the hosts (limits, tenants, TLS, several models),
Prometheus monitoring, replicas that span several hosts, and the lab.

Separate from vfleet/config/variables.py (which joins these rows with the serving rows into
VARIABLES, the schema and docs/variables.md) so that each file stays small. The table's order
is CONNECTION_VARIABLES, then the serving rows, then FLEET_VARIABLES; keep each list's order.
"""

from __future__ import annotations

from vfleet.config.value_types import (
    CONTROLLER,
    COUNT,
    DURATION,
    FRACTION,
    GPUS,
    NAME,
    PORT,
    RATE,
    SECONDS,
    SERVED_NAME,
    STR,
    TENANT,
    TOKENS,
    VERSION,
    int_range,
    nullable,
)
from vfleet.engine.varschema import VariableSpec as Variable

__all__ = ["CONNECTION_VARIABLES", "FLEET_VARIABLES"]

CONNECTION_VARIABLES: list[Variable] = [
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
]

FLEET_VARIABLES: list[Variable] = [
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
