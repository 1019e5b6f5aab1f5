"""Capacity planner: the seed documents' worked examples (vllm-facts.md), exactly; the weight
estimate; safetensors headers; the CPU build; and vLLM's own start-up log lines."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.unit.preflight_cases import config
from vfleet.roles.preflight import _capacity as cap

FIX = Path(__file__).parent / "data" / "facts" / "fixtures"
QWEN = json.loads((FIX / "qwen2.5-7b-instruct.config.json").read_text())
KIB, GIB = 1024, 1024**3

# 80 layers, 8 KV heads, head_dim 128, fp16 (Llama-2/3-70B shape).
SEVENTY_B = {
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "vocab_size": 128256,
    "torch_dtype": "float16",
    "max_position_embeddings": 8192,
}
TINY = {
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "intermediate_size": 1024,
    "vocab_size": 4096,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 2048,
}


# --- worked examples (vllm-facts.md, "KV cache arithmetic") -------------------------------------


def test_worked_example_80_layers_8_kv_heads_fp16() -> None:
    s = cap.ModelShape.from_config(SEVENTY_B)
    assert s.head_dim == 128  # default: hidden_size / num_attention_heads
    assert cap.kv_bytes_per_token_per_layer(s, 2) == 4 * KIB  # "4 KB per token per layer"
    assert cap.kv_bytes_per_token(s, 2) == 327_680 == 320 * KIB  # "320 KB per token"
    one_seq = cap.kv_bytes(s, 8192, 2)
    assert one_seq == 2_684_354_560 == int(2.5 * GIB)  # "about 2.6 GB" (2.68e9 B)
    assert round(one_seq / 1e9, 2) == 2.68


def test_worked_example_qwen25_7b() -> None:
    s = cap.ModelShape.from_config(QWEN)
    assert (s.layers, s.kv_heads, s.head_dim, s.dtype) == (28, 4, 128, "bfloat16")
    assert cap.kv_bytes_per_token(s, cap.dtype_bytes(s.dtype)) == 57_344 == 56 * KIB  # "56 KB"
    total = 2048 * 64 * cap.kv_bytes_per_token(s, 2)
    assert total == 7_516_192_768 and total / GIB == 7.0  # "7.0 GiB"


def test_kv_heads_default_to_attention_heads_and_tp_split() -> None:
    mha = {k: v for k, v in TINY.items() if k != "num_key_value_heads"}
    s = cap.ModelShape.from_config(mha)
    assert s.kv_heads == 4 and s.head_dim == 64
    q = cap.ModelShape.from_config(QWEN)
    assert cap.kv_bytes_per_token(q, 2, tp=2) == 57_344 // 2
    assert cap.kv_bytes_per_token(q, 2, tp=8) == 57_344 // 4  # 4 KV heads on 8 GPUs: replicated, 1 per GPU


# --- weights ------------------------------------------------------------------------------------


def test_llama_like_estimate_matches_published_qwen_size() -> None:
    n = cap.estimate_param_count(cap.ModelShape.from_config(QWEN))
    assert n == 7_615_616_512  # Qwen2.5-7B: 7.61B parameters (model card)
    assert cap.estimate_weight_bytes(cap.ModelShape.from_config(QWEN)) == 2 * n


def test_tied_embeddings_drop_lm_head() -> None:
    a = cap.estimate_param_count(cap.ModelShape.from_config(TINY))
    b = cap.estimate_param_count(cap.ModelShape.from_config({**TINY, "tie_word_embeddings": True}))
    # gemma-2 configs omit the key and tie by default (Gemma2Config); a Llama that omits it does not.
    assert cap.ModelShape.from_config({**TINY, "model_type": "gemma2"}).tie_word_embeddings
    assert not cap.ModelShape.from_config({**TINY, "model_type": "llama"}).tie_word_embeddings
    assert a - b == 4096 * 256


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> int:
    size = {"BF16": 2, "F32": 4, "F16": 2}
    header, off = {}, 0
    for name, (dt, shape) in tensors.items():
        n = size[dt]
        for d in shape:
            n *= d
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * off)
    return off


def test_safetensors_sum_reads_headers(tmp_path: Path) -> None:
    a = _write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {"x": ("BF16", [128, 64])})
    b = _write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"y": ("F32", [10]), "z": ("F16", [3, 3])})
    assert cap.safetensors_weight_bytes(tmp_path) == a + b == 128 * 64 * 2 + 40 + 18
    assert cap.safetensors_weight_bytes(tmp_path / "model-00002-of-00002.safetensors") == b
    assert cap.safetensors_weight_bytes(tmp_path / "empty") is None


# --- the plan ----------------------------------------------------------------------------------


def test_plan_h200_qwen() -> None:
    p = cap.plan(QWEN, 143771, gpu_memory_utilization=0.9, max_model_len=32768, max_num_seqs=32)
    assert p.status == "pass" and p.weights_source == "estimate"
    budget = int(143771 * 2**20 * 0.9)
    assert p.budget_bytes_per_gpu == budget
    assert p.kv_cache_bytes_per_gpu == budget - p.weights_bytes - p.reserve_bytes_per_gpu
    assert p.kv_capacity_tokens == p.kv_cache_bytes_per_gpu // 57344 // 16 * 16
    assert p.max_concurrency == p.kv_capacity_tokens / 32768
    assert p.suggested_max_num_seqs == p.kv_capacity_tokens // 32768


def test_plan_reserve_is_documented_formula() -> None:
    s = cap.ModelShape.from_config(QWEN)
    r = cap.reserve_bytes(s, tp=1, max_num_batched_tokens=8192, max_num_seqs=256)
    assert r == cap.FIXED_RESERVE_BYTES + 8192 * 2 * 18944 * 2 + 256 * 152064 * 4 + cap.CUDA_GRAPH_RESERVE_BYTES
    eager = cap.reserve_bytes(s, tp=1, max_num_batched_tokens=8192, max_num_seqs=256, enforce_eager=True)
    assert r - eager == cap.CUDA_GRAPH_RESERVE_BYTES


H200_RUNS = Path(__file__).parents[2] / "docs" / "evidence" / "h200-vllm-0.20.0"


@pytest.mark.parametrize(
    "run,flags",
    [
        ("default", dict(max_num_batched_tokens=8192, max_num_seqs=256)),
        ("eager", dict(max_num_batched_tokens=8192, max_num_seqs=256, enforce_eager=True)),
        ("b16k_s1024", dict(max_num_batched_tokens=16384, max_num_seqs=1024)),
        ("b2k_eager", dict(max_num_batched_tokens=2048, max_num_seqs=256, enforce_eager=True)),
        ("qwen_default", dict(max_num_batched_tokens=8192, max_num_seqs=256)),
        ("llama_fp8kv", dict(max_num_batched_tokens=8192, max_num_seqs=256, kv_cache_dtype="fp8")),
    ],
)
def test_plan_matches_vllm_020_on_h200_from_the_safe_side(run: str, flags: dict) -> None:
    """vLLM 0.20.0's own 'GPU KV cache size' on an H200 (utilisation 0.9, Llama-3.1-8B shape, one
    run Qwen2.5-7B's): the plan stays at or below it, and within 0.5 %."""
    config = QWEN if run.startswith("qwen") else json.loads((H200_RUNS.parent / "llama-3.1-8b-config.json").read_text())
    logged = cap.parse_kv_cache_log((H200_RUNS / f"{run}.log").read_text())
    planned = cap.plan(config, 143771, gpu_memory_utilization=0.9, max_model_len=32768, **flags).kv_capacity_tokens
    assert 0.995 * logged <= planned <= logged


