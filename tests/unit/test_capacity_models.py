"""Model arithmetic beyond dense Llama shapes (vfleet/roles/preflight/_capacity/model.py): MoE parameter counts
against the published sizes, MLA's latent KV, sliding-window layers and what one request
reserves, --kv-cache-memory-bytes, and weights from model.safetensors.index.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vfleet.roles.preflight import _capacity as cap

CONFIGS = Path(__file__).parent / "data" / "planner" / "configs"
H200_MIB = 143771


def config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def shape(name: str, **override) -> cap.ModelShape:
    return cap.ModelShape.from_config(config(name) | override)


# --- MoE ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, params, published",
    [
        ("mixtral-8x7b", 46_702_792_704, 46.7e9),  # 93.4 GB in bf16; vLLM logged 87.0 GiB loaded
        ("deepseek-v2-lite", 15_706_484_224, 15.7e9),  # vLLM logged 29.3 GiB loaded
        ("qwen3-235b-a22b", 235_093_610_496, 235.1e9),
    ],
)
def test_moe_parameters_match_published_sizes(name: str, params: int, published: float) -> None:
    n = cap.estimate_param_count(shape(name))
    assert n == params and abs(n / published - 1) < 0.005


def test_mixtral_bf16_weights_are_93_gb_not_13() -> None:
    assert round(cap.estimate_weight_bytes(shape("mixtral-8x7b")) / 1e9, 1) == 93.4


def test_deepseek_dense_layers_and_shared_experts_from_the_config() -> None:
    s = shape("deepseek-v2-lite")
    assert s.moe.dense_layers == frozenset({0})  # first_k_dense_replace 1
    assert s.moe.shared_intermediate == 2 * 1408  # n_shared_experts x moe_intermediate_size
    assert shape("deepseek-v2-lite", first_k_dense_replace=3).moe.dense_layers == frozenset({0, 1, 2})
    every_other = shape("deepseek-v2-lite", first_k_dense_replace=0, moe_layer_freq=2).moe.dense_layers
    assert every_other == frozenset(range(1, 27, 2))


def test_qwen2_moe_shared_expert_and_sparse_step() -> None:
    base = config("qwen3-235b-a22b") | {
        "num_hidden_layers": 4,
        "decoder_sparse_step": 2,
        "shared_expert_intermediate_size": 5632,
        "mlp_only_layers": [3],
    }
    s = cap.ModelShape.from_config(base)
    assert s.moe.dense_layers == frozenset({0, 2, 3})  # (i + 1) % 2 != 0, and mlp_only_layers
    assert s.moe.shared_intermediate == 5632


def test_a_single_expert_config_is_dense() -> None:
    assert shape("mixtral-8x7b", num_local_experts=1).moe is None


def test_moe_activation_is_the_fused_expert_buffers() -> None:
    # top-2 x (3 x 14336 + 4096) + 2 x 4096, in bf16: 204,800 B; vLLM 0.20.0 measured 206,848
    assert cap.activation_bytes_per_token(shape("mixtral-8x7b")) == 204_800
    assert cap.activation_bytes_per_token(shape("mixtral-8x7b"), tp=2) == 2 * (2 * (3 * 7168 + 4096) + 8192)


# --- MLA ----------------------------------------------------------------------------------------


def test_mla_kv_is_the_latent_per_layer_and_replicated_under_tp() -> None:
    s = shape("deepseek-v2-lite")
    assert cap.kv_bytes_per_token(s, 2) == 27 * (512 + 64) * 2 == 31_104
    assert cap.kv_bytes_per_token(s, 2, tp=4) == 31_104  # not split across ranks
    assert cap.kv_bytes_per_token(s, 1) == 15_552  # fp8 KV


def test_mla_with_q_lora_counts_the_low_rank_query() -> None:
    no_lora, lora = shape("deepseek-v2-lite"), shape("deepseek-v2-lite", q_lora_rank=1536)
    h, qk = 2048, 16 * 192
    per_layer = (h * 1536 + 1536 + 1536 * qk) - h * qk
    assert cap.estimate_param_count(lora) - cap.estimate_param_count(no_lora) == 27 * per_layer


# --- sliding window -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "override, sliding",
    [
        ({}, 21),  # gemma-2: every other layer
        ({"layer_types": ["sliding_attention"] * 40 + ["full_attention"] * 2}, 40),
        ({"sliding_window": None}, 0),
        ({"model_type": "gemma3_text", "num_hidden_layers": 12}, 10),  # 5 of every 6
        ({"model_type": "mistral"}, 42),  # Mistral-7B-v0.1: every layer
        ({"model_type": "qwen2", "use_sliding_window": False}, 0),
        ({"model_type": "qwen2"}, 0),  # Qwen2Config: off by default
        ({"model_type": "qwen2", "use_sliding_window": True}, 42),
        ({"model_type": "qwen2", "use_sliding_window": True, "max_window_layers": 28}, 14),
    ],
)
def test_sliding_layers(override: dict, sliding: int) -> None:
    assert shape("gemma-2-9b", **override).sliding_layers == sliding


def test_gemma2_request_reserves_window_plus_batch_on_windowed_layers() -> None:
    """vLLM logged 40.84x for 8,192-token requests: 512 full blocks + cdiv(min(4095 + 8192, 8192),
    16) + 1 = 513 windowed blocks per layer pair."""
    s = shape("gemma-2-9b")
    per_layer_block = 2 * 8 * 256 * 2 * 16
    assert cap.kv_bytes_per_request(s, 8192, 8192) == per_layer_block * 21 * (512 + 513)
    assert cap.kv_bytes_per_request(s, 8192, 512) == per_layer_block * 21 * (512 + 289)
    p = cap.plan(config("gemma-2-9b"), H200_MIB, max_model_len=8192, dtype="bfloat16", enforce_eager=True)
    assert round(p.max_concurrency, 1) == 40.9


def test_sliding_window_lets_a_long_request_fit_where_full_attention_would_not() -> None:
    all_windowed = config("gemma-2-9b") | {"model_type": "mistral", "max_position_embeddings": 131072}
    p = cap.plan(all_windowed, 49152, max_model_len=131072, dtype="bfloat16", max_num_batched_tokens=2048)
    assert p.kv_capacity_tokens < 131072 and p.status != "fail" and p.max_concurrency >= 1
    full = cap.plan(
        all_windowed | {"sliding_window": None},
        49152,
        max_model_len=131072,
        dtype="bfloat16",
        max_num_batched_tokens=2048,
    )
    assert full.status == "fail"


# --- flags and weights --------------------------------------------------------------------------


def test_kv_cache_memory_bytes_replaces_the_budget() -> None:
    p = cap.plan(config("llama-3.1-8b"), H200_MIB, kv_cache_memory_bytes=8 * cap.GIB, max_model_len=32768)
    assert p.kv_cache_bytes_per_gpu == 8 * cap.GIB and p.kv_capacity_tokens == 65536
    too_big = cap.plan(config("llama-3.1-8b"), 24576, kv_cache_memory_bytes=20 * cap.GIB, max_model_len=4096)
    assert too_big.status == "fail" and "kv_cache_memory_bytes" in too_big.warnings[0]


def test_weights_from_the_index_total_size(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 93405585408}, "weight_map": {}})
    )
    assert cap.weights_bytes_from_dir(tmp_path) == 93405585408
    assert cap.weights_bytes_from_dir(tmp_path / "absent") is None


def test_per_gpu_share_under_tp() -> None:
    one = cap.plan(config("mixtral-8x7b"), 81559, tp=2, max_model_len=32768, dtype="bfloat16")
    assert one.weights_bytes_per_gpu == -(-one.weights_bytes // 2)
    assert one.kv_bytes_per_token_per_gpu == one.kv_bytes_per_token // 2
