"""Ground truth for streamed-token timing: when did each chunk of a streamed chat completion
really reach this machine? A plain blocking socket (no event loop, no HTTP library) reads the
response and stamps every recv(); vfleet's own client (vfleet/clients/bench/client.send) sends the same
requests, alternating with it, so both are measured against the same server in the same
minute. With --capture IFACE, tcpdump records the run (vfleet/clients/bench/wire.py) and every
request's own numbers are set beside the wire's for the same connection: how late each client
saw what the server had already sent.

    python benchmarks/stream_timing.py --url http://10.213.0.11:8000 --model tiny \
        --api-key-file /var/lib/vfleet-lab/demo/api_key [--requests 8] [--input-len 128] [--output-len 64] \
        [--capture vfv-lab1]

Prints JSON: per client, TTFT/TPOT/E2E medians (ms) and how many recv()s / SSE chunks carried
content, so "the stream came in one burst" is a number, not an impression.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from common import emit  # noqa: E402  benchmarks/common.py

from vfleet.clients.bench import wire  # noqa: E402
from vfleet.clients.bench.client import Endpoint, request_body, send  # noqa: E402
from vfleet.clients.bench.limits import tokenizer_counter  # noqa: E402
from vfleet.clients.bench.prompts import SyntheticPrompts  # noqa: E402
from vfleet.clients.bench.sweep import cpu_and_wait  # noqa: E402


def raw_request(url: str, api_key: str | None, body: dict) -> dict:
    """One request over HTTP/1.0 (the server closes at the end: no chunked framing to undo),
    each recv() stamped with perf_counter; SSE events split on blank lines afterwards."""
    u = urlsplit(url)
    payload = json.dumps(body).encode()
    head = (
        f"POST {u.path or '/'} HTTP/1.0\r\nHost: {u.hostname}:{u.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nAccept: text/event-stream\r\n"
        + (f"Authorization: Bearer {api_key}\r\n" if api_key else "")
        + "\r\n"
    ).encode()
    sock = socket.create_connection((u.hostname, u.port or 80), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    port = sock.getsockname()[1]
    t0 = time.perf_counter()
    sock.sendall(head + payload)
    reads: list[tuple[float, bytes]] = []
    while True:
        b = sock.recv(65536)
        if not b:
            break
        reads.append((time.perf_counter() - t0, b))
    end = time.perf_counter() - t0
    sock.close()
    # when did each SSE event complete? (an event ends with a blank line)
    buf, events = b"", []
    for t, b in reads:
        buf += b
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            events.append((t, ev))
    content_t, usage, content_reads = [], None, set()
    for t, ev in events:
        for line in ev.decode(errors="replace").splitlines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            try:
                d = json.loads(line[6:])
            except ValueError:
                continue
            if any((c.get("delta") or {}).get("content") for c in d.get("choices") or []):
                content_t.append(t)
                content_reads.add(t)
            usage = d.get("usage") or usage
    n = (usage or {}).get("completion_tokens")
    ttft = content_t[0] if content_t else None
    return {
        "port": port,
        "ttft": ttft,
        "e2e": end,
        "n": n,
        "content_chunks": len(content_t),
        "content_reads": len(content_reads),
        "reads": len(reads),
        "tpot": (end - ttft) / (n - 1) if ttft is not None and n and n > 1 else None,
    }


async def vfleet_request(client: httpx.AsyncClient, ports: list[int], ep: Endpoint, body: dict, index: int) -> dict:
    """One request through vfleet/clients/bench/client.send on a client kept open across requests, as
    a sweep does (keep-alive: connection setup is in the first request only)."""
    r = await send(client, ep, body, index)
    return {
        "port": ports[-1] if ports else None,
        "ttft": r.ttft,
        "e2e": r.e2e,
        "n": r.completion_tokens,
        "content_chunks": len(r.chunk_times),
        "content_reads": len(set(r.chunk_times)),
        "tpot": r.tpot,
        "ok": r.ok,
        "error": r.error,
    }


def med_ms(rows: list[dict], k: str) -> float | None:
    v = [r[k] for r in rows if r.get(k) is not None]
    return round(statistics.median(v) * 1000, 3) if v else None


def summary(rows: list[dict]) -> dict:
    return {
        "requests": len(rows),
        "ttft_p50_ms": med_ms(rows, "ttft"),
        "tpot_p50_ms": med_ms(rows, "tpot"),
        "e2e_p50_ms": med_ms(rows, "e2e"),
        "wire_ttft_p50_ms": med_ms(rows, "wire_ttft"),
        "wire_tpot_p50_ms": med_ms(rows, "wire_tpot"),
        "wire_e2e_p50_ms": med_ms(rows, "wire_e2e"),
        "ttft_late_p50_ms": med_ms(rows, "ttft_late"),
        "send_late_p50_ms": med_ms(rows, "send_late"),
        "read_late_p50_ms": med_ms(rows, "read_late"),
        "runqueue_wait_p50_ms": med_ms(rows, "runqueue_wait"),
        "content_chunks_p50": statistics.median(r["content_chunks"] for r in rows),
        "distinct_arrival_times_p50": statistics.median(r["content_reads"] for r in rows),
    }


async def run_all(
    args, ep: Endpoint, key: str | None, prompts: SyntheticPrompts, clients: list[str], rows: dict[str, list[dict]]
) -> None:
    ports: list[int] = []

    async def note_port(response: httpx.Response) -> None:
        ports.append(response.extensions["network_stream"].get_extra_info("client_addr")[1])

    async with httpx.AsyncClient(timeout=60, event_hooks={"response": [note_port]}) as client:
        for i in range(args.requests + 1):  # round 0 warms the server (and the pool) up, not counted
            for c in clients:
                idx = i * len(clients) + clients.index(c)
                body = request_body(args.model, prompts.get(idx).messages, args.output_len, True)
                t, wall, sched = time.perf_counter(), time.time(), cpu_and_wait()  # tcpdump stamps are wall-clock
                r = (
                    raw_request(ep.base_url + ep.path, key, body)
                    if c == "raw"
                    else await vfleet_request(client, ports, ep, body, idx)
                )
                r["t"], r["wall"] = t, wall
                after = cpu_and_wait()
                if sched and after:  # how long this reader waited for a CPU meanwhile
                    r["runqueue_wait"] = after[1] - sched[1]
                if i:
                    rows[c].append(r)
                else:  # still on the wire: matched, then dropped
                    rows.setdefault("_warm", []).append(r)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="http://host:port (a vLLM host or a gateway)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--api-key-file", type=Path)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--clients", default="raw,vfleet", help="which readers, alternating per request")
    ap.add_argument(
        "--tokenize-url", help="a vLLM host to calibrate prompt length with (a gateway may not pass /tokenize)"
    )
    ap.add_argument("--capture", metavar="IFACE", help="tcpdump on this interface (the server's side)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    key = args.api_key_file.read_text().strip() if args.api_key_file else None
    ep = Endpoint(args.url.rstrip("/"), args.model, key)
    prompts = SyntheticPrompts(args.input_len, seed=7)
    tok = Endpoint(args.tokenize_url.rstrip("/"), args.model, key) if args.tokenize_url else ep
    prompts.calibrate(tokenizer_counter(tok))  # prompt length in the server's tokens, as vfleet bench does
    clients = args.clients.split(",")
    rows: dict[str, list[dict]] = {c: [] for c in clients}
    port = int(urlsplit(args.url).port or 80)
    with wire.capture(args.capture, port) if args.capture else nullcontext([]) as captured:
        asyncio.run(run_all(args, ep, key, prompts, clients, rows))
    if captured:  # match by client port, in order on each connection
        by_port: dict[int, list[wire.WireRequest]] = {}
        for w in wire.requests(captured[0], port):
            by_port.setdefault(w.port, []).append(w)
        sent = sorted((r for v in rows.values() for r in v), key=lambda r: r["t"])
        for r in sent:
            queue = by_port.get(r["port"]) or []
            w = queue.pop(0) if queue else None
            if w is not None:
                r.update(wire_ttft=w.ttft, wire_tpot=w.tpot, wire_e2e=w.e2e)
                r["ttft_late"] = r["ttft"] - w.ttft if r["ttft"] is not None and w.ttft is not None else None
                # where the lateness is: before the request left, or after the first token came in
                r["send_late"] = w.sent - r["wall"]
                if r["ttft"] is not None and w.first_content is not None:
                    r["read_late"] = r["ttft"] - (w.first_content - r["wall"])
    rows.pop("_warm", None)
    return emit(
        {
            "benchmark": "stream_timing",
            "url": args.url,
            "input_len": args.input_len,
            "output_len": args.output_len,
            "clients": {c: summary(v) for c, v in rows.items()},
            "per_request": rows,
        },
        args.out,
    )


if __name__ == "__main__":
    sys.exit(main())
