"""nginx gateway rendering (roles/gateway_render.py), checked by a real nginx.

The gateway's knobs come from the gateway host's HostConfig (tests/unit/configs.py builds it
through the inventory loader and schema); the backends are Backend values, as Backend.of
makes them from the vLLM hosts' configs."""
import dataclasses
import http.server
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from fleet.errors import InventoryError
from roles import gateway_render as gr
from roles.gateway_render import Backend
from roles.variables import SCHEMA
from tests.unit.configs import host_config

BACKENDS = [
    Backend("gpu01", "10.0.0.11", 8000),
    Backend("gpu02", "10.0.0.12", 8000),
    Backend("gpu03", "fd00::13", 8001),
    Backend("gpu04", "gpu04.lab.example", 8000),
]
# the gateway knobs that are inventory variables (the rest are module constants)
KNOBS = ("gateway_port", "gateway_listen_address", "gateway_rate_limit", "gateway_rate_burst",
         "gateway_client_max_body_size", "gateway_read_timeout", "gateway_max_fails",
         "gateway_fail_timeout")

needs_nginx = pytest.mark.skipif(not shutil.which("nginx"), reason="needs nginx")


def gw(vars: dict | None = None):
    """The HostConfig of a gateway host."""
    return host_config(vars, name="gw01", group="gateways")


GW = gw()


def _server_lines(conf: str) -> dict:
    return {m.group(3): m.group(0) for m in
            re.finditer(r"^\s*server (\S+) (.*);  # (\S+)$", conf, re.M)}


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
    for needle in ("least_conn;", "keepalive 32;", "proxy_buffering off;",
                   "proxy_http_version 1.1;", 'proxy_set_header Connection "";',
                   "proxy_read_timeout 600s;", "client_max_body_size 10m;",
                   "limit_req_zone $binary_remote_addr zone=vfleet_vllm_per_client:10m rate=20r/s;",
                   "limit_req zone=vfleet_vllm_per_client burst=40 nodelay;",
                   "location = /health", "location ^~ /metrics", "listen 80 default_server;",
                   "server_name _;", "upstream vfleet_vllm {", "proxy_pass http://vfleet_vllm;"):
        assert needle in conf, needle


def test_vars_change_the_rendering():
    conf = gr.render_gateway(BACKENDS[:1], gw({
        "gateway_port": 8080, "gateway_listen_address": "127.0.0.1",
        "gateway_rate_limit": "5r/s", "gateway_rate_burst": 7, "gateway_read_timeout": 30,
        "gateway_client_max_body_size": "1m", "gateway_max_fails": 5,
        "gateway_fail_timeout": 20}))
    assert "listen 127.0.0.1:8080 default_server;" in conf
    assert "rate=5r/s" in conf and "burst=7" in conf and "proxy_read_timeout 30s;" in conf
    assert "proxy_send_timeout 30s;" in conf
    assert "client_max_body_size 1m;" in conf
    assert "max_fails=5 fail_timeout=20s" in _server_lines(conf)["gpu01"]


@pytest.mark.parametrize("var, value, needle", [
    ("gateway_port", 8081, "listen 8081 default_server;"),
    ("gateway_listen_address", "::1", "listen [::1]:80 default_server;"),
    ("gateway_listen_address", "10.0.0.1", "listen 10.0.0.1:80 default_server;"),
    ("gateway_rate_limit", "100r/m", "rate=100r/m;"),
    ("gateway_rate_burst", 7, "burst=7 nodelay;"),
    ("gateway_client_max_body_size", "512k", "client_max_body_size 512k;"),
    ("gateway_read_timeout", 5, "proxy_read_timeout 5s;"),
    ("gateway_max_fails", 0, "max_fails=0 fail_timeout=10s"),
    ("gateway_fail_timeout", 25, "max_fails=3 fail_timeout=25s"),
])
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
    assert gr.render_gateway(BACKENDS[:1], gw({"gateway_listen_address": None})) == \
        gr.render_gateway(BACKENDS[:1], GW)
    assert defaults["gateway_fail_timeout"] == 10
    # the vLLM hosts' own settings do not change the gateway (only the gateway host's do)
    assert gr.render_gateway(BACKENDS[:1], gw({"vllm_port": 9000, "service_name": "x"})) == \
        gr.render_gateway(BACKENDS[:1], GW)


