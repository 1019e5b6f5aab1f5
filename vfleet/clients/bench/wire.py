"""The wire's view of streamed chat completions: TTFT, TPOT and E2E of every request as the
packets passed the server's network interface, the ground truth a load generator's own
numbers are checked against (benchmarks/bench_vs_vllm.py --capture, on the lab).

tcpdump captures (it is started and stopped by pid); `tcpdump -r -x` prints each packet in
hex from the IP header on, which is all this reads: the IP and TCP header lengths, the
sequence number (a retransmitted segment is read once) and the payload. Per connection, a
request starts with the client's `POST`; it is sent when its last client segment is (the
server can't start before); its first token is the first server segment that completes an
SSE event with non-empty content (requests and replies pair up in order); it ends with `data: [DONE]`; the token count is the
server's own `usage.completion_tokens` in the stream. Segments are joined per connection
before matching, so an event split over two segments counts at the second.

The capture holds the requests' Authorization headers: it lives in a temporary directory
that is removed after reading, and nothing but times and counts leaves this module.
"""

from __future__ import annotations

import bisect
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

PACKET = re.compile(r"^(\d+\.\d+) IP (\d+\.\d+\.\d+\.\d+)\.(\d+) > (\d+\.\d+\.\d+\.\d+)\.(\d+):")
HEX = re.compile(r"^\s+0x[0-9a-f]+:\s+((?:[0-9a-f]{2,4}\s?)+)")
CONTENT = re.compile(rb'"content":"(?!")')  # an SSE delta with text in it
DONE = re.compile(rb"data: \[DONE\]")
TOKENS = re.compile(rb'"completion_tokens":(\d+)')
STATUS = re.compile(rb"HTTP/1\.[01] (\d{3})")
REQUEST = re.compile(rb"(GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) \S+ HTTP/1\.[01]\r\n")


@dataclass
class Stream:
    """One direction of one connection: its bytes in order, and when each segment ended."""

    data: bytearray = field(default_factory=bytearray)
    ends: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    next_seq: int | None = None

    def add(self, t: float, seq: int, payload: bytes) -> None:
        if self.next_seq is not None:
            if seq + len(payload) <= self.next_seq:
                return  # a retransmission: already have it
            if seq < self.next_seq:  # partly new: keep the new part only
                payload, seq = payload[self.next_seq - seq :], self.next_seq
        self.data += payload
        self.ends.append(len(self.data))
        self.times.append(t)
        self.next_seq = seq + len(payload)

    def time_at(self, offset: int) -> float:
        """When byte `offset` (exclusive end) had arrived: the segment that carried it."""
        return self.times[bisect.bisect_left(self.ends, offset)]


@dataclass
class WireRequest:
    client: str  # client IP
    port: int  # client port
    sent: float  # last client segment of the request
    status: int | None = None
    first_content: float | None = None
    done: float | None = None
    tokens: int | None = None

    @property
    def ttft(self) -> float | None:
        return None if self.first_content is None else self.first_content - self.sent

    @property
    def e2e(self) -> float | None:
        return None if self.done is None else self.done - self.sent

    @property
    def tpot(self) -> float | None:
        if self.first_content is None or self.done is None or not self.tokens or self.tokens < 2:
            return None
        return (self.done - self.first_content) / (self.tokens - 1)


def packets(text: str) -> Iterator[tuple[float, str, int, str, int, int, bytes]]:
    """(time, src, sport, dst, dport, seq, payload) from `tcpdump -nn -tt -x -r` text."""

    def flush(head, hexparts):
        if head is None:
            return None
        raw = bytes.fromhex("".join(hexparts))
        if len(raw) < 20 or raw[0] >> 4 != 4 or raw[9] != 6:
            return None  # IPv4 TCP only (the lab's addresses)
        ihl = (raw[0] & 0x0F) * 4
        total = int.from_bytes(raw[2:4], "big")
        tcp = raw[ihl:]
        seq = int.from_bytes(tcp[4:8], "big")
        payload = raw[ihl + (tcp[12] >> 4) * 4 : total]
        return (*head, seq, payload)

    head, hexparts = None, []
    for line in text.splitlines():
        m = PACKET.match(line)
        if m:
            p = flush(head, hexparts)
            if p:
                yield p
            head = (float(m[1]), m[2], int(m[3]), m[4], int(m[5]))
            hexparts = []
            continue
        h = HEX.match(line)
        if h and head is not None:
            hexparts.append(h[1].replace(" ", ""))
    p = flush(head, hexparts)
    if p:
        yield p


