"""nginx gateway rendering (roles/gateway_render.py), checked by a real nginx."""
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

from roles import gateway_render as gr

BACKENDS = [
    {"name": "gpu01", "address": "10.0.0.11", "port": 8000},
    {"name": "gpu02", "address": "10.0.0.12", "port": 8000},
    ("gpu03", "fd00::13", 8001),
    {"name": "gpu04", "address": "gpu04.lab.example", "port": 8000},
]

needs_nginx = pytest.mark.skipif(not shutil.which("nginx"), reason="needs nginx")


def _server_lines(conf: str) -> dict:
    return {m.group(3): m.group(0) for m in
            re.finditer(r"^\s*server (\S+) (.*);  # (\S+)$", conf, re.M)}


def test_upstream_and_drain_markers():
    conf = gr.render_gateway(BACKENDS, drained={"gpu02"})
    lines = _server_lines(conf)
    assert list(lines) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert lines["gpu02"].rstrip().endswith("down;  # gpu02")
    assert "down" not in lines["gpu01"]
    assert "server [fd00::13]:8001 " in lines["gpu03"]
    assert "server gpu04.lab.example:8000 " in lines["gpu04"]
    assert "max_fails=3 fail_timeout=10s" in lines["gpu01"]
    for needle in ("least_conn;", "keepalive 32;", "proxy_buffering off;",
                   "proxy_http_version 1.1;", 'proxy_set_header Connection "";',
                   "proxy_read_timeout 600s;", "client_max_body_size 10m;",
                   "limit_req_zone $binary_remote_addr zone=vfleet_vllm_per_client:10m rate=20r/s;",
                   "limit_req zone=vfleet_vllm_per_client burst=40 nodelay;",
                   "location = /health", "location ^~ /metrics", "listen 80 default_server;"):
        assert needle in conf, needle


def test_vars_change_the_rendering():
    conf = gr.render_gateway(BACKENDS[:1], {
        "gateway_port": 8080, "gateway_listen_address": "127.0.0.1",
        "gateway_rate_limit": "5r/s", "gateway_rate_burst": 7, "gateway_read_timeout": 30,
        "gateway_client_max_body_size": "1m", "gateway_default_server": False,
        "gateway_allowed_prefixes": ["/v1/", "/version"]})
    assert "listen 127.0.0.1:8080;" in conf
    assert "rate=5r/s" in conf and "burst=7" in conf and "proxy_read_timeout 30s;" in conf
    assert "location /version {" in conf


def test_none_values_keep_defaults():
    assert gr.render_gateway(BACKENDS[:1], {"gateway_port": None}) == \
        gr.render_gateway(BACKENDS[:1])


@pytest.mark.parametrize("backends,drained", [
    ([], ()),
    (BACKENDS, {"gpu99"}),
    ([BACKENDS[0], BACKENDS[0]], ()),
    ([{"name": "x", "address": "10.0.0.1;evil", "port": 1}], ()),
    ([{"name": "x", "address": "$host", "port": 1}], ()),
    ([{"name": "x", "address": "10.0.0.1", "port": 70000}], ()),
    ([{"name": "bad name", "address": "10.0.0.1", "port": 1}], ()),
    ([{"name": "x\n}", "address": "10.0.0.1", "port": 1}], ()),
])
def test_bad_backends_refused(backends, drained):
    with pytest.raises(gr.GatewayRenderError):
        gr.render_gateway(backends, drained=drained)


@pytest.mark.parametrize("vars", [
    {"gateway_rate_limit": "20r/s; evil"}, {"gateway_client_max_body_size": "1m;"},
    {"gateway_read_timeout": "1s }"}, {"gateway_listen_address": "0.0.0.0; x"},
    {"gateway_allowed_prefixes": "/v1/"}, {"gateway_allowed_prefixes": ["/v1/ {"]},
    {"gateway_upstream_name": "a b"},
])
def test_bad_vars_refused(vars):
    with pytest.raises(gr.GatewayRenderError):
        gr.render_gateway(BACKENDS, vars)


def test_server_name_is_quoted():
    conf = gr.render_gateway(BACKENDS, {"gateway_server_name": "a;b"})
    assert 'server_name "a;b";' in conf
    with pytest.raises(gr.GatewayRenderError):
        gr.render_gateway(BACKENDS, {"gateway_server_name": "$evil"})


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


@needs_nginx
@pytest.mark.parametrize("drained", [(), {"gpu02"}, {"gpu01", "gpu02", "gpu03", "gpu04"}])
def test_nginx_t_accepts_rendered_config(tmp_path, drained):
    # host names must resolve for nginx -t: use IPs only here
    backends = [b for b in BACKENDS if not (isinstance(b, dict) and
                                            b["address"].endswith("example"))]
    conf = _nginx_prefix(tmp_path, gr.render_gateway(backends, drained=set(drained) - {"gpu04"}))
    r = _nginx_t(tmp_path, conf)
    assert r.returncode == 0, r.stderr
    assert "test is successful" in r.stderr


@needs_nginx
def test_nginx_t_rejects_a_broken_config(tmp_path):
    bad = gr.render_gateway(BACKENDS[:1]).replace("least_conn;", "least_conn")
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
    (confd / "vfleet-gateway.conf").write_text(gr.render_gateway(BACKENDS[:2]))
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
    conf_text = gr.render_gateway(
        [{"name": "a", "address": "127.0.0.1", "port": a.server_address[1]},
         {"name": "b", "address": "127.0.0.1", "port": b.server_address[1]}],
        {"gateway_port": port, "gateway_listen_address": "127.0.0.1",
         "gateway_rate_limit": "5r/s", "gateway_rate_burst": 3},
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


def test_earlier_variable_names_still_work():
    old = gr.render_gateway(BACKENDS[:1], {
        "gateway_listen": "8080", "gateway_rate_per_client": "5r/s",
        "gateway_proxy_read_timeout": "30s"})
    new = gr.render_gateway(BACKENDS[:1], {
        "gateway_port": 8080, "gateway_rate_limit": "5r/s", "gateway_read_timeout": 30})
    assert old == new
    assert "listen 127.0.0.1:81 " in gr.render_gateway(BACKENDS[:1],
                                                      {"gateway_listen": "127.0.0.1:81"})
