"""How the load generator (roles/loadgen.py) names a failed request: the status and, when the
body is an OpenAI-style error, its code, so a test's summary tells the gateway's own 503 from
one vLLM sent or a bare nginx page."""
import httpx

from roles.loadgen import _http_failure


def test_a_failure_names_the_error_code_of_the_body():
    gateway = httpx.Response(503, json={"error": {"message": "No host...", "code": "model_unavailable"}})
    assert _http_failure(gateway) == "HTTP 503 model_unavailable"
    assert _http_failure(httpx.Response(400, json={"error": {"code": 400}})) == "HTTP 400 400"


def test_a_body_that_is_no_openai_error_leaves_the_status_alone():
    assert _http_failure(httpx.Response(502, text="<html>502 Bad Gateway</html>")) == "HTTP 502"
    assert _http_failure(httpx.Response(500, json=["not", "an", "object"])) == "HTTP 500"
    assert _http_failure(httpx.Response(503, json={"error": "down"})) == "HTTP 503"
