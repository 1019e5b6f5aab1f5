"""nginx gateway rendering (vfleet/roles/gateway/_render.py), read as text: upstream and drain markers,
each knob from the gateway host's HostConfig, the schema's defaults, the fixed parts, and what is
refused (bad backends, bad values). test_gateway_render.py hands the same output to a real nginx.

The gateway's knobs come from the gateway host's HostConfig (tests/unit/configs.py builds it
through the inventory loader and schema); the backends are Backend values, as Backend.of
makes them from the vLLM hosts' configs."""

import dataclasses
import re

import pytest

from tests.unit.configs import host_config
from tests.unit.gateway_cases import BACKENDS, GW, KNOBS, gw
from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import InventoryError
from vfleet.roles.gateway import _render as gr
from vfleet.roles.gateway._render import Backend


def _server_lines(conf: str) -> dict:
    return {m.group(3): m.group(0) for m in re.finditer(r"^\s*server (\S+) (.*);  # (\S+)$", conf, re.M)}


def _locations(conf: str) -> list[str]:
    return re.findall(r"^\s*location (.*?) \{$", conf, re.M)


def test_upstream_and_drain_markers():
    conf = gr.render_gateway(BACKENDS, GW, drained={"gpu02"})
    lines = _server_lines(conf)
    assert list(lines) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert lines["gpu02"].rstrip().endswith("down;  # gpu02")
    assert "down" not in lines["gpu01"]
    assert "server [fd00::13]:8001 " in lines["gpu03"]
    assert "server gpu04.lab.example:8000 " in lines["gpu04"]
    assert "max_fails=3 fail_timeout=10s" in lines["gpu01"]
    assert "# Drained (marked down): gpu02\n" in conf
    for needle in (
        "least_conn;",
        "keepalive 32;",
        "proxy_buffering off;",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        "proxy_read_timeout 600s;",
        "client_max_body_size 10m;",
        "limit_req_zone $binary_remote_addr zone=vfleet_vllm_per_client:10m rate=20r/s;",
        "limit_req zone=vfleet_vllm_per_client burst=40 nodelay;",
        "location = /health",
        "location ~ ^/v[12]/",
        "listen 80 default_server;",
        "server_name _;",
        "upstream vfleet_model_1 {",
        "ok_1 vfleet_model_1;",
        "proxy_pass http://$vfleet_upstream$vfleet_api_path$is_args$args;",
    ):
        assert needle in conf, needle


def test_vars_change_the_rendering():
    conf = gr.render_gateway(
        BACKENDS[:1],
        gw(
            {
                "gateway_port": 8080,
                "gateway_listen_address": "127.0.0.1",
                "gateway_rate_limit": "5r/s",
                "gateway_rate_burst": 7,
                "gateway_read_timeout": 30,
                "gateway_client_max_body_size": "1m",
                "gateway_max_fails": 5,
                "gateway_fail_timeout": 20,
            }
        ),
    )
    assert "listen 127.0.0.1:8080 default_server;" in conf
    assert "rate=5r/s" in conf and "burst=7" in conf and "proxy_read_timeout 30s;" in conf
    assert "proxy_send_timeout 30s;" in conf
    assert "client_max_body_size 1m;" in conf
    assert "max_fails=5 fail_timeout=20s" in _server_lines(conf)["gpu01"]


@pytest.mark.parametrize(
    "var, value, needle",
    [
        ("gateway_port", 8088, "listen 8088 default_server;"),
        ("gateway_listen_address", "::1", "listen [::1]:80 default_server;"),
        ("gateway_listen_address", "10.0.0.1", "listen 10.0.0.1:80 default_server;"),
        ("gateway_rate_limit", "100r/m", "rate=100r/m;"),
        ("gateway_rate_burst", 7, "burst=7 nodelay;"),
        ("gateway_client_max_body_size", "512k", "client_max_body_size 512k;"),
        ("gateway_read_timeout", 5, "proxy_read_timeout 5s;"),
        ("gateway_max_fails", 0, "max_fails=0 fail_timeout=10s"),
        ("gateway_fail_timeout", 25, "max_fails=3 fail_timeout=25s"),
    ],
)
def test_each_knob_comes_from_the_gateway_hosts_config(var, value, needle):
    assert var in KNOBS
    conf = gr.render_gateway(BACKENDS[:1], gw({var: value}))
    assert needle in conf
    assert conf != gr.render_gateway(BACKENDS[:1], GW)