def test_fixed_parts_are_module_constants_not_variables():
    conf = gr.render_gateway(BACKENDS[:1], GW)
    assert f"upstream {gr.UPSTREAM_NAME} {{" in conf
    assert f"keepalive {gr.KEEPALIVE};" in conf
    assert f"server_name {gr.SERVER_NAME};" in conf
    # only the allowed prefixes are proxied; /health, /metrics and the rest are nginx's own
    assert gr.ALLOWED_PREFIXES == ("/v1/",)
    assert _locations(conf) == ["= /health", "^~ /metrics", "/v1/", "/"]
    assert conf.count("proxy_pass ") == len(gr.ALLOWED_PREFIXES)
    # removed on purpose: no longer inventory variables
    for name in ("gateway_allowed_prefixes", "gateway_upstream_name", "gateway_rate_per_client",
                 "gateway_proxy_read_timeout", "gateway_listen"):
        assert name not in SCHEMA.known_names, name
    for name in KNOBS:
        assert name in SCHEMA.known_names, name


def test_backend_of_a_vllm_hosts_config():
    cfg = host_config({"vllm_port": 8001}, name="gpu03", address="fd00::13")
    assert Backend.of(cfg) == Backend("gpu03", "fd00::13", 8001)
    # without ansible_host the host's inventory name is its address
    assert Backend.of(host_config(name="gpu04.lab.example")) == \
        Backend("gpu04.lab.example", "gpu04.lab.example", 8000)
    configs = [host_config(name="gpu01", address="10.0.0.11"),
               host_config(name="gpu02", address="10.0.0.12"), cfg,
               host_config(name="gpu04", address="gpu04.lab.example")]
    assert [Backend.of(c) for c in configs] == BACKENDS
    assert gr.render_gateway([Backend.of(c) for c in configs], GW) == \
        gr.render_gateway(BACKENDS, GW)


@pytest.mark.parametrize("backends,drained", [
    ([], ()),
    (BACKENDS, {"gpu99"}),
    ([BACKENDS[0], BACKENDS[0]], ()),
    ([Backend("x", "10.0.0.1;evil", 1)], ()),
    ([Backend("x", "$host", 1)], ()),
    ([Backend("x", "10.0.0.1", 70000)], ()),
    ([Backend("x", "10.0.0.1", 0)], ()),
    ([Backend("bad name", "10.0.0.1", 1)], ()),
    ([Backend("x\n}", "10.0.0.1", 1)], ()),
    ([Backend("x", "gpu01.lab.example\n}", 1)], ()),
])
def test_bad_backends_refused(backends, drained):
    with pytest.raises(gr.GatewayRenderError):
        gr.render_gateway(backends, GW, drained=drained)


@pytest.mark.parametrize("vars", [
    {"gateway_rate_limit": "20r/s; evil"}, {"gateway_client_max_body_size": "1m;"},
    {"gateway_read_timeout": "1s }"}, {"gateway_listen_address": "0.0.0.0; x"},
    {"gateway_fail_timeout": "10s"}, {"gateway_fail_timeout": 0}, {"gateway_max_fails": -1},
    {"gateway_rate_burst": -1}, {"gateway_port": 0}, {"gateway_port": 70000},
    {"gateway_read_timeout": 0},
])
def test_bad_vars_refused_by_the_schema(vars):
    (key,) = vars
    with pytest.raises(InventoryError, match=key):
        gw(vars)


@pytest.mark.parametrize("field, value", [
    ("gateway_rate_limit", "20r/s; evil"), ("gateway_client_max_body_size", "1m;"),
    ("gateway_listen_address", "0.0.0.0; x"), ("gateway_listen_address", "1.2.3"),
    ("gateway_port", 70000),
])
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


# --- real nginx ---------------------------------------------------------------------

