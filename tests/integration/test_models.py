"""Two models behind one gateway on the lab: lab1 and lab4 serve the tiny CPU model as tiny-a
(a max_tokens ceiling of 8, also routed as /v1/a/...), lab2 serves it as tiny-b, lab3 is the
gateway (lab4: tests/integration/fourth_host.py). Each model is a child group of `vllm` with
its variables in the group's vars, the Ansible way. One deploy brings both up; then through
the real nginx: routing by the model field, a long stream that arrives event by event and
whole, /v1/models, the 404 and 400 bodies, a restart that refuses to
take tiny-b's only host, and a rolling restart of tiny-a's two hosts under load of both
models that fails no request and never touches tiny-b's host."""
from __future__ import annotations

import json

import httpx
import pytest
import yaml

from vfleet.clients.loadgen import LoadGenerator
from tests.integration.deploy_env import API_KEY, run_report, vfleet, write_deploy_inventory
from tests.integration.fourth_host import lab_inventory_with_lab4, retire
from tests.integration.test_rollout import gateway_url

pytestmark = pytest.mark.integration

MODELS = {"tiny_a": (("lab1", "lab4"), {"served_model_name": "tiny-a", "gateway_max_tokens": 8,
                                        "gateway_route_prefix": "a"}),
          "tiny_b": (("lab2",), {"served_model_name": "tiny-b"})}
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _two_models(lab_inv, dest):
    """The deploy inventory with `vllm` split into one child group per model."""
    path = write_deploy_inventory(lab_inv, dest)
    data = yaml.safe_load(path.read_text())
    hosts = data["all"]["children"]["vllm"].pop("hosts")
    data["all"]["children"]["vllm"]["children"] = {
        group: {"hosts": {h: hosts[h] for h in members}, "vars": vars} for group, (members, vars) in MODELS.items()}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def two(lab, tmp_path_factory):
    work = tmp_path_factory.mktemp("models")
    inv = _two_models(lab_inventory_with_lab4(lab, work), work)
    code, report, out = run_report("deploy", inv, work / "deploy.json", timeout=2400)
    try:
        assert code == 0, out[-4000:]
        yield {"inv": inv, "work": work, "report": report, "url": gateway_url(inv)}
    finally:
        retire(inv)


def test_one_deploy_brings_up_both_models(two):
    rep = two["report"]
    assert rep["summary"]["failed"] == 0
    for host in ("lab1", "lab2", "lab4"):
        assert all(c["ok"] for c in rep["hosts"][host]["smoke"]["host"].values())
    conf = vfleet("run", "--inventory", str(two["inv"]), "--limit", "gateways", "--command",
                  "grep -E '^upstream|  # lab' /etc/nginx/conf.d/vfleet-gateway.conf").stdout
    assert "upstream vfleet_model_1" in conf and "upstream vfleet_model_2" in conf


