"""nginx gateway rendering (vfleet/roles/gateway/_render.py), checked by a real nginx: `nginx -t` on every
shape of config and on Debian's stock nginx.conf, then a live gateway on loopback in front of fake
backends (streaming, drained hosts, hidden /metrics, the per-client rate limit). Skipped where
nginx is missing; the rendered text itself is tested in test_gateway_conf.py.

The gateway's knobs come from the gateway host's HostConfig (tests/unit/configs.py builds it
through the inventory loader and schema); the backends are Backend values, as Backend.of
makes them from the vLLM hosts' configs."""

import dataclasses
import http.server
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.unit.configs import host_config
from tests.unit.gateway_cases import BACKENDS, GW, gw
from vfleet.engine.errors import InventoryError
from vfleet.roles.gateway import _render as gr
from vfleet.roles.gateway._files import GatewayFiles, render_files
from vfleet.roles.gateway._nginx import NJS_MODULE
from vfleet.roles.gateway._render import Backend

needs_nginx = pytest.mark.skipif(not shutil.which("nginx"), reason="needs nginx")


# --- real nginx ---------------------------------------------------------------------


def _nginx_prefix(tmp_path: Path, conf: "str | GatewayFiles", daemon: bool = False) -> Path:
    """A minimal nginx.conf (njs loaded) whose http{} includes conf.d/*.conf, like Debian's,
    with the gateway's files in place: `conf` as rendered (GatewayFiles), or a conf.d text
    (then with the njs module of a one-model gateway beside it, enough for `nginx -t`). The
    access log goes to tmp_path, not /var/log/nginx."""
    files = conf if isinstance(conf, GatewayFiles) else None
    if files is None:
        js = render_files(BACKENDS[:1], GW).supporting
        files = GatewayFiles(dataclasses.replace(render_files(BACKENDS[:1], GW).conf, content=conf), js)
    for f in files.all:
        (tmp_path / f.relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f.relative).write_text(f.content.replace(gr.ACCESS_LOG, str(tmp_path / "access.json")))
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"load_module {NJS_MODULE};\n"
        + ("" if daemon else "daemon off;\n")
        + f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n"
        "events { worker_connections 64; }\n"
        f"http {{\n access_log {tmp_path}/access.log;\n"
        f" client_body_temp_path {tmp_path}/body; proxy_temp_path {tmp_path}/proxy;\n"
        f" fastcgi_temp_path {tmp_path}/fcgi; uwsgi_temp_path {tmp_path}/uwsgi;"
        f" scgi_temp_path {tmp_path}/scgi;\n"
        f" include {tmp_path}/conf.d/*.conf;\n}}\n"
    )
    return conf


def _nginx_t(tmp_path: Path, conf: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["nginx", "-t", "-p", str(tmp_path), "-c", str(conf)], capture_output=True, text=True)


# host names must resolve for nginx -t: use IPs only here
IP_BACKENDS = [b for b in BACKENDS if not b.address.endswith("example")]


@needs_nginx
@pytest.mark.parametrize("drained", [(), {"gpu02"}, {"gpu01", "gpu02", "gpu03"}])
def test_nginx_t_accepts_rendered_config(tmp_path, drained):
    conf = _nginx_prefix(tmp_path, render_files(IP_BACKENDS, GW, drained=set(drained)))
    r = _nginx_t(tmp_path, conf)
    assert r.returncode == 0, r.stderr
    assert "test is successful" in r.stderr


@needs_nginx
@pytest.mark.parametrize(
    "vars",
    [
        {
            "gateway_port": 8080,
            "gateway_listen_address": "127.0.0.1",
            "gateway_rate_limit": "100r/m",
            "gateway_rate_burst": 7,
            "gateway_client_max_body_size": "512k",
            "gateway_read_timeout": 5,
            "gateway_max_fails": 0,
            "gateway_fail_timeout": 30,
        },
        {"gateway_listen_address": "::1", "gateway_client_max_body_size": "1G", "gateway_fail_timeout": 1},
    ],
    ids=["ipv4-knobs", "ipv6-listen"],
)
def test_nginx_t_accepts_every_knob(tmp_path, vars):
    conf = _nginx_prefix(tmp_path, render_files(IP_BACKENDS, gw(vars), drained={"gpu01"}))
    r = _nginx_t(tmp_path, conf)
    assert r.returncode == 0, r.stderr


@needs_nginx
@pytest.mark.parametrize(
    "var, value",
    [
        ("gateway_rate_limit", "0r/s"),
        ("gateway_rate_limit", "1r/m"),
        ("gateway_rate_limit", "100000r/s"),
        ("gateway_rate_burst", 0),
        ("gateway_rate_burst", 1),
        ("gateway_client_max_body_size", "0"),
        ("gateway_client_max_body_size", "1k"),
        ("gateway_read_timeout", 1),
        ("gateway_max_fails", 0),
        ("gateway_fail_timeout", 1),
        ("gateway_port", 1),
        ("gateway_port", 65535),
    ],
)
def test_what_the_schema_accepts_nginx_accepts(tmp_path, var, value):
    """The schema is where an operator's value is refused, with its file and line: a value
    it lets through must not fail later at `nginx -t` on the gateway."""
    try:
        cfg = gw({var: value})
    except InventoryError:
        return  # refused up front: fine
    r = _nginx_t(tmp_path, _nginx_prefix(tmp_path, render_files(IP_BACKENDS, cfg)))
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
    text = (
        stock.replace("/etc/nginx/conf.d/*.conf", f"{confd}/*.conf")
        .replace("/etc/nginx/sites-enabled/*", f"{sites}/*")
        .replace("/run/nginx.pid", f"{tmp_path}/nginx.pid")
    )
    conf = tmp_path / "nginx.conf"
    conf.write_text(text)
    (tmp_path / "modules").symlink_to(Path(NJS_MODULE).parent)  # modules-enabled/ loads njs from the prefix
    for f in render_files(BACKENDS[:2], GW, access_log=str(tmp_path / "access.json")).all:
        (tmp_path / f.relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f.relative).write_text(f.content)
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
    port, status_port = _free_port(), _free_port()
    # the backends as a deploy makes them: Backend.of the vLLM hosts' configs
    backends = [
        Backend.of(host_config({"vllm_port": srv.server_address[1]}, name=name, address="127.0.0.1"))
        for name, srv in (("a", a), ("b", b))
    ]
    conf_text = render_files(
        backends,
        gw(
            {
                "gateway_port": port,
                "gateway_listen_address": "127.0.0.1",
                "gateway_rate_limit": "5r/s",
                "gateway_rate_burst": 3,
                "monitoring_gateway_status_port": status_port,
            }
        ),
        drained={"b"},
    )
    conf = _nginx_prefix(tmp_path, conf_text)
    nginx = subprocess.Popen(["nginx", "-p", str(tmp_path), "-c", str(conf)], stderr=subprocess.PIPE)
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
        # nginx's counters for the exporter: on loopback's status port, not on the public one
        status = urllib.request.urlopen(f"http://127.0.0.1:{status_port}/stub_status", timeout=5).read()
        assert status.startswith(b"Active connections:"), status
        for path in ("/metrics", "/metrics/", "/invocations", "/tokenize", "/", "/stub_status"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + path, timeout=5)
            assert e.value.code == 404, path

        # streamed: the first event arrives before the backend's 1 s pause ends
        t0 = time.monotonic()
        resp = urllib.request.urlopen(
            urllib.request.Request(base + "/v1/chat/completions", data=b'{"model": "tiny"}', method="POST"), timeout=10
        )
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
