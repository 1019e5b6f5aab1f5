"""The load generator (vfleet/clients/loadgen.py) as a client: a failed request is named by its status
and, when the body is an OpenAI-style error, its code (the gateway's own 503 vs vLLM's vs a bare
nginx page); a request whose connection closed before any response is sent once more, as the
OpenAI SDK does, and nothing else is."""

import httpx

from vfleet.clients.loadgen import LoadGenerator, _http_failure


def test_a_failure_names_the_error_code_of_the_body():
    gateway = httpx.Response(503, json={"error": {"message": "No host...", "code": "model_unavailable"}})
    assert _http_failure(gateway) == "HTTP 503 model_unavailable"
    assert _http_failure(httpx.Response(400, json={"error": {"code": 400}})) == "HTTP 400 400"


def test_a_body_that_is_no_openai_error_leaves_the_status_alone():
    assert _http_failure(httpx.Response(502, text="<html>502 Bad Gateway</html>")) == "HTTP 502"
    assert _http_failure(httpx.Response(500, json=["not", "an", "object"])) == "HTTP 500"
    assert _http_failure(httpx.Response(503, json={"error": "down"})) == "HTTP 503"


def _client(*answers):
    """A client whose successive requests get `answers` in turn: an exception is raised as the
    transport's, anything else is the response."""
    calls = []

    def handler(request):
        calls.append(request)
        answer = answers[min(len(calls), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.Client(transport=httpx.MockTransport(handler)), calls


OK = httpx.Response(200, json={"choices": [{"finish_reason": "length", "message": {"content": "1 2 3"}}]})


def test_a_connection_closed_before_any_response_is_sent_once_more():
    gen = LoadGenerator("http://gw", "tiny")
    client, calls = _client(httpx.ReadError("Connection reset by peer"), OK)
    res = gen.one(client, stream=False)
    assert (res.outcome, res.resent, len(calls)) == ("ok", 1, 2)
    client, calls = _client(httpx.RemoteProtocolError("Server disconnected"), httpx.ReadError("reset"))
    res = gen.one(client, stream=False)
    assert (res.outcome, res.resent, len(calls)) == ("failed", 1, 2) and res.detail.startswith("ReadError")


def test_a_timeout_or_an_answer_is_never_resent():
    gen = LoadGenerator("http://gw", "tiny")
    client, calls = _client(httpx.ReadTimeout("no answer"), OK)
    res = gen.one(client, stream=False)
    assert (res.outcome, res.resent, len(calls)) == ("failed", 0, 1)
    client, calls = _client(httpx.Response(503, json={"error": {"code": "model_unavailable"}}), OK)
    res = gen.one(client, stream=False)
    assert (res.outcome, res.detail, len(calls)) == ("failed", "HTTP 503 model_unavailable", 1)


def test_a_stream_is_resent_only_when_no_response_began():
    gen = LoadGenerator("http://gw", "tiny")
    events = b'data: {"choices": [{"delta": {"content": "1"}, "finish_reason": "length"}]}\n\ndata: [DONE]\n\n'
    stream = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events)
    client, calls = _client(httpx.ReadError("Connection reset by peer"), stream)
    res = gen.one(client, stream=True)
    assert (res.outcome, res.resent, len(calls)) == ("ok", 1, 2)
    cut = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events[:20])
    client, calls = _client(cut, stream)
    res = gen.one(client, stream=True)
    assert res.outcome != "ok" and (res.resent, len(calls)) == (0, 1)
