"""The gateway's tenants, body checks, fallback, access log and TLS on a real nginx with njs, in
front of fake backends on loopback (a few seconds; the lab proves the same through vLLM and the
OpenAI SDK in tests/integration/test_models.py).

Each backend answers JSON naming itself, the Authorization it got and the body's length, and
holds a request whose body asks for "hold" seconds (the concurrency cap needs one in flight)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import http.server
import json
import shutil
import ssl
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.unit.gateway_cases import gw
from tests.unit.test_gateway_render import _free_port, _nginx_prefix
from tests.unit.test_monitor_mtail import PROGRAM_NAME, mtail_one_shot, program_text
from vfleet.config.gateway_access import GatewayTls, Tenant
from vfleet.roles.gateway._files import render_files
from vfleet.roles.gateway._render import Backend, GatewayRenderError, render_gateway

pytestmark = pytest.mark.skipif(not shutil.which("nginx"), reason="needs nginx")

BACKEND_KEY = "sk-backend-0123456789abcdef"
KEYS = {
    "research": "research-key-0123456789",
    "nightly": "nightly-key-0123456789ab",
    "default": "default-key-012345678",
}


class _Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        hold = json.loads(body).get("hold", 0) if body.startswith(b"{") else 0
        time.sleep(hold)
        out = json.dumps(
            {
                "backend": self.server.name,
                "auth": self.headers.get("Authorization"),
                "len": len(body),
                "body": body.decode(),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def _backend(name: str) -> http.server.ThreadingHTTPServer:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    srv.name = name
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@contextlib.contextmanager
def _gateway(tmp_path: Path, backends: list[Backend], tenants=(), tls: GatewayTls | None = None):
    port = _free_port()
    cfg = dataclasses.replace(
        gw(
            {
                "gateway_port": port,
                "gateway_listen_address": "127.0.0.1",
                "monitoring_gateway_status_port": _free_port(),
            }
        ),
        api_key=BACKEND_KEY,
        gateway_tenants=tuple(tenants),
        gateway_tls=tls,
    )
    conf = _nginx_prefix(tmp_path, render_files(backends, cfg), daemon=False)
    nginx = subprocess.Popen(["nginx", "-p", str(tmp_path), "-c", str(conf)], stderr=subprocess.PIPE)
    scheme = "https" if tls else "http"
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                with __import__("socket").create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            time.sleep(0.05)
        yield f"{scheme}://127.0.0.1:{port}"
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)


def _tenants() -> list[Tenant]:
    # names that begin like nginx's escapes (\\r, \\n) and one that is map's own word
    return [
        Tenant(name="research", key=KEYS["research"], rate="1000r/s", burst=100),
        Tenant(name="nightly", key=KEYS["nightly"], rate="1r/m", burst=0, models=("small",), max_concurrent=1),
        # a name that is also nginx map's own word: it must still be a tenant, not map's default
        Tenant(
            name="default",
            key=KEYS["default"],
            rate="1000r/s",
            burst=100,
            models=("big",),
            max_tokens=16,
            max_concurrent=1,
        ),
    ]


def _auth(tenant: str) -> dict:
    return {"Authorization": f"Bearer {KEYS[tenant]}"}


@pytest.fixture
def two_models():
    big, small = _backend("big-host"), _backend("small-host")
    yield (
        big,
        small,
        [
            Backend("big1", "127.0.0.1", big.server_address[1], "big", fallback="small"),
            Backend("small1", "127.0.0.1", small.server_address[1], "small", max_tokens=8),
        ],
    )
    big.shutdown()
    small.shutdown()


def test_keys_models_and_ceilings_per_tenant(tmp_path, two_models):
    _, _, backends = two_models
    with _gateway(tmp_path, backends, _tenants()) as url, httpx.Client(base_url=url, timeout=10) as c:
        r = c.post("/v1/chat/completions", headers=_auth("research"), json={"model": "big", "max_tokens": 5})
        assert r.status_code == 200 and r.json()["backend"] == "big-host", r.text
        assert r.json()["auth"] == f"Bearer {BACKEND_KEY}"  # vLLM gets its key, not the tenant's
        assert r.headers["x-vfleet-model"] == "big"
        unknown = c.post("/v1/completions", headers=_auth("default"), json={"model": "nope"})
        not_allowed = c.post("/v1/completions", headers=_auth("default"), json={"model": "small"})
        assert unknown.status_code == not_allowed.status_code == 404
        assert unknown.content == not_allowed.content and unknown.json()["error"]["code"] == "model_not_found"
        listed = c.get("/v1/models", headers=_auth("default")).json()
        assert [m["id"] for m in listed["data"]] == ["big"], listed
        # leaving the field out is not leaving the ceiling: it is written in (responses: its own field)
        r = c.post("/v1/completions", headers=_auth("default"), json={"model": "big", "prompt": "x"})
        assert r.status_code == 200 and json.loads(r.json()["body"]) == {
            "max_tokens": 16,
            "model": "big",
            "prompt": "x",
        }
        r = c.post("/v1/responses", headers=_auth("default"), json={"model": "big"})
        assert json.loads(r.json()["body"]) == {"max_output_tokens": 16, "model": "big"}, r.text
        r = c.post("/v1/responses", headers=_auth("default"), json={"model": "big", "max_output_tokens": 99999})
        assert r.status_code == 400 and r.json()["error"]["code"] == "max_tokens_too_large", r.text
        # a name every JavaScript object has is no model
        for name in ("constructor", "__proto__", "toString"):
            r = c.post("/v1/completions", headers=_auth("research"), json={"model": name})
            assert r.status_code == 404 and r.content == unknown.content, (name, r.text)
        r = c.post("/v1/completions", headers=_auth("default"), json={"model": "big", "max_tokens": 17})
        assert r.status_code == 400 and "at most 16 for tenant default" in r.json()["error"]["message"], r.text
        assert (
            c.post("/v1/completions", headers=_auth("default"), json={"model": "big", "max_tokens": 16}).status_code
            == 200
        )
        for headers in (
            {},
            {"Authorization": "Bearer not-a-key-0123456789"},
            {"Authorization": f"Bearer {BACKEND_KEY}x"},
        ):
            r = c.post("/v1/completions", headers=headers, json={"model": "big"})
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", (headers, r.text)
        # the fleet's own key is the operator: every model
        r = c.post("/v1/completions", headers={"Authorization": f"Bearer {BACKEND_KEY}"}, json={"model": "small"})
        assert r.status_code == 200 and r.json()["backend"] == "small-host"


def test_rate_and_concurrency_are_per_tenant_not_per_address(tmp_path, two_models):
    _, _, backends = two_models
    with _gateway(tmp_path, backends, _tenants()) as url, httpx.Client(base_url=url, timeout=10) as c:
        assert c.post("/v1/completions", headers=_auth("nightly"), json={"model": "small"}).status_code == 200
        over = c.post("/v1/completions", headers=_auth("nightly"), json={"model": "small"})
        assert over.status_code == 429 and over.json()["error"]["code"] == "rate_limit_exceeded", over.text
        assert over.headers["retry-after"] == "60"  # 1r/m: one request's interval
        # the same address, another key: untouched
        codes = [
            c.post("/v1/completions", headers=_auth("research"), json={"model": "small"}).status_code for _ in range(20)
        ]
        assert codes == [200] * 20
        # max_concurrent 1: a second request while one is held gets 429 at once
        held = threading.Thread(
            target=lambda: c.post("/v1/completions", headers=_auth("default"), json={"model": "big", "hold": 1.5})
        )
        held.start()
        time.sleep(0.5)
        r = httpx.post(url + "/v1/completions", headers=_auth("default"), json={"model": "big"}, timeout=10)
        held.join()
        assert r.status_code == 429 and r.json()["error"]["code"] == "concurrency_limit_exceeded", r.text
        assert r.headers["retry-after"] == "1"


def test_body_checks_read_json_not_text(tmp_path, two_models):
    _, _, backends = two_models
    with _gateway(tmp_path, backends) as url, httpx.Client(base_url=url, timeout=10) as c:
        schema = {"type": "object", "properties": {"max_tokens": {"type": "integer"}, "model": {"type": "string"}}}
        ok = c.post(
            "/v1/chat/completions",
            json={
                "model": "small",
                "max_tokens": 8,
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
                "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}],
            },
        )
        assert ok.status_code == 200 and ok.json()["backend"] == "small-host", ok.text
        for raw, code in (
            (b'{"model":"small","max_tokens":4,"max_tokens":4}', "invalid_value"),
            (b'{"model":"small","max_tokens":4,"max_completion_tokens":4}', "invalid_value"),
            (b'{"model":"small","model":"big"}', "invalid_value"),
            (b'{"model":"small",', "invalid_json"),
            (b'["small"]', "invalid_json"),
        ):
            r = c.post("/v1/completions", content=raw, headers={"Content-Type": "application/json"})
            assert r.status_code == 400 and r.json()["error"]["code"] == code, (raw, r.text)
        r = c.post("/v1/completions", json={"model": "small", "max_tokens": 9})
        assert r.status_code == 400 and r.json()["error"]["code"] == "max_tokens_too_large"
        # a key that only looks like max_tokens at the top level, inside a string, is no field
        r = c.post("/v1/completions", json={"model": "small", "prompt": '"max_tokens": 99999, "model": "big"'})
        assert r.status_code == 200 and r.json()["backend"] == "small-host", r.text


def test_fallback_when_no_host_of_the_model_can_take_it(tmp_path, two_models):
    big, _, backends = two_models
    with _gateway(tmp_path, backends, _tenants()) as url, httpx.Client(base_url=url, timeout=10) as c:
        big.shutdown()
        big.server_close()
        sent = b'{"prompt": {"model": "big"}, "model" : "big", "seed": 12345678901234567890, "max_tokens": 8}'
        r = c.post("/v1/completions", headers={**_auth("research"), "Content-Type": "application/json"}, content=sent)
        assert r.status_code == 200 and r.json()["backend"] == "small-host", r.text
        assert r.headers["x-vfleet-model"] == "small"
        # the fallback's hosts serve their own name: only the top-level model changes, byte for byte
        assert r.json()["body"] == sent.decode().replace('"model" : "big"', '"model" : "small"'), r.json()["body"]
        # the fallback's own ceiling applies (small: 8): over it, no model can take the request
        r = c.post("/v1/completions", headers=_auth("research"), json={"model": "big", "max_tokens": 9})
        assert r.status_code == 503 and r.json()["error"]["code"] == "model_unavailable", r.text
        assert "x-vfleet-model" not in r.headers, r.headers  # a refused fallback's name does not leak
        # a tenant not allowed the fallback does not get it
        r = c.post("/v1/completions", headers=_auth("default"), json={"model": "big", "max_tokens": 8})
        assert r.status_code == 503 and "x-vfleet-model" not in r.headers, (r.text, r.headers)
    log = [json.loads(line) for line in (tmp_path / "access.json").read_text().splitlines()]
    fell_back = [e for e in log if e["answered_by"] == "small" and e["model"] == "big"]
    assert fell_back and fell_back[0]["tenant"] == "research" and fell_back[0]["status"] == 200, log
    assert {e["error"] for e in log if e["status"] == 503} == {"unavailable"}
    text = (tmp_path / "access.json").read_text() + (tmp_path / "error.log").read_text()
    assert not any(k in text for k in (*KEYS.values(), BACKEND_KEY))
    # mtail reads the lines this nginx wrote (its pattern follows the log_format's text)
    (tmp_path / "progs").mkdir()
    (tmp_path / "progs" / PROGRAM_NAME).write_text(program_text())
    store = mtail_one_shot(tmp_path / "progs", tmp_path / "access.json")

    def total(name: str) -> float:
        return sum(lv["Value"]["Value"] for m in store.get(name, []) for lv in m["LabelValues"])

    assert total("vfleet_gateway_requests_total") == len(log), store
    assert total("vfleet_gateway_log_lines_unread_total") == 0, store


def test_fallback_cycles_and_unknown_models_are_refused():
    b = [Backend("a1", "10.0.0.1", 8000, "a", fallback="b"), Backend("b1", "10.0.0.2", 8000, "b", fallback="a")]
    with pytest.raises(GatewayRenderError, match=r"cycle: a -> b -> a"):
        render_gateway(b, gw())
    with pytest.raises(GatewayRenderError, match="is the model itself"):
        render_gateway([Backend("a1", "10.0.0.1", 8000, "a", fallback="a")], gw())
    with pytest.raises(GatewayRenderError, match="'c' is not served"):
        render_gateway([Backend("a1", "10.0.0.1", 8000, "a", fallback="c")], gw())
    cfg = dataclasses.replace(gw(), gateway_tenants=(Tenant(name="t", key="k" * 20, rate="1r/s", models=("zz",)),))
    with pytest.raises(GatewayRenderError, match="tenant 't' names models no host serves: zz"):
        render_gateway([Backend("a1", "10.0.0.1", 8000, "a")], cfg)


def _certificates(tmp_path: Path) -> tuple[Path, Path, Path]:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vfleet test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gw")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = tmp_path / "ca.pem", tmp_path / "gw.pem", tmp_path / "gw.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    paths[2].chmod(0o600)
    return paths


def test_tls_streams_and_plain_http_gets_no_answer(tmp_path, two_models):
    _, _, backends = two_models
    ca, cert, key = _certificates(tmp_path / "..")
    with _gateway(tmp_path, backends, tls=GatewayTls(str(cert), str(key), str(ca))) as url:
        assert url.startswith("https://")
        with httpx.Client(base_url=url, timeout=10, verify=ssl.create_default_context(cafile=str(ca))) as c:
            r = c.post("/v1/completions", headers={"Authorization": f"Bearer {BACKEND_KEY}"}, json={"model": "small"})
            assert r.status_code == 200 and r.json()["backend"] == "small-host", r.text
        with pytest.raises(httpx.ConnectError):  # not trusted without the CA
            httpx.post(url + "/v1/completions", json={"model": "small"}, timeout=10)
        plain = httpx.post(url.replace("https://", "http://") + "/v1/completions", json={"model": "small"}, timeout=10)
        assert plain.status_code == 400 and "backend" not in plain.text
    files = render_files(backends, dataclasses.replace(gw(), gateway_tls=GatewayTls(str(cert), str(key))))
    assert {(f.path, f.mode, f.secret) for f in files.supporting} == {
        ("/etc/nginx/vfleet/gateway.js", "0600", True),
        ("/etc/nginx/vfleet/tls/gateway.crt", "0644", False),
        ("/etc/nginx/vfleet/tls/gateway.key", "0600", True),
    }
