"""Render the nginx gateway in front of the vLLM hosts (pure function, no SSH).

    text = render_gateway([Backend.of(c) for c in vllm_configs], gateway_cfg, drained={"gpu02"})

One file, installed as /etc/nginx/conf.d/vfleet-gateway.conf (GATEWAY_CONF_PATH): Debian's
stock nginx.conf includes conf.d/*.conf inside its http{} block, so the file holds
http-context directives only (limit_req_zone, upstream, server). The gateway role must also
remove /etc/nginx/sites-enabled/default when the gateway listens on port 80 as the
default_server (two default servers on one port fail `nginx -t`).

backends: the vLLM hosts (Backend: inventory name, address, vLLM port), in the order they
should appear.
drained: names whose server line gets `down` (the rolling restart drains a host by
re-rendering with its name here and reloading nginx). Unknown names are an error.

Routing (see docs/lab-vllm-notes.md):
- /health is answered by nginx itself (200 while nginx is up); backend readiness is checked
  on each host, not through the gateway.
- /metrics (and everything under it) -> 404: scraped per host, never exposed.
- only the prefixes in ALLOWED_PREFIXES ("/v1/") are proxied; everything else -> 404.
  vLLM's --api-key/VLLM_API_KEY only guards /v1, /v2 and /inference; its
  /invocations and other endpoints answer without a key, so the gateway must not pass them.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Collection, Sequence

from roles.hostconfig import HostConfig
from roles.quoting import QuotingError
from roles.templating import environment

GATEWAY_CONF_PATH = "/etc/nginx/conf.d/vfleet-gateway.conf"

# Fixed parts of the gateway (not inventory variables: nothing an operator has needed to vary).
SERVER_NAME = "_"
UPSTREAM_NAME = "vfleet_vllm"
KEEPALIVE = 32
KEEPALIVE_TIMEOUT = "60s"
RATE_ZONE_SIZE = "10m"
PROXY_CONNECT_TIMEOUT = "5s"
NEXT_UPSTREAM_TRIES = 2
# vLLM's --api-key guards only /v1 (and /v2, /inference): nothing else may be proxied.
ALLOWED_PREFIXES = ("/v1/",)

_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
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
            raise GatewayRenderError(f"backend address {address!r} is neither an IP "
                                     "address nor a host name")
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


@dataclass(frozen=True)
class Backend:
    """One vLLM host behind the gateway, as its HostConfig names and reaches it."""

    name: str
    address: str
    port: int

    @classmethod
    def of(cls, cfg: HostConfig) -> "Backend":
        return cls(cfg.name, cfg.address, cfg.vllm_port)


def normalize_backends(backends: Sequence[Backend]) -> list[dict]:
    out = [{"name": _check("backend name", b.name, _INV_NAME), "server": _server_address(b.address, b.port)}
           for b in backends]
    names = [b["name"] for b in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise GatewayRenderError(f"duplicate backend names: {', '.join(dup)}")
    return out


def render_gateway(backends: Sequence[Backend], cfg: HostConfig, drained: Collection[str] = ()) -> str:
    """The text of the gateway's conf.d file, for the gateway host `cfg`."""
    bs = normalize_backends(backends)
    if not bs:
        raise GatewayRenderError("no backends: an upstream needs at least one server")
    names = {b["name"] for b in bs}
    unknown = sorted(set(drained) - names)
    if unknown:
        raise GatewayRenderError(f"drained hosts not among the backends: {', '.join(unknown)}")
    for b in bs:
        b["down"] = b["name"] in drained
    ctx = {
        "backends": bs,
        "drained_names": sorted(drained),
        "listen": _listen(cfg),
        "default_server": True,
        "server_name": SERVER_NAME,
        "upstream_name": UPSTREAM_NAME,
        "zone_name": UPSTREAM_NAME + "_per_client",
        "max_fails": cfg.gateway_max_fails,
        "fail_timeout": _seconds(cfg.gateway_fail_timeout),
        "keepalive": KEEPALIVE,
        "keepalive_timeout": KEEPALIVE_TIMEOUT,
        "client_max_body_size": _check("gateway_client_max_body_size", cfg.gateway_client_max_body_size, _SIZE),
        "rate_per_client": _check("gateway_rate_limit", cfg.gateway_rate_limit, _RATE),
        "rate_burst": cfg.gateway_rate_burst,
        "rate_zone_size": RATE_ZONE_SIZE,
        "proxy_connect_timeout": PROXY_CONNECT_TIMEOUT,
        "proxy_read_timeout": _seconds(cfg.gateway_read_timeout),
        "next_upstream_tries": NEXT_UPSTREAM_TRIES,
        "allowed_prefixes": list(ALLOWED_PREFIXES),
    }
    try:
        return environment().get_template("nginx-gateway.conf.j2").render(**ctx)
    except QuotingError as e:
        raise GatewayRenderError(str(e)) from None
