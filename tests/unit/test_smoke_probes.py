"""Smoke's two probes of what the model says (vfleet/clients/smoke_probes.py), against a server on
127.0.0.1 that answers as vLLM does: the reply comes from the test, the request is kept so the
test sees what the probe asked for. The looping reply is the one the lab's vLLM 0.32.0 gave with
the random tiny model (chat completion captured 2026-12: " help help help help help help")."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from tests.unit.json_handler import JsonHandler
from tests.unit.listeners import Server
from vfleet.clients import smoke, smoke_probes
from vfleet.clients.smoke_probes import repeated_phrase

LAB_LOOP = " help help help help help help"  # vLLM 0.32.0, random tiny model, finish_reason "length"


def vllm_answer(content: str, finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-acb37b198483845a",
        "object": "chat.completion",
        "created": 1796227251,
        "model": "tiny",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "tool_calls": [],
                    "reasoning": None,
                },
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
            }
        ],
        "usage": {"prompt_tokens": 12, "total_tokens": 18, "completion_tokens": 6},
    }


class Replay(JsonHandler):
    answer: dict[str, Any] = {}
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        self.send_json(200, type(self).answer)


@pytest.fixture
def serve():
    """serve(content, finish) -> (a Target of the fake vLLM, the requests it got)."""
    handler = type("ReplayOnce", (Replay,), {"requests": []})
    server = Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def start(content: str, finish: str, **target: Any) -> tuple[smoke.Target, list[dict[str, Any]]]:
        handler.answer = vllm_answer(content, finish)
        t = smoke.Target("host", f"http://127.0.0.1:{server.server_address[1]}", "tiny", "k3y", **target)
        return t, handler.requests

    yield start
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def probe(fn, t: smoke.Target) -> tuple[bool, str, dict[str, Any]]:
    with httpx.Client(timeout=10) as client:
        return fn(client, t)


@pytest.mark.parametrize(
    "text, phrase",
    [
        (LAB_LOOP, "help"),
        ("I am here. I am here. I am here.", "i am here."),
        ("Hello hello HELLO there", "hello"),
        ("Hello.", None),
        ("very very good", None),  # twice is speech, not a loop
        ("a b a b c a b", None),
        ("", None),
    ],
)
def test_repeated_phrase(text, phrase):
    assert repeated_phrase(text) == phrase


def test_stops_fails_the_lab_loop_and_names_the_template_fix(serve):
    t, asked = serve(LAB_LOOP, "length")
    ok, message, seen = probe(smoke_probes.stops, t)
    assert not ok and "finish_reason length" in message and "chat_template" in message and "eos_token_id" in message
    assert seen == {"finish_reason": "length", "reply": LAB_LOOP}
    assert asked[0]["path"] == "/v1/chat/completions" and asked[0]["auth"] == "Bearer k3y"
    assert asked[0]["messages"] == [{"role": "user", "content": "Say hello."}]
    assert (asked[0]["max_tokens"], asked[0]["temperature"]) == (64, 0) and "ignore_eos" not in asked[0]


def test_stops_fails_a_loop_that_stopped(serve):
    ok, message, _ = probe(smoke_probes.stops, serve("Hello! Hello! Hello! Hello!", "stop")[0])
    assert not ok and "loops on 'hello!'" in message and "--chat-template" in message


def test_stops_passes_a_reply_that_stops(serve):
    ok, message, seen = probe(smoke_probes.stops, serve("Hello.", "stop")[0])
    assert ok and "'Hello.'" in message and seen["finish_reason"] == "stop"


def test_stops_skips_a_model_served_without_chat(serve):
    t, asked = serve("Hello.", "stop", chat=False)
    ok, _, seen = probe(smoke_probes.stops, t)
    assert ok and seen == {"skipped": True} and asked == []


@pytest.mark.parametrize(
    "content, why",
    [
        ('{"city": "Berlin", "country": ', "reply is not JSON (Expecting value"),
        ("Berlin, Germany", "reply is not JSON"),
        ('{"city": "Berlin"}', "'country' is a required property"),
        ('{"city": "Berlin", "country": "Germany", "note": "x"}', "Additional properties are not allowed"),
        ('{"city": 1, "country": "Germany"}', "1 is not of type 'string'"),
    ],
)
def test_json_schema_fails_with_what_was_wrong(serve, content, why):
    ok, message, seen = probe(smoke_probes.json_schema, serve(content, "stop")[0])
    assert not ok and why in message, message
    assert seen["reply"] == content


def test_json_schema_cut_at_max_tokens_says_truncated_not_ignored(serve):
    ok, message, seen = probe(smoke_probes.json_schema, serve('{"city": "Paris", "country": "Fr', "length")[0])
    assert not ok and seen["finish_reason"] == "length"
    assert message.startswith("reply was truncated at max_tokens 48 (finish_reason length)")
    assert "ignored response_format" not in message


def test_json_schema_passes_a_reply_that_satisfies_the_schema_and_asks_as_openai_does(serve):
    t, asked = serve('{"city": "Berlin", "country": "Germany"}', "stop")
    ok, message, _ = probe(smoke_probes.json_schema, t)
    assert ok and "satisfies" in message
    fmt = asked[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "smoke"
    assert fmt["json_schema"]["schema"]["required"] == ["city", "country"] and asked[0]["max_tokens"] == 48
    assert "guided_json" not in asked[0]  # dropped by vLLM 0.12.0: HTTP 200 and no constraint


@pytest.mark.parametrize("version, asks", [("0.5.4", False), ("0.6.0", True), ("0.32.0", True), (None, True)])
def test_json_schema_skips_a_version_without_response_format_json_schema(serve, version, asks):
    t, asked = serve('{"city": "Berlin", "country": "Germany"}', "stop", vllm_version=version)
    ok, message, seen = probe(smoke_probes.json_schema, t)
    assert ok and bool(asked) is asks
    if not asks:
        assert seen == {"skipped": True} and "vLLM 0.5.4 has no response_format json_schema" in message


def test_smoke_runs_both_probes_after_its_other_checks():
    names = [name for name, _ in smoke.checks_for(smoke.Target("host", "http://h:8000", "tiny", None))]
    assert names == [
        "/health",
        "/v1/models",
        "chat completion",
        smoke.STREAMED,
        "/metrics",
        "api key required",
        "stops",
        "json_schema",
    ]


def test_a_gateway_is_not_probed_for_what_the_model_says():
    """Through a gateway a model's max_tokens ceiling (test_models: 8) refused the probes' 64 and
    48 tokens with HTTP 400; the probes ask each host directly."""
    names = [name for name, _ in smoke.checks_for(smoke.Target("gateway", "http://gw:80", "tiny-a", None))]
    assert "stops" not in names and "json_schema" not in names and "chat completion" in names


class ServerError(JsonHandler):
    """What vLLM answers when a request breaks inside the engine: HTTP 500 and its own words."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_json(
            500,
            {
                "error": {
                    "message": "structured output backend failed: grammar compile error",
                    "type": "InternalServerError",
                    "code": 500,
                }
            },
        )


def test_a_server_error_carries_the_servers_own_message():
    server = Server(("127.0.0.1", 0), ServerError)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        t = smoke.Target("host", f"http://127.0.0.1:{server.server_address[1]}", "tiny", "k3y")
        with pytest.raises(httpx.HTTPStatusError, match=r"HTTP 500 .*grammar compile error"):
            probe(smoke_probes.json_schema, t)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