def test_plan_warns_when_max_num_seqs_exceeds_capacity() -> None:
    p = cap.plan(QWEN, 32768, gpu_memory_utilization=0.9, max_model_len=32768, max_num_seqs=64, tp=2, reserve=GIB)
    assert p.status == "warn" and p.suggested_max_num_seqs < 64
    assert "max_num_seqs 64" in p.warnings[0]


def test_plan_fails_when_max_model_len_exceeds_kv() -> None:
    p = cap.plan(SEVENTY_B, 40960, tp=2, gpu_memory_utilization=0.9, max_model_len=8192, reserve=GIB)
    assert p.status == "fail" and "no room for KV cache" in p.warnings[0]  # 141 GB of fp16 weights on 2x A100-40GB
    p = cap.plan(QWEN, 24576, gpu_memory_utilization=0.9, max_model_len=131072, reserve=GIB)
    assert p.status == "fail" and p.suggested_max_model_len == p.kv_capacity_tokens < 131072
    assert "refuses to start" in p.warnings[0]


def test_plan_uses_safetensors_bytes_and_fp8_kv() -> None:
    a = cap.plan(QWEN, 81920, weights_bytes=5 * GIB, reserve=GIB, max_model_len=4096)
    assert a.weights_source == "safetensors" and a.weights_bytes == 5 * GIB
    b = cap.plan(QWEN, 81920, weights_bytes=5 * GIB, reserve=GIB, max_model_len=4096, kv_cache_dtype="fp8")
    assert b.kv_bytes_per_token == 57344 // 2 and b.kv_capacity_tokens >= 2 * a.kv_capacity_tokens - 16


