"""How far `vfleet bench`'s load generator goes: its highest request rate against an nginx
location that answers a fixed streamed chat completion instantly (role chunk, N one-token
content chunks, a usage chunk, [DONE]). Whatever a sweep measures below this rate is the
server's, not the generator's.

Starts its own nginx (a config in a temp dir, one worker, 127.0.0.1 on a free port), runs
concurrency levels and Poisson rate levels through the same Sweep code `vfleet bench` uses,
stops nginx, prints JSON.

    python benchmarks/loadgen_ceiling.py [--requests 3000] [--concurrency 1,8,32,128] \
        [--rates 250,500,1000,2000] [--out result.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from common import emit  # noqa: E402  benchmarks/common.py

from vfleet.clients.bench.client import Endpoint  # noqa: E402
from vfleet.clients.bench.prompts import SyntheticPrompts  # noqa: E402
from vfleet.clients.bench.sweep import Level, Sweep, SweepSettings  # noqa: E402


def sse_body(tokens: int) -> str:
    chunk = lambda delta, finish=None: json.dumps(  # noqa: E731
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "fixed",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": " tok"}, "length" if i == tokens - 1 else None) for i in range(tokens)]
    events.append(
        json.dumps(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "model": "fixed",
                "choices": [],
                "usage": {"prompt_tokens": 16, "completion_tokens": tokens, "total_tokens": 16 + tokens},
            }
        )
    )
    events.append("[DONE]")
    return "".join(f"data: {e}\n\n" for e in events)


def nginx_conf(root: Path, port: int) -> str:
    # The body is a static file (nginx's `return` takes at most 4 KB); the static module
    # answers POST with 405, which error_page turns into the file itself, with a 200.
    return f"""daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        location = /v1/chat/completions {{
            root {root}/www;
            default_type text/event-stream;
            error_page 405 =200 $uri;
        }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=3000, help="requests per level")
    ap.add_argument("--concurrency", default="1,8,32,128")
    ap.add_argument("--rates", default="250,500,1000,2000")
    ap.add_argument("--tokens", type=int, default=16, help="content chunks (tokens) in the fixed body")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    root = Path(tempfile.mkdtemp(prefix="vfleet-ceiling-"))
    port = free_port()
    body = sse_body(args.tokens)
    (root / "www" / "v1" / "chat").mkdir(parents=True)
    (root / "www" / "v1" / "chat" / "completions").write_text(body)
    (root / "nginx.conf").write_text(nginx_conf(root, port))
    for d in (root, root / "www", root / "www" / "v1", root / "www" / "v1" / "chat"):
        d.chmod(0o755)  # nginx's worker runs unprivileged and must read the body file
    proc = subprocess.Popen(
        [nginx, "-p", str(root), "-c", str(root / "nginx.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(50):
            try:
                r = httpx.post(url + "/v1/chat/completions", json={}, timeout=1)
                if r.text == body:
                    break
                raise SystemExit(f"nginx answered HTTP {r.status_code}, not the fixed body")
            except httpx.TransportError:
                if proc.poll() is not None:
                    raise SystemExit(f"nginx exited: {proc.stderr.read().decode()[-500:]}")
                time.sleep(0.1)
        levels = [Level("concurrency", int(c)) for c in args.concurrency.split(",") if c] + [
            Level("rate", float(r)) for r in args.rates.split(",") if r
        ]
        settings = SweepSettings(
            requests=args.requests, warmup=50, output_len=args.tokens, max_seconds=120, timeout_s=30
        )
        sweep = Sweep(Endpoint(url, "fixed"), SyntheticPrompts(64), levels, settings)
        rows = []
        for lv in levels:
            t0 = time.process_time()
            r = sweep.run_level(lv)
            cpu = time.process_time() - t0
            rows.append(
                {
                    "level": lv.label,
                    "completed": r["completed"],
                    "failed": r["failed"],
                    "errors": r["errors"],
                    "request_throughput": r["request_throughput"],
                    "output_throughput": r["output_throughput"],
                    "ttft_p50_ms": r["ttft_ms"]["p50"],
                    "e2e_p99_ms": r["e2e_ms"]["p99"],
                    "client_cpu_s": round(cpu, 2),
                    "client_cpu_s_per_request": round(cpu / max(r["completed"] + 50, 1), 6),
                    "wall_s": r["wall_s"],
                }
            )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)
    best = max(rows, key=lambda x: x["request_throughput"])
    return emit(
        {
            "benchmark": "loadgen_ceiling",
            "machine": f"{platform.node()} {os.cpu_count()} CPUs",
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "body": f"{args.tokens} one-token chunks + usage, {len(body)} bytes",
            "levels": rows,
            "ceiling_requests_per_s": best["request_throughput"],
            "at": best["level"],
            "ceiling_output_tokens_per_s": best["output_throughput"],
        },
        args.out,
    )


if __name__ == "__main__":
    sys.exit(main())
