"""The gateway passes on an allow-list of vLLM's inference API (vfleet/roles/gateway/_endpoints.py)
and answers 404 with a JSON body for anything else: vLLM's administration under /v1
(/v1/load_lora_adapter), its endpoints outside /v1 that its key does not guard, /metrics. Checked
on the rendered text and on a real nginx on loopback in front of fake backends, including paths
that nginx normalises (`..`, %-escapes, `//`): vLLM gets the checked path, never the raw one."""

import json

import pytest

from tests.unit.gateway_cases import GW
from tests.unit.test_gateway_models import TWO, _post, live  # noqa: F401  (live: the fixture)
from vfleet.roles.gateway import _render as gr
from vfleet.roles.gateway._endpoints import API_PATHS, V1_ENDPOINTS
from vfleet.roles.gateway._models import OPENAI_PATHS

ADMIN = [
    "/v1/load_lora_adapter",
    "/v1/unload_lora_adapter",
    "/v1/a7b/load_lora_adapter",
    "/v1/a7b/unload_lora_adapter",
    "/v1/responses/resp_1",
    "/v1/responses/resp_1/cancel",
    "/v1/chat/completions/render",
    "/v1/realtime",
    "/v1/messages",
    "/v1/",
    "/v1/zzz/completions",
    "/v2/embed",
    "/v1/models/",
    "/metrics",
    "/metrics/",
    "/tokenize",
    "/detokenize",
    "/invocations",
    "/ping",
    "/version",
    "/load",
    "/pooling",
    "/classify",
    "/score",
    "/rerank",
    "/sleep",
    "/wake_up",
    "/reset_prefix_cache",
    "/collective_rpc",
    "/server_info",
    "/start_profile",
    "/inference/v1/generate",
    "/scale_elastic_ep",
    "/docs",
    "/openapi.json",
    "/",
]
# raw request paths nginx normalises onto an admin path, or onto an allowed one
SNEAKY = {
    "/v1/chat/completions/../load_lora_adapter": None,
    "/v1/%6coad_lora_adapter": None,
    "/v1/chat/completions/..%2Fload_lora_adapter": None,
    "/v1//load_lora_adapter": None,
    "/v1/load_lora_adapter/../chat/completions": "/v1/chat/completions",
    "/v1//chat//completions": "/v1/chat/completions",
    "/v1/a7b/../completions": "/v1/completions",
}


def test_allow_list_is_vllms_inference_api():
    assert {
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/models",
        "/v1/responses",
        "/v1/audio/transcriptions",
        "/v1/audio/translations",
        "/v1/score",
        "/v1/rerank",
        "/v2/rerank",
    } == set(API_PATHS)
    assert not any("lora" in p or "tokenize" in p for p in API_PATHS)


def test_a_route_prefix_cannot_shadow_an_allowed_endpoint():
    """/v1/<prefix>/<endpoint> is read prefix-first: a prefix named like an endpoint's first
    segment would take that endpoint's requests (models.py refuses such a prefix)."""
    assert {p.split("/")[0] for p in V1_ENDPOINTS} <= OPENAI_PATHS


def test_rendered_map_lists_the_endpoints_with_and_without_the_prefix():
    conf = gr.render_gateway(TWO, GW)
    assert "map $uri $vfleet_api_path {" in conf and 'default "";' in conf
    assert "'~^/v1/(chat/completions|completions|" in conf and "'~^/v2/rerank$' /v2/rerank;" in conf
    assert "'~^/v1/(?:a7b)/(chat/completions|" in conf
    assert "load_lora" not in _api_map(conf)
    # without route prefixes there is no prefix row
    assert "(?:" not in _api_map(gr.render_gateway(TWO[2:], GW))


def _api_map(conf: str) -> str:
    return conf.split("map $uri $vfleet_api_path {")[1].split("\n}")[0]


def _request(conn, method: str, path: str, body: dict | None = None):
    c = conn()
    c.request(
        method, path, body=json.dumps(body) if body is not None else None, headers={"Content-Type": "application/json"}
    )
    r = c.getresponse()
    return r, r.read()


def test_live_admin_and_unknown_paths_answer_404_json_and_reach_no_host(live):  # noqa: F811
    conn, seen, release = live
    release.set()
    for path in ADMIN:
        for method in ("GET", "POST"):
            r, body = _request(conn, method, path, {"model": "tiny-a", "lora_name": "x", "lora_path": "/tmp"})
            assert r.status == 404, (method, path, r.status)
            assert r.getheader("Content-Type") == "application/json", path
            assert json.loads(body)["error"]["code"] == "not_found", path
    assert seen == []
    r, body = _request(conn, "GET", "/health")
    assert r.status == 200 and json.loads(body)["status"] == "ok"  # smoke's check of the gateway


def test_live_normalised_paths_send_the_checked_path(live):  # noqa: F811
    conn, seen, release = live
    release.set()
    for raw, sent in SNEAKY.items():
        before = len(seen)
        r, _ = _request(conn, "POST", raw, {"model": "tiny-a", "prompt": "x"})
        if sent is None:
            assert r.status in (400, 404) and len(seen) == before, raw
        else:
            assert r.status == 200 and seen[-1][:2] == ("a", sent), (raw, seen[-1:])


@pytest.mark.parametrize("path", [p for p in API_PATHS if p != "/v1/models"])
def test_live_each_allowed_endpoint_reaches_the_models_host(live, path):  # noqa: F811
    conn, seen, release = live
    release.set()
    r = _post(conn, path + "?trace=1", {"model": "tiny-b", "input": "x"})
    assert r.status == 200, path
    r.read()
    assert seen[-1][:2] == ("b", path + "?trace=1")
    if path.startswith("/v1/"):  # and behind the route prefix, the prefix taken out
        r = _post(conn, path.replace("/v1/", "/v1/a7b/", 1), {"input": "x"})
        assert r.status == 200, path
        r.read()
        assert seen[-1][:2] == ("a", path)