def _nginx_prefix(tmp_path: Path, conf_text: str, daemon: bool = False) -> Path:
    """A minimal nginx.conf whose http{} includes conf.d/*.conf, like Debian's."""
    (tmp_path / "conf.d").mkdir(exist_ok=True)
    (tmp_path / "conf.d" / "vfleet-gateway.conf").write_text(conf_text)
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        ("" if daemon else "daemon off;\n") +
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n"
        "events { worker_connections 64; }\n"
        f"http {{\n access_log {tmp_path}/access.log;\n"
        f" client_body_temp_path {tmp_path}/body; proxy_temp_path {tmp_path}/proxy;\n"
        f" fastcgi_temp_path {tmp_path}/fcgi; uwsgi_temp_path {tmp_path}/uwsgi;"
        f" scgi_temp_path {tmp_path}/scgi;\n"
        f" include {tmp_path}/conf.d/*.conf;\n}}\n")
    return conf


def _nginx_t(tmp_path: Path, conf: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["nginx", "-t", "-p", str(tmp_path), "-c", str(conf)],
                          capture_output=True, text=True)


# host names must resolve for nginx -t: use IPs only here
IP_BACKENDS = [b for b in BACKENDS if not b.address.endswith("example")]


@needs_nginx
@pytest.mark.parametrize("drained", [(), {"gpu02"}, {"gpu01", "gpu02", "gpu03"}])
def test_nginx_t_accepts_rendered_config(tmp_path, drained):
    conf = _nginx_prefix(tmp_path, gr.render_gateway(IP_BACKENDS, GW, drained=set(drained)))
    r = _nginx_t(tmp_path, conf)
    assert r.returncode == 0, r.stderr
    assert "test is successful" in r.stderr


@needs_nginx
@pytest.mark.parametrize("vars", [
    {"gateway_port": 8080, "gateway_listen_address": "127.0.0.1", "gateway_rate_limit": "100r/m",
     "gateway_rate_burst": 7, "gateway_client_max_body_size": "512k", "gateway_read_timeout": 5,
     "gateway_max_fails": 0, "gateway_fail_timeout": 30},
    {"gateway_listen_address": "::1", "gateway_client_max_body_size": "1G",
     "gateway_fail_timeout": 1},
], ids=["ipv4-knobs", "ipv6-listen"])
def test_nginx_t_accepts_every_knob(tmp_path, vars):
    conf = _nginx_prefix(tmp_path, gr.render_gateway(IP_BACKENDS, gw(vars), drained={"gpu01"}))
    r = _nginx_t(tmp_path, conf)
    assert r.returncode == 0, r.stderr


@needs_nginx
@pytest.mark.parametrize("var, value", [
    ("gateway_rate_limit", "0r/s"), ("gateway_rate_limit", "1r/m"),
    ("gateway_rate_limit", "100000r/s"), ("gateway_rate_burst", 0), ("gateway_rate_burst", 1),
    ("gateway_client_max_body_size", "0"), ("gateway_client_max_body_size", "1k"),
    ("gateway_read_timeout", 1), ("gateway_max_fails", 0), ("gateway_fail_timeout", 1),
    ("gateway_port", 1), ("gateway_port", 65535),
])
def test_what_the_schema_accepts_nginx_accepts(tmp_path, var, value):
    """The schema is where an operator's value is refused, with its file and line: a value
    it lets through must not fail later at `nginx -t` on the gateway."""
    try:
        cfg = gw({var: value})
    except InventoryError:
        return          # refused up front: fine
    r = _nginx_t(tmp_path, _nginx_prefix(tmp_path, gr.render_gateway(IP_BACKENDS, cfg)))
    assert r.returncode == 0, r.stderr


@needs_nginx
def test_nginx_t_rejects_a_broken_config(tmp_path):
    bad = gr.render_gateway(BACKENDS[:1], GW).replace("least_conn;", "least_conn")
    assert _nginx_t(tmp_path, _nginx_prefix(tmp_path, bad)).returncode != 0
    # nginx reads the time unit of fail_timeout (the integer seconds are rendered "10s"):
    # a wrong one fails the test, so the accepted configs above are really checked
    bad = gr.render_gateway(BACKENDS[:1], GW).replace("fail_timeout=10s", "fail_timeout=10q")
    assert _nginx_t(tmp_path, _nginx_prefix(tmp_path, bad)).returncode != 0


