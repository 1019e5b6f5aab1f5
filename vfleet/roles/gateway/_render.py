"""Render the nginx gateway in front of the vLLM hosts (pure function, no SSH).

    text = render_gateway([Backend.of(c) for c in vllm_configs], gateway_cfg, drained={"gpu02"})

One file, installed as /etc/nginx/conf.d/vfleet-gateway.conf (GATEWAY_CONF_PATH): Debian's
stock nginx.conf includes conf.d/*.conf inside its http{} block, so the file holds
http-context directives only (limit_req_zone, upstream, server). The gateway role must also
remove /etc/nginx/sites-enabled/default when the gateway listens on port 80 as the
default_server (two default servers on one port fail `nginx -t`).

backends: the vLLM hosts (Backend: inventory name, address, vLLM port, served model, weight,
backup, max_conns, the model's max_tokens ceiling and route prefix), in the order they should
appear; one upstream per served model (vfleet/roles/gateway/_models.py groups them).
drained: names whose server line gets `down` (the rolling restart drains a host by
re-rendering with its name here and reloading nginx). Unknown names are an error.

Routing (see docs/lab-vllm-notes.md):
- /health is answered by nginx itself (200 while nginx is up); backend readiness is checked
  on each host, not through the gateway.
- only vLLM's inference API is proxied (the allow-list of vfleet/roles/gateway/_endpoints.py:
  /v1/chat/completions, /v1/completions, ...); everything else -> 404 with a JSON body:
  /metrics (scraped per host), vLLM's administration under /v1 (/v1/load_lora_adapter), and
  its endpoints outside /v1 and /v2 (/invocations, /tokenize), which its key does not guard.
- /v1/... is routed by the body's "model" field (or /v1/<gateway_route_prefix>/...): the
  body is read first (mirror), gateway.js (njs, vfleet/roles/gateway/_njs.py) parses it and
  gives a verdict, proxy_pass picks the model's upstream, or error_page answers 404
  model_not_found / 400 (@vfleet_answer), or sends it to the model's fallback.
- With gateway_tenants (docs/gateway.md): the client's key names a tenant (401 otherwise),
  each tenant has its own rate and concurrency zones (vfleet/roles/gateway/_tenants.py), and
  vLLM gets the fleet's key, never the client's.
- GET /v1/models is the inventory's model list (static), after a backend accepted the key;
  with tenants, the tenant's models.
- nginx's stub_status is served by a second server on 127.0.0.1:monitoring_gateway_status_port
  (STATUS_PATH), for prometheus-nginx-exporter on the same host (vfleet/roles/monitoring/_exporter.py).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Collection, Sequence

from vfleet.config.access_log import ACCESS_LOG  # the log_format's readers agree on it there
from vfleet.config.hostconfig import HostConfig
from vfleet.config.quoting import QuotingError, nginx_quote
from vfleet.roles.gateway._endpoints import api_path_map, path_model_map
from vfleet.roles.gateway._models import Model, ModelError, error_json, group_models, models_json
from vfleet.roles.gateway._njs import JS_IMPORT
from vfleet.roles.gateway._tenants import LIMIT_ZONE_SIZE, TenantError, tenant_messages, tenant_rows
from vfleet.templates.environment import environment

GATEWAY_CONF_PATH = "/etc/nginx/conf.d/vfleet-gateway.conf"

# Fixed parts of the gateway (not inventory variables: nothing an operator has needed to vary).
SERVER_NAME = "_"
RATE_ZONE_NAME = "vfleet_vllm_per_client"
# An upstream's shared-memory zone holds a peer per server: a fixed 64k held about 50 servers
# (`nginx -t`, nginx 1.22: "ngx_slab_alloc() failed: no memory in upstream zone"), so a model
# of 100 hosts failed on the gateway. Measured there: 784 KiB for 1,000 servers named by IPv4,
# 840 KiB for 1,000 long IPv6 ones; sized with headroom per server and its name.
ZONE_BASE_BYTES = 64 * 1024
ZONE_BYTES_PER_SERVER = 1024
BODY_BUFFER_UNLIMITED = "16m"
KEEPALIVE = 32
# vLLM's HTTP server (uvicorn) closes a connection idle this long: uvicorn's default, which
# vLLM keeps (VLLM_HTTP_TIMEOUT_KEEP_ALIVE in vllm/envs.py, 5 in 0.32). nginx must drop an idle upstream
# connection first (keepalive_timeout, one second earlier): with nginx's stock 60 s, a POST
# written into a connection vLLM is closing at that instant fails with 502, and nginx never
# replays a POST (proxy_next_upstream): 1 request in ~11,000 in the lab's rolling restart.
VLLM_KEEP_ALIVE_S = 5
KEEP_ALIVE_ENV = "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"
RATE_ZONE_SIZE = "10m"
PROXY_CONNECT_TIMEOUT = "5s"
NEXT_UPSTREAM_TRIES = 2
STATUS_PATH = "/stub_status"  # where Debian's prometheus-nginx-exporter looks by default
CONFIG_ID_PATH = "/vfleet-config"
# stands for the config's id until _files.py knows it (the id is a hash of the files it is in)
CONFIG_ID_PLACEHOLDER = "@VFLEET_CONFIG_ID@"
# The certificate and key on the gateway, relative to nginx's config folder (/etc/nginx).
TLS_FILES = {"cert": "vfleet/tls/gateway.crt", "key": "vfleet/tls/gateway.key"}

_HOSTNAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
_INV_NAME = re.compile(r"[A-Za-z0-9_.@:+-]+")
_SIZE = re.compile(r"[0-9]+[kKmMgG]?")
_RATE = re.compile(r"[0-9]+r/[sm]")


class GatewayRenderError(ValueError):
    pass


def _check(name: str, value, pattern: re.Pattern) -> str:
    s = str(value)
    if not pattern.fullmatch(s):
        raise GatewayRenderError(f"{name}: {s!r} is not valid here")
    return s


def _server_address(address: str, port) -> str:
    address = str(address)
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
        host = f"[{ip}]" if ip.version == 6 else str(ip)
    except ValueError:
        if not _HOSTNAME.fullmatch(address):
            raise GatewayRenderError(f"backend address {address!r} is neither an IP address nor a host name")
        host = address
    port = int(port)
    if not 0 < port < 65536:
        raise GatewayRenderError(f"backend port {port} out of range")
    return f"{host}:{port}"


def _seconds(value) -> str:
    return f"{value}s" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _listen(cfg: HostConfig) -> str:
    port = cfg.gateway_port
    if not 0 < port < 65536:
        raise GatewayRenderError(f"gateway_port {port} out of range")
    addr = cfg.gateway_listen_address
    if not addr:
        return str(port)
    try:
        ip = ipaddress.ip_address(str(addr).strip("[]"))
    except ValueError as e:
        raise GatewayRenderError(f"gateway_listen_address {addr!r}: not an IP address") from e
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def status_listen(cfg: HostConfig) -> str:
    """The stub_status listener: loopback, and never the public port (on 127.0.0.1 it would
    take the gateway's own loopback traffic)."""
    port = cfg.monitoring.gateway_status_port
    if port == cfg.gateway_port:
        raise GatewayRenderError(
            f"{cfg.name}: monitoring_gateway_status_port {port} is gateway_port too; give it a port of its own"
        )
    return f"127.0.0.1:{port}"


@dataclass(frozen=True)
class Backend:
    """One vLLM host behind the gateway, as its HostConfig names, reaches and weights it."""

    name: str
    address: str
    port: int
    model: str
    weight: int = 1
    backup: bool = False
    max_conns: int | None = None
    max_conns_settled: bool = field(
        default=True, compare=False
    )  # from the inventory or this run's plan; False: a stand-in
    max_tokens: int | None = None
    route_prefix: str | None = None
    max_model_len: int | None = None
    keep_alive_s: int = VLLM_KEEP_ALIVE_S  # how long the host's vLLM keeps an idle connection
    fallback: str | None = None  # gateway_fallback_model of the host's model
    adapters: tuple[str, ...] = ()  # the names of its LoRA adapters

    @classmethod
    def of(cls, cfg: HostConfig, max_concurrency: float | None = None) -> "Backend":
        """`max_concurrency`: the planner's (vfleet/roles/capacity Plan.max_concurrency) for this
        host, when preflight ran; it caps the host's connections unless the inventory sets
        gateway_max_conns, and max_num_seqs stands in without a plan."""
        planned = int(max_concurrency) if max_concurrency and max_concurrency >= 1 else None
        return cls(
            cfg.name,
            cfg.address,
            cfg.vllm_port,
            str(cfg.served_model_name or ""),
            weight=cfg.gateway_weight,
            backup=cfg.gateway_backup,
            max_conns=cfg.gateway_max_conns or planned or cfg.max_num_seqs,
            max_conns_settled=bool(cfg.gateway_max_conns or planned),
            max_tokens=cfg.gateway_max_tokens,
            route_prefix=cfg.gateway_route_prefix,
            max_model_len=cfg.max_model_len,
            keep_alive_s=_vllm_keep_alive(cfg),
            fallback=cfg.gateway_fallback_model,
            adapters=tuple(a.name for a in cfg.lora_adapters),
        )


def _vllm_keep_alive(cfg: HostConfig) -> int:
    """The host's vLLM keep-alive: its vllm_env may set KEEP_ALIVE_ENV (vLLM reads it as int)."""
    value = str(cfg.vllm_env.get(KEEP_ALIVE_ENV, "")).strip()
    return int(value) if value.isdigit() and int(value) > 0 else VLLM_KEEP_ALIVE_S


def upstream_keepalive_timeout(servers: Sequence[dict]) -> str:
    """nginx's keepalive_timeout for one model's upstream: a second under the shortest
    keep-alive of its hosts' vLLM, so nginx, not vLLM, closes an idle connection."""
    return f"{max(1, min(b['keep_alive_s'] for b in servers) - 1)}s"


def upstream_zone_size(servers: Sequence[dict]) -> str:
    """The zone of one model's upstream, for its servers (their peers and names)."""
    need = ZONE_BASE_BYTES + sum(ZONE_BYTES_PER_SERVER + 2 * len(b["server"]) for b in servers)
    return f"{-(-need // 1024)}k"


def normalize_backends(backends: Sequence[Backend]) -> list[dict]:
    out = [
        {
            "name": _check("backend name", b.name, _INV_NAME),
            "server": _server_address(b.address, b.port),
            "model": b.model,
            "weight": int(b.weight),
            "backup": bool(b.backup),
            "max_conns": None if b.max_conns is None else int(b.max_conns),
            "keep_alive_s": int(b.keep_alive_s),
        }
        for b in backends
    ]
    seen: set[str] = set()
    dup: set[str] = set()
    for b in out:  # one pass (a count per name was quadratic: 399 s for 100,000 hosts)
        (dup if b["name"] in seen else seen).add(b["name"])
    if dup:
        raise GatewayRenderError(f"duplicate backend names: {', '.join(sorted(dup))}")
    return out


def _messages(models: Sequence[Model], cfg: HostConfig) -> dict[str, str]:
    """The gateway's own 4xx answers, by the verdict gateway.js gives a request."""
    out = {
        "model_not_found": error_json(
            "The model named in the request body is not served here (GET /v1/models lists the models).",
            "model_not_found",
            "model",
        ),
        "max_tokens_twice": error_json(
            "max_tokens (or max_completion_tokens, max_output_tokens) is given more than once: give one, once.",
            "invalid_value",
            "max_tokens",
        ),
        "field_repeated": error_json(
            "A top-level field of the request body is given more than once: give each once.", "invalid_value", None
        ),
        "invalid_json": error_json(
            "The request body is not a JSON object (or is nested deeper than the gateway reads: 31 levels).",
            "invalid_json",
            None,
        ),
        "body_unread": error_json(
            "The request body is larger than the gateway reads (gateway_client_max_body_size).", "invalid_value", None
        ),
        "unauthorized": UNAUTHORIZED_JSON,
    }
    for m in models:
        if m.max_tokens is not None:
            out[f"max_tokens_{m.index}"] = error_json(
                f"max_tokens (or max_completion_tokens) for model {m.name} must be an integer of at most "
                f"{m.max_tokens} (the ceiling the gateway enforces for this model).",
                "max_tokens_too_large",
                "max_tokens",
            )
    return out | tenant_messages(cfg.gateway_tenants)


UNAUTHORIZED_JSON = error_json("Invalid or missing API key.", "invalid_api_key", None, "authentication_error")
RATE_LIMITED_JSON = error_json(
    "Too many requests for this key: wait for Retry-After seconds.", "rate_limit_exceeded", None, "requests"
)
CONCURRENCY_LIMITED_JSON = error_json(
    "Too many requests in flight for this key: wait for one to finish.", "concurrency_limit_exceeded", None, "requests"
)


def render_gateway(
    backends: Sequence[Backend], cfg: HostConfig, drained: Collection[str] = (), access_log: str = ACCESS_LOG
) -> str:
    """The text of the gateway's conf.d file, for the gateway host `cfg`. `access_log`: where
    its JSON lines go (a scratch path for `nginx -t` away from the gateway)."""
    bs = normalize_backends(backends)
    drained = set(drained)
    if not bs:
        raise GatewayRenderError("no backends: an upstream needs at least one server")
    names = {b["name"] for b in bs}
    unknown = sorted(drained - names)
    if unknown:
        raise GatewayRenderError(f"drained hosts not among the backends: {', '.join(unknown)}")
    for b in bs:
        b["down"] = b["name"] in drained
    try:
        models = group_models(backends)
        tenants = tenant_rows(cfg.gateway_tenants, models)
    except (ModelError, TenantError) as e:
        raise GatewayRenderError(str(e)) from None
    body_size = _check("gateway_client_max_body_size", cfg.gateway_client_max_body_size, _SIZE)
    # client_body_buffer_size takes k and m only; 0 (no body limit) gets a fixed buffer, and
    # a larger body is spooled to a file, where the maps cannot read it (404 model_not_found)
    buffer = (
        f"{int(body_size[:-1]) * 1024}m"
        if body_size[-1] in "gG"
        else BODY_BUFFER_UNLIMITED
        if body_size.rstrip("kKmM") == "0"
        else body_size
    )
    by_model: dict[str, list[dict]] = {}
    for b in bs:  # grouped in one pass, not one scan of the hosts per model
        by_model.setdefault(b["model"], []).append(b)
    ctx = {
        "backends": bs,
        "models": [
            {
                "m": m,
                "servers": by_model[m.name],
                "name_word": nginx_quote(m.name),
                "keepalive_timeout": upstream_keepalive_timeout(by_model[m.name]),
                "zone_size": upstream_zone_size(by_model[m.name]),
            }
            for m in models
        ],
        "messages": _messages(models, cfg),
        "tenants": tenants,
        "limit_zone_size": LIMIT_ZONE_SIZE,
        "js_import": JS_IMPORT,
        "access_log": access_log,
        "tls": TLS_FILES if cfg.gateway_tls else None,
        "rate_limited_json": RATE_LIMITED_JSON,
        "concurrency_limited_json": CONCURRENCY_LIMITED_JSON,
        "models_json": models_json(models),
        "api_paths": api_path_map(models),
        "path_models": path_model_map(models),
        "no_route_json": error_json(
            "No such endpoint on this gateway (it serves the OpenAI API: "
            "/v1/chat/completions, /v1/completions, /v1/models, ...).",
            "not_found",
            None,
        ),
        "unavailable_json": error_json(
            "No host of this model can take the request now (all busy, down or drained): retry later.",
            "model_unavailable",
            "model",
            "server_error",
        ),
        "unauthorized_json": UNAUTHORIZED_JSON,
        "drained_names": sorted(drained),
        "listen": _listen(cfg),
        "status_listen": status_listen(cfg),
        "status_path": STATUS_PATH,
        "config_id_path": CONFIG_ID_PATH,
        "config_id": CONFIG_ID_PLACEHOLDER,
        "default_server": True,
        "server_name": SERVER_NAME,
        "zone_name": RATE_ZONE_NAME,
        "max_fails": cfg.gateway_max_fails,
        "fail_timeout": _seconds(cfg.gateway_fail_timeout),
        "keepalive": KEEPALIVE,
        "client_max_body_size": body_size,
        "client_body_buffer_size": buffer,
        "rate_per_client": _check("gateway_rate_limit", cfg.gateway_rate_limit, _RATE),
        "rate_burst": cfg.gateway_rate_burst,
        "rate_zone_size": RATE_ZONE_SIZE,
        "proxy_connect_timeout": PROXY_CONNECT_TIMEOUT,
        "proxy_read_timeout": _seconds(cfg.gateway_read_timeout),
        "next_upstream_tries": NEXT_UPSTREAM_TRIES,
    }
    try:
        return environment().get_template("nginx-gateway.conf.j2").render(**ctx)
    except QuotingError as e:
        raise GatewayRenderError(str(e)) from None
