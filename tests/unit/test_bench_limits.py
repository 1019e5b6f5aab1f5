"""`vfleet bench` against what the target serves (vfleet/clients/bench/limits.py), on a small
fake of vLLM and of the gateway on 127.0.0.1: the demo's case (max_model_len 512, the docs'
--input-len 512 --output-len 128) shortens the prompts with one line instead of 24 HTTP 400s,
the prompts are counted through the vLLM host when the gateway answers 404 on /tokenize (as
vfleet's does), an output that cannot fit is refused before sending, and the server's own
error message is printed once per kind of failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.unit.json_handler import JsonHandler
from tests.unit.listeners import Listeners, bench_inventory

KEY = "sk-fake-limits"
MAX_LEN = 512
TEMPLATE = 5  # the fake's chat template, in tokens (one word is one token here)


def too_long(n: int) -> dict:
    """vLLM's 400 body for a request past max_model_len (vllm/entrypoints/openai/serving_engine.py)."""
    return {
        "error": {
            "message": f"This model's maximum context length is {MAX_LEN} tokens. However, you requested "
            f"{n} tokens. Please reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }


class Fake(Listeners):
    """Two listeners: the gateway's (no /tokenize, as nginx answers 404) and the vLLM host's."""

    def __init__(self, models_max_len: int | None = MAX_LEN) -> None:
        self.prompts: list[str] = []
        self.tokenize_calls = {"gateway": 0, "vllm": 0}
        fake = self

        def handler(role: str):
            class Handler(JsonHandler):
                def do_GET(self):
                    if self.path != "/v1/models":
                        return self.send_json(404, {"error": "no"})
                    entry = {"id": "tiny", "object": "model", "owned_by": "vllm"}
                    if models_max_len:
                        entry["max_model_len"] = models_max_len
                    self.send_json(200, {"object": "list", "data": [entry]})

                def do_POST(self):
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    if self.path == "/tokenize":
                        fake.tokenize_calls[role] += 1
                        if role == "gateway":
                            return self.send_json(404, {"error": "not found"})
                        return self.send_json(200, {"count": len(body["prompt"].split()), "tokens": []})
                    prompt = body["messages"][-1]["content"]
                    n = len(prompt.split()) + TEMPLATE + int(body["max_tokens"])
                    if n > MAX_LEN:
                        return self.send_json(400, too_long(n))
                    fake.prompts.append(prompt)
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for obj in (
                        {"choices": [{"index": 0, "delta": {"content": "ab"}}]},
                        {
                            "choices": [],
                            "usage": {
                                "prompt_tokens": n - int(body["max_tokens"]),
                                "completion_tokens": int(body["max_tokens"]),
                            },
                        },
                    ):
                        self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                    self.wfile.write(b"data: [DONE]\n\n")

            return Handler

        super().__init__(handler("gateway"), handler("vllm"))


def _inventory(tmp_path: Path, fake: Fake, **more: object) -> Path:
    return bench_inventory(tmp_path, fake.port, fake.vllm_port, KEY, **more)


def _bench(inv: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "vfleet.cli",
            "bench",
            "--inventory",
            str(inv),
            "--warmup",
            "0",
            "--no-server-metrics",
            "--out",
            str(out),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_the_docs_example_on_the_demo_shortens_prompts_and_calibrates_through_the_host(tmp_path) -> None:
    with Fake() as fake:
        p = _bench(
            _inventory(tmp_path, fake),
            tmp_path,
            "--concurrency",
            "1,4",
            "--requests",
            "12",
            "--input-len",
            "512",
            "--output-len",
            "128",
        )
    assert p.returncode == 0, p.stdout + p.stderr
    room = MAX_LEN - 128 - 32
    assert f"prompts shortened to {room} tokens; give --input-len {room} or less" in p.stdout
    assert f"127.0.0.1:{fake.vllm_port}/tokenize" in p.stdout and fake.tokenize_calls["gateway"] >= 1
    data = json.loads((tmp_path / "bench.json").read_text())
    assert [lv["completed"] for lv in data["levels"]] == [12, 12]
    assert data["prompts"]["input_len"] == room and data["prompts"]["input_len_asked"] == 512
    assert data["prompts"]["max_model_len"] == MAX_LEN and "/v1/models" in data["prompts"]["max_model_len_source"]
    assert data["prompts"]["calibrated"] and all(len(x.split()) <= room + 2 for x in fake.prompts)


def test_the_inventory_says_when_the_target_does_not(tmp_path) -> None:
    with Fake(models_max_len=None) as fake:
        p = _bench(
            _inventory(tmp_path, fake, max_model_len=MAX_LEN),
            tmp_path,
            "--concurrency",
            "2",
            "--requests",
            "4",
            "--input-len",
            "512",
            "--output-len",
            "128",
        )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "(the inventory's max_model_len)" in p.stdout


def test_an_output_that_cannot_fit_is_refused_before_sending(tmp_path) -> None:
    with Fake() as fake:
        p = _bench(_inventory(tmp_path, fake), tmp_path, "--concurrency", "1", "--output-len", "600")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert "--output-len 600 does not fit max_model_len 512" in line and "give --output-len 464 or less" in line
    assert fake.prompts == []


def test_the_servers_message_once_per_kind(tmp_path) -> None:
    """Prompts from a file cannot be shortened: every request is refused, and vLLM's reason is
    printed once for the sweep, not once per request or per level."""
    data = tmp_path / "long.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "word " * 600}]}) + "\n")
    with Fake() as fake:
        p = _bench(
            _inventory(tmp_path, fake),
            tmp_path,
            "--concurrency",
            "1,4",
            "--requests",
            "8",
            "--dataset",
            str(data),
            "--output-len",
            "16",
        )
    assert p.returncode == 1 and fake.prompts == []
    assert p.stdout.count("the server said: This model's maximum context length is 512 tokens") == 1
    assert "http_400 (8 of 8 requests)" in p.stdout