def test_defaults_are_the_schemas():
    """A gateway host that sets nothing renders the schema's defaults: the same file as one
    that sets every knob to its default explicitly (a null listen address included)."""
    defaults = SCHEMA.defaults()
    explicit = gw({k: defaults[k] for k in KNOBS})
    assert gr.render_gateway(BACKENDS[:1], explicit) == gr.render_gateway(BACKENDS[:1], GW)
    assert gr.render_gateway(BACKENDS[:1], gw({"gateway_listen_address": None})) == gr.render_gateway(BACKENDS[:1], GW)
    assert defaults["gateway_fail_timeout"] == 10
    # the vLLM hosts' own settings do not change the gateway (only the gateway host's do)
    assert gr.render_gateway(BACKENDS[:1], gw({"vllm_port": 9000, "service_name": "x"})) == gr.render_gateway(
        BACKENDS[:1], GW
    )


def test_fixed_parts_are_module_constants_not_variables():
    conf = gr.render_gateway(BACKENDS[:1], GW)
    assert "upstream vfleet_model_1 {" in conf
    assert f"keepalive {gr.KEEPALIVE};" in conf
    assert f"server_name {gr.SERVER_NAME};" in conf
    # only the allow-listed API under /v1 and /v2 is proxied (and the key check of
    # /v1/models, and a model's fallback from @vfleet_answer); /health and the rest are nginx's own
    assert _locations(conf) == [
        "= /health",
        "= /v1/models",
        "@vfleet_models",
        "= /_vfleet_key",
        "= /_vfleet_body",
        "@vfleet_answer",
        "@vfleet_unavailable",
        "@vfleet_unauthorized",
        "@vfleet_limited",
        "~ ^/v[12]/",
        "/",
        "= /stub_status",
        "= /vfleet-config",
        "/",
    ]
    assert re.findall(r"proxy_pass (\S+);", conf) == [
        "http://vfleet_reject",
        "http://vfleet_model_1/v1/models",
        "http://$vfleet_fallback_upstream$vfleet_api_path$is_args$args",
        "http://$vfleet_upstream$vfleet_api_path$is_args$args",
    ]
    # removed on purpose: no longer inventory variables
    for name in (
        "gateway_allowed_prefixes",
        "gateway_upstream_name",
        "gateway_rate_per_client",
        "gateway_proxy_read_timeout",
        "gateway_listen",
    ):
        assert name not in SCHEMA.known_names, name
    for name in KNOBS:
        assert name in SCHEMA.known_names, name


def test_backend_of_a_vllm_hosts_config():
    cfg = host_config({"vllm_port": 8001}, name="gpu03", address="fd00::13")
    assert Backend.of(cfg) == Backend("gpu03", "fd00::13", 8001, "tiny")
    # without ansible_host the host's inventory name is its address
    assert Backend.of(host_config(name="gpu04.lab.example")) == Backend(
        "gpu04.lab.example", "gpu04.lab.example", 8000, "tiny"
    )
    configs = [
        host_config(name="gpu01", address="10.0.0.11"),
        host_config(name="gpu02", address="10.0.0.12"),
        cfg,
        host_config(name="gpu04", address="gpu04.lab.example"),
    ]
    assert [Backend.of(c) for c in configs] == BACKENDS
    assert gr.render_gateway([Backend.of(c) for c in configs], GW) == gr.render_gateway(BACKENDS, GW)


def _keepalive_timeouts(conf: str) -> dict[str, str]:
    return dict(re.findall(r"^upstream (\S+) \{.*?keepalive_timeout (\S+);", conf, re.M | re.S))