def requests(text: str, server_port: int) -> list[WireRequest]:
    """Every streamed request to server_port in a capture, in the order they were sent."""
    conns: dict[tuple[str, int], tuple[Stream, Stream, list[float]]] = {}
    for t, src, sport, dst, dport, seq, payload in packets(text):
        if not payload:
            continue
        if dport == server_port:
            c = conns.setdefault((src, sport), (Stream(), Stream(), []))
            c[0].add(t, seq, payload)
        elif sport == server_port:
            c = conns.setdefault((dst, dport), (Stream(), Stream(), []))
            c[1].add(t, seq, payload)
    out: list[WireRequest] = []
    for (ip, port), (up, down, _) in conns.items():
        # requests and replies pair up in order on a connection (HTTP/1.1, no pipelining):
        # every method counts for the pairing (a GET /v1/models first, say), POSTs are kept
        sent = [(m.start(), m[1]) for m in REQUEST.finditer(bytes(up.data))]
        replies = [m.start() for m in STATUS.finditer(bytes(down.data))]
        for i, (_, method) in enumerate(sent):
            # the request's bytes end where the next request starts; it was sent when they had
            end_up = sent[i + 1][0] if i + 1 < len(sent) else len(up.data)
            if i >= len(replies):
                break
            if method != b"POST":
                continue
            lo = replies[i]
            hi = replies[i + 1] if i + 1 < len(replies) else len(down.data)
            body = bytes(down.data[lo:hi])
            r = WireRequest(ip, port, up.time_at(end_up), status=int(STATUS.match(body)[1]))
            m = CONTENT.search(body)
            if m:
                r.first_content = down.time_at(lo + m.end())
            d = DONE.search(body)
            if d:
                r.done = down.time_at(lo + d.end())
            toks = TOKENS.findall(body)
            if toks:
                r.tokens = int(toks[-1])
            out.append(r)
    return sorted(out, key=lambda r: r.sent)


def summary(reqs: list[WireRequest]) -> dict:
    """p50s in ms and output tokens/s over the span from the first send to the last [DONE]."""
    ok = [r for r in reqs if r.status == 200 and r.done is not None]

    def p50(values: list[float | None]) -> float | None:
        v = [x for x in values if x is not None]
        return round(statistics.median(v) * 1000, 3) if v else None

    span = (max(r.done for r in ok) - min(r.sent for r in ok)) if ok else 0
    tokens = sum(r.tokens or 0 for r in ok)
    return {
        "requests": len(reqs),
        "completed": len(ok),
        "total_output_tokens": tokens,
        "output_throughput": round(tokens / span, 2) if span > 0 else None,
        # requests the server had at once on average: below the tool's concurrency, the client left gaps
        "mean_inflight": round(sum(r.done - r.sent for r in ok) / span, 2) if span > 0 else None,
        "ttft_p50_ms": p50([r.ttft for r in ok]),
        "tpot_p50_ms": p50([r.tpot for r in ok]),
        "e2e_p50_ms": p50([r.e2e for r in ok]),
    }


@contextmanager
def capture(interface: str, port: int) -> Iterator[list[str]]:
    """tcpdump on `interface` for tcp port `port` while the block runs; yields a list that
    holds the decoded text afterwards (the pcap itself is deleted)."""
    d = Path(tempfile.mkdtemp(prefix="vfleet-wire-"))
    pcap = d / "c.pcap"
    out: list[str] = []
    proc = subprocess.Popen(
        ["tcpdump", "-i", interface, "-nn", "-s", "0", "-U", "-w", str(pcap), f"tcp port {int(port)}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while not pcap.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is not None:
            raise SystemExit(f"tcpdump -i {interface}: {proc.stderr.read().decode(errors='replace').strip()}")
        time.sleep(1.0)  # the filter is set before the file is opened; margin
        yield out
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if pcap.exists():
            out.append(
                subprocess.run(["tcpdump", "-nn", "-tt", "-x", "-r", str(pcap)], capture_output=True, text=True).stdout
            )
        shutil.rmtree(d, ignore_errors=True)
