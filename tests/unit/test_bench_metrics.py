"""Per-level numbers from a recorded set of request timings, and the server's /metrics
under the metric names of old and new vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from vfleet.clients.bench.client import RequestRecord
from vfleet.clients.bench.server_metrics import MetricsSampler, parse
from vfleet.clients.bench.stats import distribution, summarize

DATA = Path(__file__).parent / "data" / "bench"


def rec(i, start, ttft, chunks, end, out, prompt=100, ok=True, error=None, warmup=False):
    return RequestRecord(
        i, start, end, ok, error, "", ttft, chunks, prompt if ok else None, out if ok else None, warmup
    )


RECORDS = [
    # warm-up: never counted, however slow
    rec(0, 0.0, 5.0, [5.0, 6.0], 6.0, 2, warmup=True),
    # 5 tokens in 3 chunks (a chunk can carry several tokens): TPOT uses usage's 5, ITL the chunks
    rec(1, 1.0, 0.2, [0.2, 0.3, 0.6], 1.6, 5),
    rec(2, 1.0, 0.4, [0.4, 0.5], 1.5, 3),
    rec(3, 1.5, 0.1, [0.1, 0.2, 0.3, 0.4], 2.0, 4),
    rec(4, 2.0, None, [], 2.5, None, ok=False, error="http_503"),
    rec(5, 2.0, None, [], 3.0, None, ok=False, error="timeout"),
]


def test_summary_from_recorded_timings():
    s = summarize(RECORDS)
    assert s["requests"] == 5 and s["completed"] == 3 and s["failed"] == 2 and s["warmup_requests"] == 1
    assert s["errors"] == {"http_503": 1, "timeout": 1}
    # window: first measured start 1.0 to last measured end 3.0
    assert s["duration_s"] == pytest.approx(2.0)
    assert s["total_output_tokens"] == 12 and s["output_throughput"] == pytest.approx(6.0)
    assert s["request_throughput"] == pytest.approx(1.5)
    assert s["total_token_throughput"] == pytest.approx((12 + 300) / 2.0)
    assert s["mean_output_tokens"] == 4.0 and s["mean_prompt_tokens"] == 100.0
    # TTFT of the ok ones: 200, 400, 100 ms
    assert s["ttft_ms"]["p50"] == pytest.approx(200.0) and s["ttft_ms"]["mean"] == pytest.approx(700 / 3, abs=1e-3)
    # TPOT = (e2e - ttft) / (tokens - 1): (0.6-0.2)/4=100ms, (0.5-0.4)/2=50ms, (0.5-0.1)/3=133.3ms
    assert s["tpot_ms"]["p50"] == pytest.approx(100.0)
    assert s["tpot_ms"]["mean"] == pytest.approx((100 + 50 + 400 / 3) / 3, abs=1e-3)
    # ITL: gaps between chunks: 100, 300 | 100 | 100, 100, 100 ms
    assert s["itl_ms"]["p50"] == pytest.approx(100.0) and s["itl_ms"]["p99"] == pytest.approx(290.0)
    assert s["e2e_ms"]["p50"] == pytest.approx(500.0)
    # Little's law over the window: (0.6 + 0.5 + 0.5 + 0.5 + 1.0) / 2.0
    assert s["mean_inflight"] == pytest.approx(1.55)


def test_percentiles_are_numpy_linear():
    numpy = pytest.importorskip("numpy")
    values = [0.013, 0.5, 0.021, 0.9, 0.11, 0.07, 0.3, 0.045, 0.2, 1.7, 0.033]
    d = distribution(values)
    for p in (50, 90, 95, 99):
        assert d[f"p{p}"] == pytest.approx(numpy.percentile(values, p) * 1000, abs=1e-3)
    assert distribution([]) == {"mean": None, "p50": None, "p90": None, "p95": None, "p99": None}
    assert distribution([0.25])["p99"] == 250.0


def test_tpot_needs_two_tokens():
    assert rec(1, 0.0, 0.1, [0.1], 0.2, 1).tpot is None


def test_metrics_new_names():
    values, names = parse((DATA / "metrics_vllm_new.txt").read_text())
    assert values == {"running": 3.0, "waiting": 2.0, "kv_cache_usage": 0.4375, "preemptions": 7.0}
    assert names["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert names["preemptions"] == "vllm:num_preemptions_total"


def test_metrics_old_names():
    values, names = parse((DATA / "metrics_vllm_old.txt").read_text())
    assert values["kv_cache_usage"] == 0.91 and names["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"
    assert values["running"] == 5.0 and values["preemptions"] == 3.0


def test_metrics_summed_over_label_sets():
    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0"} 2\nvllm:num_requests_running{engine="1"} 3\n'
    )
    assert parse(text)[0] == {"running": 5.0}


def test_sampler_summary_over_hosts_and_counter_delta():
    s = MetricsSampler({"a": "", "b": ""})
    s.samples = {
        "a": [
            {"running": 1, "waiting": 0, "kv_cache_usage": 0.1, "preemptions": 10},
            {"running": 4, "waiting": 2, "kv_cache_usage": 0.5, "preemptions": 12},
        ],
        "b": [
            {"running": 3, "waiting": 1, "kv_cache_usage": 0.9, "preemptions": 0},
            {"running": 3, "waiting": 1, "kv_cache_usage": 0.7, "preemptions": 1},
        ],
    }
    out = s.summary()
    assert out["running_max"] == 7 and out["waiting_max"] == 3
    assert out["kv_cache_usage_max"] == 0.9 and out["preemptions"] == 3
    assert out["hosts"]["a"]["running_mean"] == 2.5


def test_a_levels_speculative_acceptance_is_the_accepted_share_of_its_draft_tokens():
    """Counters read at the level's first and last tick (vLLM's spec_decode counters only exist
    with speculative decoding on; without them the level has no spec_acceptance)."""
    s = MetricsSampler({"a": "", "b": ""})
    s.samples = {
        "a": [
            {"spec_draft_tokens": 100, "spec_accepted_tokens": 60},
            {"spec_draft_tokens": 160, "spec_accepted_tokens": 96},
        ],
        "b": [
            {"spec_draft_tokens": 0, "spec_accepted_tokens": 0},
            {"spec_draft_tokens": 40, "spec_accepted_tokens": 14},
        ],
    }
    assert s.summary()["spec_acceptance"] == round((36 + 14) / (60 + 40), 4)
    s.samples = {"a": [{"running": 1}, {"running": 2}]}
    assert "spec_acceptance" not in s.summary()
    values, names = parse((Path(__file__).parent / "data" / "speculative" / "metrics-ngram.txt").read_text())
    assert (values["spec_draft_tokens"], values["spec_accepted_tokens"]) == (138.0, 92.0)
    assert names["spec_draft_tokens"] == "vllm:spec_decode_num_draft_tokens_total"