def test_plan_for_host_takes_smallest_gpu() -> None:
    facts = {
        "model_config": QWEN,
        "gpus": [{"memory_total_mib": 81920}, {"memory_total_mib": 40960}],
        "weights_bytes": None,
    }
    p = cap.plan_for_host(config({"tensor_parallel_size": 2, "max_model_len": 4096}), facts)
    assert p.gpu_memory_bytes == 40960 * 2**20 and p.tensor_parallel_size == 2
    assert cap.plan_for_host(config(), {"gpus": []}) is None


# --- CPU build and vLLM's own log -------------------------------------------------------------


def test_cpu_kv_capacity() -> None:
    # tiny lab model: 2 x 2 layers x 2 KV heads x 64 x 2 B = 1024 B/token; 1 GiB -> 1,048,576 tokens
    assert cap.cpu_kv_capacity_tokens(TINY, 1) == 1_048_576
    assert cap.cpu_kv_capacity_tokens(QWEN, 4) == 4 * GIB // 57344


@pytest.mark.parametrize(
    "text,tokens",
    [
        ("INFO 05-01 [kv_cache_utils.py:716] GPU KV cache size: 123,456 tokens", 123456),
        ("INFO [kv_cache_utils.py:634] CPU KV cache size: 1,048,576 tokens", 1048576),
        ("INFO 08-02 executor_base.py:110] # GPU blocks: 7,238, # CPU blocks: 2048", 7238 * 16),
        ("GPU KV cache size: 1000 tokens\n...restart...\nGPU KV cache size: 2,000 tokens", 2000),
        ("nothing here", None),
    ],
)
def test_parse_kv_cache_log(text: str, tokens: int | None) -> None:
    assert cap.parse_kv_cache_log(text) == tokens


def test_parse_v0_blocks_with_other_block_size() -> None:
    assert cap.parse_kv_cache_log("# GPU blocks: 100, # CPU blocks: 0", block_size=32) == 3200


def test_parse_max_concurrency() -> None:
    line = "INFO [kv_cache_utils.py:720] Maximum concurrency for 4,096 tokens per request: 12.34x"
    assert cap.parse_max_concurrency(line) == 12.34
    assert cap.parse_max_concurrency_detail(line) == (4096, 12.34)
    assert cap.parse_max_concurrency("CPU KV cache size: 8 tokens") is None
    cpu = "Maximum concurrency for 512 tokens per request: 2,048.00x"
    assert cap.parse_max_concurrency(cpu) == 2048.0