def test_routes_by_model_field_and_streams_through_the_gateway(two):
    """Routing by the body's model field, and a long stream from tiny-b that arrives event by
    event and whole. That nginx passes each event on at once (no buffering) is asserted by
    tests/unit/test_gateway_models.py against a backend that holds its second event until the
    client has the first: a real vLLM cannot be held, and on the loaded lab its engine often
    finishes before its API server has sent the first events, so its metrics cannot say."""
    with httpx.Client(base_url=two["url"], headers=AUTH, timeout=120) as c:
        for model in ("tiny-a", "tiny-b"):
            r = c.post("/v1/chat/completions", json={"model": model, "max_tokens": 4,
                                                     "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200 and r.json()["model"] == model, r.text
        body = {"model": "tiny-b", "prompt": "once upon a time", "max_tokens": 480, "ignore_eos": True,
                "stream": True}
        with c.stream("POST", "/v1/completions", json=body) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            events = [ln[6:] for ln in r.iter_lines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert {ch["model"] for ch in chunks} == {"tiny-b"}
    assert len(chunks) > 10
    assert [c["finish_reason"] for ch in chunks for c in ch["choices"] if c.get("finish_reason")] == ["length"]


def test_models_list_unknown_model_and_ceiling(two):
    with httpx.Client(base_url=two["url"], headers=AUTH, timeout=120) as c:
        r = c.get("/v1/models")
        assert r.status_code == 200 and [m["id"] for m in r.json()["data"]] == ["tiny-a", "tiny-b"]
        assert httpx.get(two["url"] + "/v1/models", timeout=30).status_code == 401   # a host checked the key

        r = c.post("/v1/completions", json={"model": "tiny-c", "prompt": "x"})
        assert r.status_code == 404
        err = r.json()["error"]
        assert (err["type"], err["param"], err["code"]) == ("invalid_request_error", "model", "model_not_found")

        r = c.post("/v1/completions", json={"model": "tiny-a", "prompt": "x", "max_tokens": 9})
        assert r.status_code == 400 and r.json()["error"]["code"] == "max_tokens_too_large"
        assert "at most 8" in r.json()["error"]["message"]
        r = c.post("/v1/a/completions", json={"model": "tiny-a", "prompt": "x", "max_tokens": 8})
        assert r.status_code == 200 and r.json()["model"] == "tiny-a"
        r = c.post("/v1/completions", json={"model": "tiny-b", "prompt": "x", "max_tokens": 9})
        assert r.status_code == 200       # tiny-b has no ceiling


def _main_pid(inv, host: str) -> str:
    out = vfleet("run", "--inventory", str(inv), "--limit", host, "--command",
                 "systemctl show -p MainPID --value vllm.service").stdout
    return next(ln.split()[1] for ln in out.splitlines() if ln.startswith(f"[{host}] "))


def test_restart_refuses_a_models_only_host(two):
    inv = two["inv"]
    code, report, out = run_report("restart", inv, two["work"] / "refused.json", "--limit", "tiny_b",
                                   "--batch", "100%", "--drain-timeout", "5")
    assert code != 0
    assert report["rollout"]["batches"] == [["lab2"]]
    steps = " ".join(s.get("message", "") for s in report["hosts"]["lab2"]["steps"])
    assert "last healthy host of model 'tiny-b'" in steps, steps
    assert report["rollout"]["drained"] == []
    with httpx.Client(base_url=two["url"], headers=AUTH, timeout=120) as c:
        for model in ("tiny-a", "tiny-b"):
            r = c.post("/v1/completions", json={"model": model, "prompt": "x", "max_tokens": 2})
            assert r.status_code == 200, (model, r.text)


# Soak (make soak): a rolling restart under steady load of both models, ~160 s on the lab.
@pytest.mark.soak
def test_rolling_restart_of_a_two_host_model_fails_no_request_of_either_model(two):
    inv = two["inv"]
    before = {h: _main_pid(inv, h) for h in ("lab1", "lab2", "lab4")}
    # a steady stream with pauses per model (the 2-core lab boots the restarted host meanwhile)
    loads = {model: LoadGenerator(two["url"], model, API_KEY, concurrency=1, max_tokens=8, pause_s=1.5).start()
             for model in ("tiny-a", "tiny-b")}
    try:
        code, report, out = run_report("restart", inv, two["work"] / "restart.json", "--limit", "tiny_a",
                                       "--batch", "1", timeout=1800)
    finally:
        for gen in loads.values():
            gen.stop()
    summary = {model: gen.summary() for model, gen in loads.items()}
    assert code == 0, out[-3000:]
    assert report["rollout"]["batches"] == [["lab1"], ["lab4"]]
    assert report["rollout"]["drained"] == []
    for host in ("lab1", "lab4"):
        assert report["hosts"][host]["rollout"]["ready_s"] > 0
    for model, load in summary.items():
        assert load["requests"] >= 10 and load["failed"] == 0 and load["truncated"] == 0, (model, load)
    # tiny-b's one host was never drained nor restarted: same process, no rollout entry
    assert "rollout" not in report["hosts"]["lab2"]
    after = {h: _main_pid(inv, h) for h in ("lab1", "lab2", "lab4")}
    assert after["lab2"] == before["lab2"]
    assert after["lab1"] != before["lab1"] and after["lab4"] != before["lab4"]
