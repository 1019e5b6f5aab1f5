"""Render the nginx gateway in front of the vLLM hosts (pure function, no SSH).

    text = render_gateway(backends, vars, drained={"gpu02"})

One file, installed as /etc/nginx/conf.d/vfleet-gateway.conf (GATEWAY_CONF_PATH): Debian's
stock nginx.conf includes conf.d/*.conf inside its http{} block, so the file holds
http-context directives only (limit_req_zone, upstream, server). The gateway role must also
remove /etc/nginx/sites-enabled/default when the gateway listens on port 80 as the
default_server (two default servers on one port fail `nginx -t`).

backends: a sequence of {"name": inventory host name, "address": IP or DNS name,
"port": vLLM port} (or (name, address, port) tuples), in the order they should appear.
drained: names whose server line gets `down` (the rolling restart drains a host by
re-rendering with its name here and reloading nginx). Unknown names are an error.

Routing (see docs/lab-vllm-notes.md):
- /health is answered by nginx itself (200 while nginx is up); backend readiness is checked
  on each host, not through the gateway.
- /metrics (and everything under it) -> 404: scraped per host, never exposed.
- only the prefixes in gateway_allowed_prefixes (default "/v1/") are proxied; everything
  else -> 404. vLLM's --api-key/VLLM_API_KEY only guards /v1, /v2 and /inference; its
  /invocations and other endpoints answer without a key, so the gateway must not pass them.
"""
from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Collection, Mapping, Sequence

import jinja2

from roles.quoting import FILTERS, QuotingError

GATEWAY_CONF_PATH = "/etc/nginx/conf.d/vfleet-gateway.conf"

DEFAULTS: dict = {
    # names shared with roles/variables.py: gateway_port, gateway_rate_limit,
    # gateway_rate_burst, gateway_client_max_body_size, gateway_read_timeout (seconds)
    "gateway_port": 80,
    "gateway_listen_address": None,     # e.g. "127.0.0.1"; None: all addresses
    "gateway_default_server": True,
    "gateway_server_name": "_",
    "gateway_upstream_name": "vfleet_vllm",
    "gateway_max_fails": 3,
    "gateway_fail_timeout": "10s",
    "gateway_keepalive": 32,
    "gateway_keepalive_timeout": "60s",
    "gateway_client_max_body_size": "10m",
    "gateway_rate_limit": "20r/s",
    "gateway_rate_burst": 40,
    "gateway_rate_zone_size": "10m",
    "gateway_proxy_connect_timeout": "5s",
    "gateway_read_timeout": 600,
    "gateway_next_upstream_tries": 2,
    "gateway_allowed_prefixes": ["/v1/"],
}

_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
_INV_NAME = re.compile(r"[A-Za-z0-9_.@:+-]+")
_SIZE = re.compile(r"[0-9]+[kKmMgG]?")
_TIME = re.compile(r"[0-9]+(ms|s|m|h|d)?")
_RATE = re.compile(r"[0-9]+r/[sm]")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PREFIX = re.compile(r"/[A-Za-z0-9_./-]*")


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


# earlier names of this renderer's variables (roles/gateway.py used them): still accepted
_ALIASES = {"gateway_rate_per_client": "gateway_rate_limit",
            "gateway_proxy_read_timeout": "gateway_read_timeout"}


def _aliases(v: dict) -> dict:
    out = dict(v)
    for old, new in _ALIASES.items():
        if old in out:
            out.setdefault(new, out.pop(old))
    listen = out.pop("gateway_listen", None)
    if listen is not None and "gateway_port" not in out:
        addr, _, port = str(listen).rpartition(":")
        out["gateway_port"] = port
        if addr:
            out.setdefault("gateway_listen_address", addr)
    return out


def _seconds(value) -> str:
    return f"{value}s" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _listen(v: Mapping) -> str:
    port = int(v["gateway_port"])
    if not 0 < port < 65536:
        raise GatewayRenderError(f"gateway_port {port} out of range")
    addr = v.get("gateway_listen_address")
    if not addr:
        return str(port)
    try:
        ip = ipaddress.ip_address(str(addr).strip("[]"))
    except ValueError as e:
        raise GatewayRenderError(f"gateway_listen_address {addr!r}: not an IP address") from e
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def normalize_backends(backends: Sequence) -> list[dict]:
    out = []
    for b in backends:
        if isinstance(b, Mapping):
            name, address, port = b["name"], b["address"], b.get("port", 8000)
        else:
            name, address, port = b
        out.append({"name": _check("backend name", name, _INV_NAME),
                    "server": _server_address(address, port)})
    names = [b["name"] for b in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise GatewayRenderError(f"duplicate backend names: {', '.join(dup)}")
    return out


def render_gateway(backends: Sequence, vars: Mapping | None = None,
                   drained: Collection[str] = ()) -> str:
    """The text of the gateway's conf.d file."""
    v = dict(DEFAULTS)
    v.update(_aliases({k: val for k, val in (vars or {}).items() if val is not None}))
    bs = normalize_backends(backends)
    if not bs:
        raise GatewayRenderError("no backends: an upstream needs at least one server")
    names = {b["name"] for b in bs}
    unknown = sorted(set(drained) - names)
    if unknown:
        raise GatewayRenderError(f"drained hosts not among the backends: {', '.join(unknown)}")
    for b in bs:
        b["down"] = b["name"] in drained
    prefixes = v["gateway_allowed_prefixes"]
    if isinstance(prefixes, str) or not prefixes:
        raise GatewayRenderError("gateway_allowed_prefixes must be a non-empty list")
    ctx = {
        "backends": bs,
        "drained_names": sorted(drained),
        "listen": _listen(v),
        "default_server": bool(v["gateway_default_server"]),
        "server_name": v["gateway_server_name"],
        "upstream_name": _check("gateway_upstream_name", v["gateway_upstream_name"], _IDENT),
        "zone_name": _check("gateway_upstream_name", v["gateway_upstream_name"], _IDENT)
        + "_per_client",
        "max_fails": int(v["gateway_max_fails"]),
        "fail_timeout": _check("gateway_fail_timeout", v["gateway_fail_timeout"], _TIME),
        "keepalive": int(v["gateway_keepalive"]),
        "keepalive_timeout": _check("gateway_keepalive_timeout",
                                    v["gateway_keepalive_timeout"], _TIME),
        "client_max_body_size": _check("gateway_client_max_body_size",
                                       v["gateway_client_max_body_size"], _SIZE),
        "rate_per_client": _check("gateway_rate_limit", v["gateway_rate_limit"], _RATE),
        "rate_burst": int(v["gateway_rate_burst"]),
        "rate_zone_size": _check("gateway_rate_zone_size", v["gateway_rate_zone_size"], _SIZE),
        "proxy_connect_timeout": _check("gateway_proxy_connect_timeout",
                                        v["gateway_proxy_connect_timeout"], _TIME),
        "proxy_read_timeout": _check("gateway_read_timeout",
                                     _seconds(v["gateway_read_timeout"]), _TIME),
        "next_upstream_tries": int(v["gateway_next_upstream_tries"]),
        "allowed_prefixes": [_check("gateway_allowed_prefixes", p, _PREFIX) for p in prefixes],
    }
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent.parent
                                           / "templates")),
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True)
    env.filters.update(FILTERS)
    try:
        return env.get_template("nginx-gateway.conf.j2").render(**ctx)
    except QuotingError as e:
        raise GatewayRenderError(str(e)) from e
