"""Several models behind one gateway (vfleet/roles/gateway/_models.py, vfleet/roles/gateway/_render.py,
vfleet/templates/gateway.js): the per-model rendering (one upstream per served name,
weight/backup/max_conns, route prefixes, what is refused), and a real nginx (with njs) on
loopback in front of fake backends: routing on the body's model field and on the path prefix,
streaming that is not buffered, /v1/models, the 404 and 400 bodies, the max_tokens ceiling
(compared by gateway.js) against values around it."""

import http.client
import http.server
import json
import re
import shutil
import subprocess
import threading

import pytest

from tests.unit.configs import host_config
from tests.unit.gateway_cases import GW, gw
from tests.unit.test_gateway_render import _free_port, _nginx_prefix, _nginx_t
from vfleet.roles.gateway import _render as gr
from vfleet.roles.gateway._files import render_files
from vfleet.roles.gateway._models import MODEL_NAME
from vfleet.roles.gateway._render import Backend

needs_nginx = pytest.mark.skipif(not shutil.which("nginx"), reason="needs nginx")

TWO = [
    Backend("a1", "10.0.0.1", 8000, "tiny-a", weight=10, max_conns=4, max_tokens=64, route_prefix="a7b"),
    Backend("a2", "10.0.0.2", 8000, "tiny-a", weight=5, backup=True, max_tokens=64, route_prefix="a7b"),
    Backend("b1", "10.0.0.3", 8000, "tiny-b"),
]


def _servers(conf: str) -> dict:
    return {m.group(2): m.group(1) for m in re.finditer(r"^\s*server (.*);  # (\S+)$", conf, re.M)}


def test_one_upstream_per_model_with_weight_backup_and_max_conns():
    conf = gr.render_gateway(TWO, GW, drained={"a2"})
    assert "upstream vfleet_model_1 {" in conf and "upstream vfleet_model_2 {" in conf
    s = _servers(conf)
    assert s["a1"] == "10.0.0.1:8000 weight=10 max_conns=4 max_fails=3 fail_timeout=10s"
    assert s["a2"] == "10.0.0.2:8000 weight=5 max_fails=3 fail_timeout=10s backup down"
    assert s["b1"] == "10.0.0.3:8000 max_fails=3 fail_timeout=10s"
    up1 = conf[conf.index("upstream vfleet_model_1") : conf.index("upstream vfleet_model_2")]
    assert "# a1" in up1 and "# a2" in up1 and "# b1" not in up1
    assert "slow_start" not in conf  # open-source nginx has none
    assert "ok_1 vfleet_model_1;" in conf and "ok_2 vfleet_model_2;" in conf
    assert "'~^/v1/a7b/' tiny-a;" in conf and "'~^/v1/(?:a7b)/(chat/completions|" in conf
    assert "client_body_buffer_size 10m;" in conf and "mirror_request_body on;" in conf
    # one proxied location and its fallback (@vfleet_answer), whatever the prefixes
    assert conf.count("proxy_buffering off;") == 2


def test_max_conns_from_inventory_then_planner_then_max_num_seqs():
    cfg = host_config({"max_num_seqs": 8})
    assert Backend.of(cfg).max_conns == 8
    assert Backend.of(cfg, max_concurrency=3.7).max_conns == 3
    assert Backend.of(cfg, max_concurrency=0.4).max_conns == 8  # under one request: no planned cap
    assert Backend.of(host_config({"max_num_seqs": 8, "gateway_max_conns": 2}), max_concurrency=3.7).max_conns == 2
    assert Backend.of(host_config()).max_conns is None
    b = Backend.of(
        host_config(
            {
                "served_model_name": "tiny-a",
                "gateway_weight": 10,
                "gateway_backup": True,
                "gateway_max_tokens": 64,
                "gateway_route_prefix": "a7b",
            }
        )
    )
    assert (b.model, b.weight, b.backup, b.max_tokens, b.route_prefix) == ("tiny-a", 10, True, 64, "a7b")


