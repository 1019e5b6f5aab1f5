"""`vfleet eval` and `eval.compare` end to end against a small local HTTP server on 127.0.0.1
that answers in vLLM's shapes (those of tests/unit/data/eval/): it tests our client (requests,
parsing, scoring, divergence, files, exit codes), not vLLM. The fake tokenizes one token a
character (id = code point), gives every generated token logprob -0.1, ends a reply with a stop
token (id 3) in logprobs.content as some versions do, and scores a continuation at -0.1 - shift:
a shift of 0.5 is a server that finds the reference replies 0.5 nats/token less likely."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from tests.unit.cli_run import vfleet_cli
from tests.unit.json_handler import JsonHandler
from tests.unit.listeners import Listeners, bench_inventory
from vfleet.clients.eval.evalset import load_evalset
from vfleet.clients.eval.runner import EvalSettings, EvalTarget, run_eval

KEY = "sk-fake-eval-0123"
EOS = 3
REPLIES = {"capital of France": "Paris.", "two plus two": "5", "a JSON city": '```json\n{"city": "Rome"}\n```'}
ITEMS = [
    {"id": "france", "messages": [{"role": "user", "content": "The capital of France?"}], "regex": "(?i)paris"},
    {"id": "sum", "messages": [{"role": "user", "content": "What is two plus two?"}], "answer": "4"},
    {
        "id": "json",
        "messages": [{"role": "user", "content": "Give a JSON city."}],
        "schema": {"type": "object", "required": ["city"]},
    },
    {"id": "long", "messages": [{"role": "user", "content": "too long " * 5}], "answer": "x"},
]


def _entry(tid: int, lp: float) -> dict:
    return {
        "token": f"token_id:{tid}",
        "logprob": lp,
        "bytes": [],
        "top_logprobs": [{"token": f"token_id:{tid}", "logprob": lp}, {"token": "token_id:32", "logprob": -2.5}],
    }


class FakeVLLM(Listeners):
    def __init__(self) -> None:
        self.shift = 0.0
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(JsonHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.bodies.append(body)
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self.send_json(401, {"error": {"message": "bad key"}})
                user = body["messages"][0]["content"]
                if "too long" in user:
                    return self.send_json(
                        400,
                        {
                            "error": {
                                "message": "This model's maximum context length is 512 tokens",
                                "type": "BadRequestError",
                                "code": 400,
                            }
                        },
                    )
                if body.get("continue_final_message"):
                    prompt = [ord(ch) for ch in f"user\n{user}\nassistant\n{body['messages'][-1]['content']}"]
                    scores = [None] + [
                        {str(t): {"logprob": -0.1 - fake.shift, "rank": 1, "decoded_token": chr(t)}} for t in prompt[1:]
                    ]
                    return self.send_json(
                        200,
                        {
                            "choices": [{"message": {"content": "x"}, "finish_reason": "length", "logprobs": None}],
                            "prompt_logprobs": scores,
                            "prompt_token_ids": None,
                        },
                    )
                reply = next(r for k, r in REPLIES.items() if k in user)
                content = [_entry(ord(ch), -0.1) for ch in reply] + [_entry(EOS, -0.01)]
                return self.send_json(
                    200,
                    {
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply},
                                "logprobs": {"content": content},
                                "finish_reason": "stop",
                            }
                        ]
                    },
                )

        super().__init__(Handler, Handler)


@pytest.fixture
def fake():
    with FakeVLLM() as f:
        yield f


@pytest.fixture
def evalset(tmp_path):
    p = tmp_path / "set.jsonl"
    p.write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    return str(p)


def test_run_eval_records_scores_and_per_item_errors(fake, evalset):
    target = EvalTarget(f"http://127.0.0.1:{fake.vllm_port}", "tiny", KEY, "node1")
    r = run_eval(
        target, load_evalset(evalset), EvalSettings(seed=5, max_tokens=24, concurrency=3), measured={"model": "tiny"}
    )
    by = {i.id: i for i in r.items}
    assert [i.id for i in r.items] == ["france", "sum", "json", "long"]  # file order at concurrency 3
    assert by["france"].passed and by["json"].passed and by["sum"].passed is False
    assert by["france"].token_ids == [ord(c) for c in "Paris."] + [EOS] and by["france"].finish_reason == "stop"
    assert by["france"].top_logprobs[0] == {str(ord("P")): -0.1, "32": -2.5}
    assert by["long"].error == "HTTP 400: This model's maximum context length is 512 tokens"
    assert by["long"].passed is False and r.score == 0.5 and r.divergence is None
    assert r.target == {"label": "node1", "url": target.base_url, "model": "tiny"} and KEY not in json.dumps(
        r.to_dict()
    )
    sent = [b for b in fake.bodies if "logprobs" in b]
    assert len(sent) == 4 and all(
        b["temperature"] == 0
        and b["seed"] == 5
        and b["max_tokens"] == 24
        and b["return_tokens_as_token_ids"]
        and b["top_logprobs"] == 5
        for b in sent
    )


def _eval(inv, out, *more):
    return vfleet_cli("eval", "--inventory", str(inv), "--out", str(out), "--max-tokens", "24", *more)


def test_cli_eval_reference_and_compare(fake, tmp_path, evalset):
    inv = bench_inventory(tmp_path, fake.port, fake.vllm_port, KEY, vllm_version='"0.32.0"')
    out = tmp_path / "res"
    a = _eval(inv, out, "--host", "node1", "--evalset", evalset, "--name", "a")
    assert a.returncode == 0, a.stdout + a.stderr
    assert "score 0.50 (2/4)" in a.stdout and "france" in a.stdout and "maximum context length" in a.stdout
    assert "note: node1: vLLM 0.32.0 has VLLM_BATCH_INVARIANT=1 and its vllm_env does not set it" in a.stdout
    ra = json.loads((out / "a.json").read_text())
    assert ra["measured"] == {"vllm_version": "0.32.0", "model": "tiny", "dtype": "auto", "kv_cache_dtype": "auto"}
    assert ra["items"][0]["token_ids"][:2] == [ord("P"), ord("a")] and ra["notes"]

    # through the gateway, against A: the same server scores A's replies at A's logprobs
    b = _eval(inv, out, "--evalset", evalset, "--name", "b", "--reference", str(out / "a.json"))
    assert b.returncode == 0, b.stdout + b.stderr
    rb = json.loads((out / "b.json").read_text())
    assert rb["target"]["label"] == "gateway gw" and rb["summary"]["divergence"] == pytest.approx(0.0)
    france = rb["items"][0]
    assert france["divergence"] == pytest.approx(0.0) and france["scored_tokens"] == len("Paris.")  # EOS not scored
    cont = [x for x in fake.bodies if x.get("continue_final_message")]
    assert len(cont) == 3 and cont[0]["messages"][-1] == {"role": "assistant", "content": "Paris."}
    assert all(x["prompt_logprobs"] == 1 and x["max_tokens"] == 1 and x["add_generation_prompt"] is False for x in cont)
    ok = vfleet_cli("eval.compare", str(out / "a.json"), str(out / "b.json"))
    assert ok.returncode == 0 and "eval gate: PASSED: score 0.50 -> 0.50" in ok.stdout, ok.stdout + ok.stderr

    fake.shift = 0.5  # a degraded server: 0.5 nats/token less sure of A's words
    c = _eval(inv, out, "--host", "node1", "--evalset", evalset, "--name", "c", "--reference", str(out / "a.json"))
    assert c.returncode == 0, c.stderr
    bad = vfleet_cli("eval.compare", str(out / "a.json"), str(out / "c.json"))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "eval gate: FAILED" in bad.stdout and "divergence 0.500 > 0.10 nats/token" in bad.stdout
    assert "france: divergence 0.500 nats/token" in bad.stdout
    loose = vfleet_cli("eval.compare", str(out / "a.json"), str(out / "c.json"), "--max-divergence", "0.6")
    assert loose.returncode == 0, loose.stdout
    off = vfleet_cli("eval.compare", str(out / "a.json"), str(out / "c.json"), "--max-divergence", "nan")
    assert off.returncode == 2 and "--max-divergence nan: both must be finite numbers" in off.stderr, off.stderr


def test_limit_writes_one_report_a_host_and_batch_invariance_on_says_nothing(fake, tmp_path, evalset):
    inv = bench_inventory(
        tmp_path, fake.port, fake.vllm_port, KEY, vllm_version='"0.32.0"', vllm_env="{VLLM_BATCH_INVARIANT: '1'}"
    )
    p = _eval(inv, tmp_path, "--limit", "vllm", "--evalset", evalset, "--report", str(tmp_path / "all.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "eval-node1.json").is_file() and "note:" not in p.stdout
    assert json.loads((tmp_path / "all.json").read_text())["reports"]["node1"]["summary"]["items"] == 4


def test_unreachable_target_and_bad_input_are_one_line(tmp_path, evalset):
    socks = [socket.socket(), socket.socket()]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()  # nothing listens there now
    inv = bench_inventory(tmp_path, ports[0], ports[1], KEY)
    p = _eval(inv, tmp_path, "--host", "node1", "--evalset", evalset)
    assert p.returncode == 2 and p.stderr.startswith("error: node1: cannot reach http://127.0.0.1:"), p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    bad = _eval(inv, tmp_path, "--host", "node1", "--evalset", str(tmp_path / "inv.yaml"))
    assert bad.returncode == 2 and f"{tmp_path / 'inv.yaml'}:1: not valid JSON" in bad.stderr
    cmp = vfleet_cli("eval.compare", str(tmp_path / "inv.yaml"), evalset)
    assert cmp.returncode == 2 and "not valid JSON" in cmp.stderr and "Traceback" not in cmp.stderr