@needs_nginx
@pytest.mark.skipif(not Path("/etc/nginx/nginx.conf").exists(), reason="Debian nginx.conf")
def test_fits_debians_stock_nginx_conf_once_default_site_is_gone(tmp_path):
    """The real /etc/nginx/nginx.conf, its conf.d and sites-enabled pointed at tmp dirs."""
    stock = Path("/etc/nginx/nginx.conf").read_text()
    assert "/etc/nginx/conf.d/*.conf" in stock
    confd, sites = tmp_path / "conf.d", tmp_path / "sites-enabled"
    confd.mkdir()
    sites.mkdir()
    text = (stock.replace("/etc/nginx/conf.d/*.conf", f"{confd}/*.conf")
            .replace("/etc/nginx/sites-enabled/*", f"{sites}/*")
            .replace("/run/nginx.pid", f"{tmp_path}/nginx.pid"))
    conf = tmp_path / "nginx.conf"
    conf.write_text(text)
    (confd / Path(gr.GATEWAY_CONF_PATH).name).write_text(gr.render_gateway(BACKENDS[:2], GW))
    r = _nginx_t(tmp_path, conf)
    assert r.returncode == 0, r.stderr
    default_site = Path("/etc/nginx/sites-available/default")
    if default_site.exists():
        # with Debian's default site still enabled, two default servers on :80 collide
        shutil.copy(default_site, sites / "default")
        r = _nginx_t(tmp_path, conf)
        assert r.returncode != 0 and "duplicate default server" in r.stderr


# --- a live gateway on loopback in front of fake backends -----------------------------

class _Backend(http.server.ThreadingHTTPServer):
    daemon_threads = True


def _start_backend(name: str, hits: list):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _stream(self, pause):
            hits.append((name, self.path))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for i, delay in enumerate((0, pause)):
                    time.sleep(delay)
                    data = f"data: {name} {i}\n\n".encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass

        def do_GET(self):
            self._stream(0)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._stream(1.0)

    srv = _Backend(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_nginx
def test_live_gateway_streams_drains_and_hides_metrics(tmp_path):
    hits: list = []
    a, b = _start_backend("a", hits), _start_backend("b", hits)
    port = _free_port()
    # the backends as a deploy makes them: Backend.of the vLLM hosts' configs
    backends = [Backend.of(host_config({"vllm_port": srv.server_address[1]}, name=name,
                                       address="127.0.0.1"))
                for name, srv in (("a", a), ("b", b))]
    conf_text = gr.render_gateway(
        backends,
        gw({"gateway_port": port, "gateway_listen_address": "127.0.0.1",
            "gateway_rate_limit": "5r/s", "gateway_rate_burst": 3}),
        drained={"b"})
    conf = _nginx_prefix(tmp_path, conf_text)
    nginx = subprocess.Popen(["nginx", "-p", str(tmp_path), "-c", str(conf)],
                             stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        r = urllib.request.urlopen(base + "/health", timeout=5)
        assert r.status == 200 and b'"ok"' in r.read()
        for path in ("/metrics", "/metrics/", "/invocations", "/tokenize", "/"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + path, timeout=5)
            assert e.value.code == 404, path

        # streamed: the first event arrives before the backend's 1 s pause ends
        t0 = time.monotonic()
        resp = urllib.request.urlopen(urllib.request.Request(
            base + "/v1/chat/completions", data=b"{}", method="POST"), timeout=10)
        first = resp.readline()
        t_first = time.monotonic() - t0
        rest = resp.read()
        t_all = time.monotonic() - t0
        assert first == b"data: a 0\n" and b"data: a 1" in rest
        assert t_first < 0.7 < t_all, (t_first, t_all)

        # the drained host gets nothing
        time.sleep(1.0)
        codes = []
        for _ in range(10):
            try:
                codes.append(urllib.request.urlopen(base + "/v1/models", timeout=10).status)
            except urllib.error.HTTPError as e:
                codes.append(e.code)
        assert all(name == "a" for name, _ in hits), hits
        # per-client rate limit: 5 r/s with burst 3 lets some through, answers 429 to others
        assert 200 in codes and 429 in codes, codes
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
        a.shutdown()
        b.shutdown()