@pytest.mark.parametrize(
    "backends, words",
    [
        (
            [Backend("a", "10.0.0.1", 1, "m", max_tokens=5), Backend("b", "10.0.0.2", 1, "m", max_tokens=6)],
            "disagree on gateway_max_tokens",
        ),
        (
            [Backend("a", "10.0.0.1", 1, "m", route_prefix="x"), Backend("b", "10.0.0.2", 1, "n", route_prefix="x")],
            "both use gateway_route_prefix",
        ),
        ([Backend("a", "10.0.0.1", 1, "m", route_prefix="chat")], "shadow the OpenAI path /v1/chat"),
        ([Backend("a", "10.0.0.1", 1, "m", backup=True)], "at least one must serve normally"),
        ([Backend("a", "10.0.0.1", 1, "bad name")], "cannot be routed"),
        ([Backend("a", "10.0.0.1", 1, "m$x")], "cannot be routed"),
        ([Backend("a", "10.0.0.1", 1, "")], "cannot be routed"),
    ],
)
def test_refused_model_shapes_name_the_hosts_and_the_fix(backends, words):
    with pytest.raises(gr.GatewayRenderError, match=re.escape(words)):
        gr.render_gateway(backends, GW)


def test_model_names_the_gateway_routes_are_json_and_regex_safe():
    for bad in ('a"b', "a\\b", "a|b", "a b", "a$b", "a'b", "x" * 129):
        assert not MODEL_NAME.fullmatch(bad)


@needs_nginx
def test_nginx_t_accepts_models(tmp_path):
    files = render_files(TWO, GW, drained={"a2"})
    r = _nginx_t(tmp_path, _nginx_prefix(tmp_path, files))
    assert r.returncode == 0, r.stderr


