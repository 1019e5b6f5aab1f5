"""The planner's weight figure for quantized models (vfleet/roles/preflight/_capacity/quant.py)
against what real checkpoints hold and what vLLM loaded (tests/unit/data/planner/quantized.json):
config.json alone, no safetensors index, as a host has before the weights are copied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vfleet.engine.strict_json import JsonFileError
from vfleet.roles.preflight import _capacity as cap
from vfleet.roles.preflight._capacity import quant

DATA = Path(__file__).parent / "data" / "planner"
TABLE = json.loads((DATA / "quantized.json").read_text())
TOLERANCE = TABLE["tolerance_pct"] / 100
H200_MIB = 143771
BF16_QWEN = json.loads((DATA / "configs" / "qwen2.5-7b-instruct.json").read_text())
# model.safetensors.index.json metadata.total_size of Qwen/Qwen2.5-7B-Instruct (bf16)
BF16_QWEN_FILES = 15_231_233_024


def _row_config(row: dict[str, Any]) -> dict[str, Any]:
    return json.loads((DATA / row["config"]).read_text())


def _plan(config: dict[str, Any], **kw: Any) -> cap.Plan:
    return cap.plan(config, H200_MIB, max_model_len=32768, **kw)


@pytest.mark.parametrize("row", TABLE["rows"], ids=[r["id"] for r in TABLE["rows"]])
def test_weights_within_tolerance_of_what_the_engine_holds(row: dict[str, Any]) -> None:
    p = _plan(_row_config(row), quantization=row.get("quantization"))
    assert abs(p.weights_bytes / row["bytes"] - 1) <= TOLERANCE, (
        f"{row['id']}: planned {p.weights_bytes:,} bytes, really {row['bytes']:,} ({row['source']})"
    )
    assert p.weights_source.startswith("estimate (") and not any("priced" in w for w in p.warnings)


def test_sixteen_bit_counting_would_fail_every_row() -> None:
    """The rows can fail: the old count (every weight 16-bit) is 14.2 GiB for each of them."""
    for row in TABLE["rows"]:
        dense = _plan({k: v for k, v in _row_config(row).items() if k != "quantization_config"})
        assert dense.weights_bytes / cap.GIB == pytest.approx(14.19, abs=0.01)
        assert dense.weights_bytes > 1.5 * row["bytes"]


def test_fp8_at_load_scales_the_files_total_and_gives_the_kv_back() -> None:
    """With the bf16 checkpoint's files known, vLLM quantizing at load holds less than them: the
    plan scales the files' total by the two estimates' ratio (8.13 GiB measured on the H200)."""
    at_load = _plan(BF16_QWEN, quantization="fp8", weights_bytes=BF16_QWEN_FILES)
    assert at_load.weights_source == "safetensors (fp8 at load)"
    assert abs(at_load.weights_bytes / (8.13 * cap.GIB) - 1) <= 0.01
    bf16 = _plan(BF16_QWEN, weights_bytes=BF16_QWEN_FILES)
    assert bf16.weights_bytes == BF16_QWEN_FILES
    # the 6.3 GiB handed back become KV: 5.5% more tokens at this size, as the H200 showed
    gained = at_load.kv_capacity_tokens / bf16.kv_capacity_tokens - 1
    assert 0.05 <= gained <= 0.07, gained
    # a pre-quantized checkpoint's files are exact: never scaled
    awq = _row_config(TABLE["rows"][0])
    assert _plan(awq, weights_bytes=5_580_000_000).weights_bytes == 5_580_000_000


def test_modules_kept_in_sixteen_bits_are_counted_so() -> None:
    """lm_head, embeddings and norms stay 16-bit; an ignore list keeps more (AWQ substrings,
    compressed-tensors names and `re:` patterns); compressed-tensors converts lm_head unless told."""
    shape = cap.ModelShape.from_config(BF16_QWEN)
    awq = _row_config(TABLE["rows"][0])
    base = _plan(awq).weights_bytes
    down = 28 * 18944 * 3584  # down_proj weights over 28 layers
    kept = _plan(
        {**awq, "quantization_config": {**awq["quantization_config"], "modules_to_not_convert": ["down_proj"]}}
    ).weights_bytes
    assert kept - base == pytest.approx(down * (2 - 0.5 - 2.5 / 128), rel=1e-6)
    ct = _row_config(TABLE["rows"][2])
    qc = ct["quantization_config"]
    with_head = {**ct, "quantization_config": {**qc, "ignore": []}}
    lm_head = 152064 * 3584
    assert _plan(ct).weights_bytes - _plan(with_head).weights_bytes == pytest.approx(
        lm_head * (2 - 1) - 152064 * 2, abs=2
    )
    by_regex = {**ct, "quantization_config": {**qc, "ignore": ["lm_head", "re:.*layers\\.0\\..*"]}}
    layer0 = sum(m.params for m in cap.model.weight_modules(shape) if m.linear and ".layers.0." in m.name)
    assert _plan(by_regex).weights_bytes - _plan(ct).weights_bytes == pytest.approx(layer0, rel=0.01)


def test_block_scales_and_bitsandbytes() -> None:
    """fp8 with 128 x 128 blocks (float32 scale_inv a block), bitsandbytes nf4 (absmax a 64)."""
    shape = cap.ModelShape.from_config(BF16_QWEN)
    linear = sum(m.params for m in cap.model.weight_modules(shape) if m.linear and m.name != "lm_head")
    dense = cap.estimate_param_count(shape) * 2
    fp8 = {**BF16_QWEN, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    assert _plan(fp8).weights_bytes == pytest.approx(dense - 2 * linear + linear * (1 + 4 / 16384), abs=2)
    nf4 = {**BF16_QWEN, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}}
    assert _plan(nf4).weights_bytes == pytest.approx(dense - 2 * linear + linear * (0.5 + 4 / 64), abs=2)


def test_an_unpriced_method_counts_sixteen_bits_and_says_so() -> None:
    p = _plan({**BF16_QWEN, "quantization_config": {"quant_method": "gguf"}})
    assert p.weights_bytes == cap.estimate_param_count(cap.ModelShape.from_config(BF16_QWEN)) * 2
    assert any("gguf is not priced" in w for w in p.warnings)
    p = _plan(BF16_QWEN, quantization="bitsandbytes")
    assert any("bitsandbytes at load is not priced" in w for w in p.warnings)


@pytest.mark.parametrize(
    "qc, words",
    [
        ({"quant_method": "awq", "bits": "4"}, "key 'bits'"),
        ({"quant_method": "gptq", "group_size": 0}, "key 'group_size'"),
        ({"quant_method": "awq", "modules_to_not_convert": "lm_head"}, "modules_to_not_convert"),
        (
            {
                "quant_method": "compressed-tensors",
                "ignore": ["re:(("],
                "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8}}},
            },
            "not a regular expression",
        ),
        ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size"),
    ],
)
def test_a_bad_quantization_config_is_one_line_naming_the_key(qc: dict, words: str) -> None:
    with pytest.raises(JsonFileError) as err:
        _plan({**BF16_QWEN, "quantization_config": qc}, config_label="m/config.json")
    assert words in str(err.value) and "m/config.json" in str(err.value) and "\n" not in str(err.value)


def test_the_kernel_names_price_as_their_format() -> None:
    awq = _row_config(TABLE["rows"][0])
    marlin = {**awq, "quantization_config": {**awq["quantization_config"], "quant_method": "awq_marlin"}}
    assert quant.weight_format(marlin, None)[0] == quant.weight_format(awq, None)[0]


def test_plan_config_takes_the_quantization_at_load(tmp_path) -> None:
    """`vfleet plan --config ... --quantization fp8`: the command a user runs before a host exists."""
    import subprocess
    import sys

    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "vfleet.cli",
                "plan",
                "--config",
                str(DATA / "configs" / "qwen2.5-7b-instruct.json"),
                "--gpu-memory-mib",
                str(H200_MIB),
                "--max-model-len",
                "32768",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).resolve().parents[2],
        )

    r = run("--quantization", "fp8", "--report", str(tmp_path / "plan.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["weights_source"] == "estimate (fp8 at load)"
    assert abs(plan["weights_bytes"] / (8.13 * cap.GIB) - 1) <= 0.01
    bad = run("--quantization", "FP8; rm")
    assert (
        bad.returncode == 2 and "--quantization: expected a method name" in bad.stderr and "Traceback" not in bad.stderr
    )


def test_an_ignore_list_too_long_to_match_layer_by_layer_is_refused_quickly() -> None:
    """10,000 layers (model_files' bound) x 4,096 entries naming single layers would take
    minutes to match: one line instead, naming the file and the way round it."""
    import time

    cfg = {
        **BF16_QWEN,
        "num_hidden_layers": 10_000,
        "quantization_config": {
            "quant_method": "awq",
            "modules_to_not_convert": [f"layers.{i}.mlp" for i in range(4096)],
        },
    }
    t0 = time.monotonic()
    with pytest.raises(JsonFileError) as err:
        _plan(cfg, config_label="m/config.json")
    assert time.monotonic() - t0 < 2
    assert "4096 modules to keep over 10000 layers" in str(err.value) and "model_size_bytes" in str(err.value)
