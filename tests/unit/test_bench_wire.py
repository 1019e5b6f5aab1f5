"""The wire's view of streamed completions (vfleet/clients/bench/wire.py), read from a recorded
`tcpdump -nn -tt -x` text: on one keep-alive connection to a small SSE server on
127.0.0.5:18080, a GET (as vllm bench's first /v1/models) then two streamed requests (8 and 4
tokens, 20 ms before the first, 5 ms apart)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vfleet.clients.bench import wire

DATA = Path(__file__).parent / "data" / "bench" / "wire_two_streams.txt"


@pytest.fixture(scope="module")
def text() -> str:
    return DATA.read_text()


def test_both_streams_on_the_connection_are_found_in_order_after_the_get(text):
    reqs = wire.requests(text, 18080)
    assert [(r.status, r.tokens) for r in reqs] == [(200, 8), (200, 4)]
    assert reqs[0].port == reqs[1].port  # keep-alive: one connection, two requests
    assert reqs[0].sent < reqs[0].first_content < reqs[0].done < reqs[1].sent


def test_times_follow_the_server_pacing(text):
    first, second = wire.requests(text, 18080)
    # the server waits 20 ms before the first token and 5 ms between tokens
    assert first.ttft >= 0.020 and second.ttft >= 0.020
    assert first.tpot >= 0.005 and second.tpot >= 0.005
    assert first.e2e == pytest.approx(first.ttft + first.tpot * 7)


def test_other_ports_are_not_read(text):
    assert wire.requests(text, 8000) == []


def test_a_retransmitted_segment_is_read_once(text):
    blocks = re.split(r"(?m)^(?=\d+\.\d+ IP )", text)
    # every server segment with a payload sent twice: the same requests, the same times
    again = [b2 for b in blocks for b2 in ([b, b] if "127.0.0.5.18080 >" in b and "length 0" not in b else [b])]
    assert len(again) > len(blocks)
    assert wire.requests("".join(again), 18080) == wire.requests(text, 18080)
    s = wire.Stream()
    s.add(1.0, 100, b"abcd")
    s.add(2.0, 100, b"abcd")  # whole segment again
    s.add(3.0, 102, b"cdef")  # overlaps: only "ef" is new
    assert bytes(s.data) == b"abcdef" and s.time_at(5) == 3.0 and s.time_at(4) == 1.0


def test_summary_counts_completed_streams_only(text):
    reqs = wire.requests(text, 18080)
    reqs[1].done = None  # a stream cut before [DONE]
    s = wire.summary(reqs)
    assert (s["requests"], s["completed"], s["total_output_tokens"]) == (2, 1, 8)
    assert s["ttft_p50_ms"] == pytest.approx(reqs[0].ttft * 1000, abs=0.001)
    assert s["mean_inflight"] == 1.0  # one stream, sent to [DONE]: the whole span
    assert wire.summary([]) == {
        "requests": 0,
        "completed": 0,
        "total_output_tokens": 0,
        "output_throughput": None,
        "mean_inflight": None,
        "ttft_p50_ms": None,
        "tpot_p50_ms": None,
        "e2e_p50_ms": None,
    }