# --- a live gateway in front of two fake models -------------------------------------


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def _fake(name: str, seen: list, release: threading.Event):
    """A backend that records (host, path, body) and streams two events; the second only
    once the test says it read the first (so a buffering gateway would never deliver it)."""

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _send(self, body: bytes | None):
            seen.append((name, self.path, body))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(2):
                if i:
                    release.wait(10)
                data = f"data: {name} {i}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def do_GET(self):
            release.set()
            self._send(None)

        def do_POST(self):
            self._send(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    srv = _Server(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def live(tmp_path):
    seen: list = []
    release = threading.Event()
    a, b = _fake("a", seen, release), _fake("b", seen, release)
    port = _free_port()
    backends = [
        Backend.of(
            host_config(
                {
                    "vllm_port": a.server_address[1],
                    "served_model_name": "tiny-a",
                    "gateway_max_tokens": 64,
                    "gateway_route_prefix": "a7b",
                },
                name="a",
                address="127.0.0.1",
            )
        ),
        Backend.of(
            host_config(
                {
                    "vllm_port": b.server_address[1],
                    "served_model_name": "tiny-b",
                    "gateway_max_conns": 1,
                    "lora_adapters": [{"name": "tiny-b-sql", "source": "/srv/src/sql"}],
                },
                name="b",
                address="127.0.0.1",
            )
        ),
    ]
    files = render_files(
        backends,
        gw(
            {
                "gateway_port": port,
                "gateway_listen_address": "127.0.0.1",
                "gateway_rate_limit": "1000r/s",
                "monitoring_gateway_status_port": _free_port(),
            }
        ),
    )
    nginx = subprocess.Popen(["nginx", "-p", str(tmp_path), "-c", str(_nginx_prefix(tmp_path, files))])
    conn = lambda: http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # noqa: E731
    for _ in range(200):
        try:
            c = conn()
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            threading.Event().wait(0.05)
    try:
        yield conn, seen, release
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
        a.shutdown()
        b.shutdown()


def _post(conn, path: str, body: dict | str):
    c = conn()
    c.request(
        "POST",
        path,
        body=body if isinstance(body, str) else json.dumps(body),
        headers={"Content-Type": "application/json"},
    )
    return c.getresponse()


@needs_nginx
def test_live_routes_by_model_field_and_streams_unbuffered(live):
    conn, seen, release = live
    for model, host in (("tiny-a", "a"), ("tiny-b", "b"), ("tiny-a", "a")):
        release.clear()
        r = _post(
            conn,
            "/v1/chat/completions",
            {
                "model": model,
                "stream": True,
                "max_tokens": 8,
                "messages": [{"role": "user", "content": '"model": "tiny-b"'}],
            },
        )
        assert r.status == 200
        # the first event arrives while the backend still holds the second back
        assert r.readline() == f"data: {host} 0\n".encode()
        release.set()
        assert f"data: {host} 1".encode() in r.read()
        assert seen[-1][0] == host and seen[-1][1] == "/v1/chat/completions"
        assert json.loads(seen[-1][2])["model"] == model  # the body reaches vLLM whole


@needs_nginx
def test_live_an_adapter_goes_to_its_models_hosts_with_the_models_ceiling(live):
    conn, seen, release = live
    release.set()
    r = _post(conn, "/v1/completions", {"model": "tiny-b-sql", "prompt": "x", "max_tokens": 4})
    assert r.status == 200 and b"data: b 1" in r.read()
    assert seen[-1][0] == "b" and json.loads(seen[-1][2])["model"] == "tiny-b-sql"  # vLLM picks the adapter
    r = _post(conn, "/v1/completions", {"model": "tiny-a-sql", "prompt": "x"})
    assert r.status == 404 and json.loads(r.read())["error"]["code"] == "model_not_found"


@needs_nginx
def test_live_path_prefix_routes_and_strips_the_prefix(live):
    conn, seen, release = live
    release.set()
    r = _post(conn, "/v1/a7b/completions", {"model": "tiny-a", "prompt": "hi", "max_tokens": 64})
    assert r.status == 200 and b"data: a 1" in r.read()
    assert seen[-1][:2] == ("a", "/v1/completions")
    # the prefix names the model: its ceiling applies whatever the body says
    r = _post(conn, "/v1/a7b/completions", {"model": "tiny-b", "prompt": "hi", "max_tokens": 65})
    assert r.status == 400
    # a GET has no body: the prefix alone names the model (vLLM's own list of it)
    c = conn()
    c.request("GET", "/v1/a7b/models")
    r = c.getresponse()
    r.read()
    assert r.status == 200 and seen[-1][:2] == ("a", "/v1/models"), (r.status, seen[-1])


@needs_nginx
def test_live_models_list_unknown_model_and_ceiling(live):
    conn, seen, release = live
    c = conn()
    c.request("GET", "/v1/models")
    r = c.getresponse()
    assert r.status == 200
    data = json.loads(r.read())["data"]
    assert [m["id"] for m in data] == ["tiny-a", "tiny-b", "tiny-b-sql"]
    assert data[2]["parent"] == "tiny-b" and "parent" not in data[1]  # as vLLM lists an adapter
    before = len(seen)  # only the key check (GET /v1/models on a host) reached a backend
    assert seen[-1][:2] == ("a", "/v1/models")

    for body in ({"model": "nope", "prompt": "x"}, {"prompt": "x"}, {"model": 7, "prompt": "x"}):
        r = _post(conn, "/v1/completions", body)
        assert r.status == 404 and r.getheader("Content-Type") == "application/json"
        assert json.loads(r.read()) == {
            "error": {
                "message": "The model named in the request body is not served here (GET /v1/models lists the models).",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
        }
    for body in ("not json", "[1]", "", '"tiny-a"'):  # not a JSON object: nothing to route on
        r = _post(conn, "/v1/completions", body)
        assert r.status == 400 and r.getheader("Content-Type") == "application/json", body
        assert json.loads(r.read())["error"]["code"] == "invalid_json", body

    # 1e400 is Infinity and 2**53+1 rounds to 2**53 in JavaScript: still above the ceiling
    for tokens in (65, 100, "1e5", '"64"', "64.5", -1, "1e400", "9007199254740993", "true", "[1]"):
        r = _post(conn, "/v1/completions", '{"model": "tiny-a", "prompt": "x", "max_tokens": %s}' % tokens)
        err = json.loads(r.read())["error"]
        assert r.status == 400 and err["code"] == "max_tokens_too_large" and err["param"] == "max_tokens", tokens
        assert "at most 64" in err["message"]
    r = _post(conn, "/v1/completions", '{"model": "tiny-a", "max_completion_tokens": 9000}')
    assert r.status == 400
    r = _post(conn, "/v1/completions", '{"model": "tiny-a", "max_tokens": 1, "max_tokens": 9000}')
    assert r.status == 400 and json.loads(r.read())["error"]["code"] == "invalid_value"
    # a repeated top-level field is refused: JSON parsers disagree on which copy wins
    r = _post(conn, "/v1/completions", '{"model": "tiny-b", "prompt": "x", "model": "tiny-a", "max_tokens": 9000}')
    assert r.status == 400 and json.loads(r.read())["error"]["code"] == "invalid_value"
    assert len(seen) == before  # refusals never reached a backend

    release.set()
    # 64.0: JSON's number 64, which vLLM's pydantic (lax mode) also reads as the integer 64;
    # a max_tokens inside a tool definition is not the request's own
    for ok in (
        '"max_tokens": 64',
        '"max_tokens": 0',
        '"max_tokens": null',
        '"n": 1',
        '"max_tokens": 64.0',
        '"tools": [{"type": "function", "function": {"name": "f", "parameters": {"max_tokens": 9000}}}]',
        '"max_completion_tokens": 64',
    ):
        r = _post(conn, "/v1/completions", '{"model": "tiny-a", "prompt": "x", %s}' % ok)
        assert r.status == 200, ok
        r.read()
    r = _post(conn, "/v1/completions", {"model": "tiny-b", "prompt": "x", "max_tokens": 100000})
    assert r.status == 200  # tiny-b has no ceiling
    r.read()


@needs_nginx
def test_live_model_at_its_max_conns_answers_503_json(live):
    conn, seen, release = live
    release.clear()
    held = _post(conn, "/v1/completions", {"model": "tiny-b", "prompt": "x", "stream": True})
    assert held.status == 200 and held.readline() == b"data: b 0\n"  # b's one connection is busy
    r = _post(conn, "/v1/completions", {"model": "tiny-b", "prompt": "x"})
    assert r.status == 503 and json.loads(r.read())["error"]["code"] == "model_unavailable"
    r = _post(conn, "/v1/completions", {"model": "tiny-a", "prompt": "x", "stream": True})
    assert r.status == 200  # the other model is not limited by b's connections
    release.set()
    held.read()
    r.read()


def test_an_inventory_of_model_groups_maps_to_upstreams():
    """Child groups of vllm with group_vars/ (precedence: vllm < the model group < host)."""
    from pathlib import Path

    from vfleet.cli.common import backends
    from vfleet.config.fleet import Fleet
    from vfleet.config.variables import SCHEMA
    from vfleet.engine.inventory import load_inventory
    from vfleet.roles.gateway._models import group_models

    inv = load_inventory(Path(__file__).parent / "data/inventories/models/inventory.yaml", schema=SCHEMA)
    bs = backends(Fleet.of(inv), {"h100-01": 40.5})
    models = group_models(bs)
    assert [(m.name, m.hosts, m.max_tokens, m.route_prefix) for m in models] == [
        ("qwen2.5-7b", ("a100-01", "a100-02", "rtx4090-01", "spare-01"), 1024, None),
        ("qwen2.5-32b", ("h100-01", "h100-02"), 2048, "32b"),
    ]
    by = {b.name: b for b in bs}
    assert (by["a100-01"].weight, by["rtx4090-01"].weight, by["spare-01"].backup) == (10, 5, True)
    assert (by["h100-01"].max_conns, by["h100-02"].max_conns, by["a100-01"].max_conns) == (40, 16, None)
    conf = gr.render_gateway(bs, gw())
    assert "'~^/v1/32b/' qwen2.5-32b;" in conf and '"id":"qwen2.5-7b"' in conf and '"max_model_len":16384' in conf


def test_a_run_without_a_plan_keeps_the_caps_the_gateway_has():
    """deploy with preflight capped a1 at 3 (the planner); a later run without preflight
    (gateway, restart, --skip-preflight) renders the same config, not max_num_seqs: the caps
    the gateway was rendered with are kept on it as JSON (vfleet/roles/gateway/_caps.py)."""
    from vfleet.roles.gateway._caps import GatewayCaps

    cfg = host_config({"max_num_seqs": 8, "served_model_name": "tiny-a"}, name="a1", address="10.0.0.1")
    planned = Backend.of(cfg, max_concurrency=3.7)
    gw_cfg = host_config(name="gw", group="gateways")
    current = gr.render_gateway([planned], gw_cfg)
    state = GatewayCaps.of([planned]).text()  # what that run wrote beside the config
    assert json.loads(state) == {"max_conns": {"a1": 3}}
    kept = GatewayCaps.parse(state)
    unplanned = Backend.of(cfg)
    assert unplanned.max_conns == 8 and not unplanned.max_conns_settled
    assert gr.render_gateway(kept.kept([unplanned]), gw_cfg) == current
    # settled caps (inventory or plan) win over what is there; a host never capped gets max_num_seqs
    assert kept.kept([Backend.of(cfg, max_concurrency=5.2)])[0].max_conns == 5
    assert GatewayCaps.parse(None).kept([unplanned])[0].max_conns == 8
    assert GatewayCaps.parse("not json").kept([unplanned])[0].max_conns == 8  # unreadable: nothing kept
