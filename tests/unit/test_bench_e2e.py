"""`vfleet bench` end to end against a small fake OpenAI-compatible streaming server on
127.0.0.1 (stdlib http.server in a thread). The fake has a batch of 4 slots (a stand-in for
max_num_seqs): past 4 concurrent requests, the rest wait, so throughput flattens while TTFT
grows and the sweep must find its knee at 4. Each chunk carries TWO tokens, so a client that
counted chunks would report half the tokens: the sweep must take them from `usage`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.unit.json_handler import JsonHandler
from tests.unit.listeners import Listeners, bench_inventory

SLOTS = 4
TOKEN_S = 0.015
KEY = "sk-fake-bench"


class FakeVLLM(Listeners):
    def __init__(self) -> None:
        self.slots = threading.Semaphore(SLOTS)
        self.lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.preemptions = 0
        self.prompts: list[str] = []
        self.bodies: list[dict] = []
        fake = self

        class Handler(JsonHandler):
            def do_GET(self):
                if self.path == "/metrics":
                    with fake.lock:
                        text = (
                            "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n"
                            f'vllm:num_requests_running{{model_name="tiny"}} {fake.running}\n'
                            "# HELP vllm:num_requests_waiting Waiting.\n# TYPE vllm:num_requests_waiting gauge\n"
                            f'vllm:num_requests_waiting{{model_name="tiny"}} {fake.waiting}\n'
                            "# HELP vllm:kv_cache_usage_perc KV.\n# TYPE vllm:kv_cache_usage_perc gauge\n"
                            f'vllm:kv_cache_usage_perc{{model_name="tiny"}} {fake.running / SLOTS}\n'
                            "# HELP vllm:num_preemptions Preempted.\n# TYPE vllm:num_preemptions counter\n"
                            f'vllm:num_preemptions_total{{model_name="tiny"}} {fake.preemptions}\n'
                        )
                    data = text.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self.send_json(404, {"error": "no"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self.send_json(401, {"error": "key"})
                if self.path == "/tokenize":
                    return self.send_json(200, {"count": len(body["prompt"].split()), "tokens": []})
                if self.path != "/v1/chat/completions":
                    return self.send_json(404, {"error": "no"})
                prompt = body["messages"][-1]["content"]
                if body["model"] == "json-not-sse":
                    return self.send_json(200, {"choices": []})
                if body["model"] == "stall":
                    time.sleep(3)
                    return self.send_json(200, {})
                with fake.lock:
                    fake.prompts.append(prompt)
                    fake.bodies.append(body)
                    fake.waiting += 1
                fake.slots.acquire()
                with fake.lock:
                    fake.waiting -= 1
                    fake.running += 1
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()  # HTTP/1.0: the body ends when the connection closes
                    n = int(body["max_tokens"])

                    def event(obj) -> None:
                        self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                        self.wfile.flush()

                    base = {"id": "x", "object": "chat.completion.chunk", "model": body["model"]}
                    time.sleep(TOKEN_S * 2)  # prefill
                    event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
                    for i in range(0, n, 2):  # two tokens a chunk
                        time.sleep(TOKEN_S)
                        event(
                            {
                                **base,
                                "choices": [
                                    {
                                        "index": 0,
                                        "delta": {"content": "ab"},
                                        "finish_reason": "length" if i + 2 >= n else None,
                                    }
                                ],
                            }
                        )
                    event(
                        {
                            **base,
                            "choices": [],
                            "usage": {
                                "prompt_tokens": len(prompt.split()) + 5,
                                "completion_tokens": n,
                                "total_tokens": 0,
                            },
                        }
                    )
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                finally:
                    with fake.lock:
                        fake.running -= 1
                    fake.slots.release()

        super().__init__(Handler, Handler)


@pytest.fixture
def fake():
    with FakeVLLM() as f:
        yield f


def _inventory(tmp_path: Path, port: int, vllm_port: int) -> Path:
    return bench_inventory(tmp_path, port, vllm_port, KEY)


def _vfleet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vfleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_sweep_end_to_end_usage_tokens_knee_files(fake, tmp_path):
    inv = _inventory(tmp_path, fake.port, fake.vllm_port)
    out = tmp_path / "out"
    p = _vfleet(
        "bench",
        "--inventory",
        str(inv),
        "--concurrency",
        "1,2,4,8,16",
        "--requests",
        "24",
        "--warmup",
        "2",
        "--input-len",
        "32",
        "--output-len",
        "10",
        "--out",
        str(out),
        "--slo-ttft-p95",
        "80ms",
        "--metrics-interval",
        "0.02",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    data = json.loads((out / "bench.json").read_text())
    levels = {lv["value"]: lv for lv in data["levels"]}
    assert sorted(levels) == [1, 2, 4, 8, 16]
    for lv in levels.values():
        assert lv["requests"] == 24 and lv["completed"] == 24 and lv["failed"] == 0 and lv["warmup_requests"] == 2
        # 10 tokens in 5 chunks: the count is the server's, not the chunks'
        assert lv["mean_output_tokens"] == 10 and lv["total_output_tokens"] == 240
        assert lv["mean_prompt_tokens"] > 32  # the fake adds a 5-token "chat template"
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
            d = lv[key]
            assert d["p50"] is not None and d["p50"] <= d["p90"] <= d["p95"] <= d["p99"], (key, d)
        assert lv["server"]["metric_names"]["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
        assert lv["server"]["metric_names"]["preemptions"] == "vllm:num_preemptions_total"
        # the load generator's own CPU time and its wait for a CPU (Linux schedstat)
        assert lv["client"]["cpu_s"] > 0 and lv["client"]["runqueue_wait_s"] >= 0
    # 4 slots: concurrency 8 queues (the server saw waiting requests), throughput flat, TTFT up
    for c in (8, 16):
        assert levels[c]["server"]["waiting_max"] >= 1 and levels[c]["server"]["running_max"] <= SLOTS, levels[c]
    a = data["analysis"]["concurrency"]
    # the knee is where the 4 slots fill: 4 (or 8, when a loaded machine's client-side gaps
    # leave slots idle at 4): never before, never the last level
    assert a["knee"]["found"] and a["knee"]["value"] in (4, 8), a
    k = a["knee"]["value"]
    assert a["suggested_max_num_seqs"] == k and a["suggested_client_concurrency"] == k
    assert a["server_running_max_at_knee"] == min(k, SLOTS)
    assert a["slo"]["highest_level"] in (4, 8) and "TTFT p95" in a["slo"]["levels"]["16"]
    assert f"suggested max_num_seqs per vLLM host: {k}" in p.stdout
    # every request asked for usage, exact lengths, and no two prompts were the same
    assert all(
        b["stream_options"] == {"include_usage": True} and b["ignore_eos"] and b["max_tokens"] == 10
        for b in fake.bodies
    )
    assert len(fake.prompts) == 5 * 26 and len(set(fake.prompts)) == len(fake.prompts)
    # calibrated against /tokenize: the fake counts words, so 32 tokens are about 32 words
    assert data["prompts"]["calibrated"] and 28 <= len(fake.prompts[0].split()) <= 36
    png = out / "bench.png"
    raw = png.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 20_000
    import matplotlib.image

    img = matplotlib.image.imread(str(png))
    assert img.shape[0] >= 600 and img.shape[1] >= 600 and img.std() > 0.05  # not blank
    rows = (out / "bench.csv").read_text().splitlines()
    assert len(rows) == 6 and rows[0].startswith("mode,value,requests")


def test_rate_level_and_compare(fake, tmp_path):
    inv = _inventory(tmp_path, fake.port, fake.vllm_port)
    for name, rate in (("a", "20"), ("b", "20,40")):
        p = _vfleet(
            "bench",
            "--inventory",
            str(inv),
            "--rate",
            rate,
            "--requests",
            "20",
            "--warmup",
            "0",
            "--input-len",
            "16",
            "--output-len",
            "4",
            "--out",
            str(tmp_path),
            "--name",
            name,
            "--no-server-metrics",
        )
        assert p.returncode == 0, p.stdout + p.stderr
    a = json.loads((tmp_path / "a.json").read_text())
    lv = a["levels"][0]
    assert lv["mode"] == "rate" and lv["completed"] == 20 and "server" not in lv
    # Poisson arrivals at 20/s: 20 requests take about a second (wide bounds: a loaded CI box)
    assert 0.3 < lv["duration_s"] < 5
    c = _vfleet("bench.compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert c.returncode == 0, c.stderr
    assert "20 req/s" in c.stdout and "out tok/s" in c.stdout and "only in" in c.stdout and "40 req/s" in c.stdout
    assert "TTFT p95 ms" in c.stdout
    # both runs read the same setup (the inventory's; no vllm unit or GPU here): no change to name
    assert a["measured"]["model"] == "tiny" and a["measured"]["dtype"] == "auto" and "node1" in a["measured"]["hosts"]
    assert "same setup" in c.stdout
    bad = _vfleet("bench.compare", str(tmp_path / "a.json"), str(tmp_path / "a.csv"))
    assert bad.returncode == 2 and "not JSON" in bad.stderr and "Traceback" not in bad.stderr


def test_unreachable_target_fails_cleanly(tmp_path):
    import socket

    socks = [socket.socket(), socket.socket()]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    port, vllm_port = (s.getsockname()[1] for s in socks)
    for s in socks:
        s.close()  # nothing listens there now
    inv = _inventory(tmp_path, port, vllm_port)
    p = _vfleet(
        "bench",
        "--inventory",
        str(inv),
        "--concurrency",
        "2",
        "--requests",
        "3",
        "--warmup",
        "0",
        "--out",
        str(tmp_path),
        "--no-server-metrics",
    )
    assert p.returncode == 1 and "connect" in p.stdout and "Traceback" not in p.stderr
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["levels"][0]["errors"] == {"connect": 3}


def test_timings_match_what_the_server_did(fake, tmp_path):
    """Ground truth: the fake sleeps 2 x TOKEN_S before its first content chunk... plus one
    TOKEN_S per chunk of two tokens. At concurrency 1: TTFT = 3 x TOKEN_S, ITL = TOKEN_S,
    TPOT = (5 - 1) x TOKEN_S / (10 - 1) tokens. The measurement adds only loopback and parsing."""
    inv = _inventory(tmp_path, fake.port, fake.vllm_port)
    p = _vfleet(
        "bench",
        "--inventory",
        str(inv),
        "--host",
        "node1",
        "--concurrency",
        "1",
        "--requests",
        "12",
        "--warmup",
        "1",
        "--input-len",
        "16",
        "--output-len",
        "10",
        "--out",
        str(tmp_path),
        "--no-server-metrics",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    lv = json.loads((tmp_path / "bench.json").read_text())["levels"][0]
    ms = TOKEN_S * 1000
    # lower bounds are the server's own sleeps; upper bounds leave room for a busy machine
    assert 3 * ms <= lv["ttft_ms"]["p50"] <= 3 * ms + 40, lv["ttft_ms"]
    assert ms <= lv["itl_ms"]["p50"] <= ms + 15, lv["itl_ms"]
    assert 4 * ms / 9 <= lv["tpot_ms"]["p50"] <= 4 * ms / 9 * 2, lv["tpot_ms"]
    assert lv["mean_output_tokens"] == 10


def test_failures_are_classified_and_bounded(fake):
    """A 200 that is not an event stream, and a server that stalls past the request's total
    timeout: each request ends, classified, and the level stops by itself."""
    from vfleet.clients.bench.client import Endpoint
    from vfleet.clients.bench.prompts import SyntheticPrompts
    from vfleet.clients.bench.sweep import Level, Sweep, SweepSettings

    url = f"http://127.0.0.1:{fake.port}"
    settings = SweepSettings(requests=2, warmup=0, output_len=4, timeout_s=0.5)
    r = Sweep(Endpoint(url, "json-not-sse", KEY), SyntheticPrompts(8), [], settings).run_level(Level("concurrency", 2))
    assert r["errors"] == {"not_sse": 2}
    t0 = time.monotonic()
    r = Sweep(Endpoint(url, "stall", KEY), SyntheticPrompts(8), [], settings).run_level(Level("concurrency", 2))
    assert r["errors"] == {"timeout": 2} and time.monotonic() - t0 < 2.5
    r = Sweep(Endpoint(url, "tiny", "wrong-key"), SyntheticPrompts(8), [], settings).run_level(Level("rate", 50))
    assert r["errors"] == {"http_401": 2} and r["completed"] == 0


@pytest.mark.parametrize("mode, value", [("concurrency", 4), ("rate", 200.0)])
def test_warm_up_ends_before_the_first_measured_request(fake, mode, value):
    """`vllm bench serve` finishes its warm-ups before its clock starts; so must vfleet, or
    the measured window holds work it does not count (H200: throughput 14% low at 16)."""
    from vfleet.clients.bench.client import Endpoint
    from vfleet.clients.bench.prompts import SyntheticPrompts
    from vfleet.clients.bench.sweep import Level, Sweep, SweepSettings

    settings = SweepSettings(requests=8, warmup=3, output_len=4)
    sweep = Sweep(Endpoint(f"http://127.0.0.1:{fake.port}", "tiny", KEY), SyntheticPrompts(8), [], settings)
    level = Level(mode, value)
    r = sweep.run_level(level)
    recs = sweep.records[level.label]
    warm, measured = [x for x in recs if x.warmup], [x for x in recs if not x.warmup]
    assert len(warm) == 3 and len(measured) == 8 and r["completed"] == 8
    assert max(x.end for x in warm) <= min(x.start for x in measured)