def test_nginx_drops_an_idle_upstream_connection_before_vllm_does():
    """vLLM (uvicorn) closes an idle connection after 5 s unless its vllm_env says otherwise; a
    POST nginx writes into one at that instant fails (502, never replayed), so each model's
    upstream keeps idle connections a second less than the shortest of its hosts."""
    conf = gr.render_gateway(BACKENDS, GW)
    assert _keepalive_timeouts(conf) == {"vfleet_model_1": f"{gr.VLLM_KEEP_ALIVE_S - 1}s"}
    assert gr.VLLM_KEEP_ALIVE_S == 5
    long_a = host_config({"vllm_env": {gr.KEEP_ALIVE_ENV: "75"}}, name="a1", address="10.0.0.11")
    long_b = host_config(
        {"vllm_env": {gr.KEEP_ALIVE_ENV: "30"}, "served_model_name": "other"}, name="b1", address="10.0.0.12"
    )
    stock_b = host_config({"served_model_name": "other"}, name="b2", address="10.0.0.13")
    conf = gr.render_gateway([Backend.of(c) for c in (long_a, long_b, stock_b)], GW)
    assert _keepalive_timeouts(conf) == {"vfleet_model_1": "74s", "vfleet_model_2": "4s"}
    # a value vLLM could not read as seconds leaves its default in place
    odd = host_config({"vllm_env": {gr.KEEP_ALIVE_ENV: "5s"}}, name="a1", address="10.0.0.11")
    assert Backend.of(odd).keep_alive_s == gr.VLLM_KEEP_ALIVE_S


@pytest.mark.parametrize(
    "backends,drained",
    [
        ([], ()),
        (BACKENDS, {"gpu99"}),
        ([BACKENDS[0], BACKENDS[0]], ()),
        ([Backend("x", "10.0.0.1;evil", 1, "tiny")], ()),
        ([Backend("x", "$host", 1, "tiny")], ()),
        ([Backend("x", "10.0.0.1", 70000, "tiny")], ()),
        ([Backend("x", "10.0.0.1", 0, "tiny")], ()),
        ([Backend("bad name", "10.0.0.1", 1, "tiny")], ()),
        ([Backend("x\n}", "10.0.0.1", 1, "tiny")], ()),
        ([Backend("x", "gpu01.lab.example\n}", 1, "tiny")], ()),
    ],
)
def test_bad_backends_refused(backends, drained):
    with pytest.raises(gr.GatewayRenderError):
        gr.render_gateway(backends, GW, drained=drained)


@pytest.mark.parametrize(
    "vars",
    [
        {"gateway_rate_limit": "20r/s; evil"},
        {"gateway_client_max_body_size": "1m;"},
        {"gateway_read_timeout": "1s }"},
        {"gateway_listen_address": "0.0.0.0; x"},
        {"gateway_fail_timeout": "10s"},
        {"gateway_fail_timeout": 0},
        {"gateway_max_fails": -1},
        {"gateway_rate_burst": -1},
        {"gateway_port": 0},
        {"gateway_port": 70000},
        {"gateway_read_timeout": 0},
    ],
)
def test_bad_vars_refused_by_the_schema(vars):
    (key,) = vars
    with pytest.raises(InventoryError, match=key):
        gw(vars)


@pytest.mark.parametrize(
    "field, value",
    [
        ("gateway_rate_limit", "20r/s; evil"),
        ("gateway_client_max_body_size", "1m;"),
        ("gateway_listen_address", "0.0.0.0; x"),
        ("gateway_listen_address", "1.2.3"),
        ("gateway_port", 70000),
    ],
)
def test_renderer_still_refuses_what_nginx_cannot_take(field, value):
    """Defence in depth: a HostConfig built some other way is checked again."""
    with pytest.raises(gr.GatewayRenderError):
        gr.render_gateway(BACKENDS, dataclasses.replace(GW, **{field: value}))


def test_server_name_is_quoted(monkeypatch):
    assert "server_name _;" in gr.render_gateway(BACKENDS, GW)
    monkeypatch.setattr(gr, "SERVER_NAME", "a;b")
    assert 'server_name "a;b";' in gr.render_gateway(BACKENDS, GW)
    monkeypatch.setattr(gr, "SERVER_NAME", "$evil")
    with pytest.raises(gr.GatewayRenderError):
        gr.render_gateway(BACKENDS, GW)
