"""Preflight's LoRA adapter checks (vfleet/roles/preflight/_adapter_facts.py, adapter_checks.py):
an adapter's fit to its base model read from the shapes in its safetensors header, its rank
against vLLM's choices, and an unreadable source, each a FAIL that names the tensor and the fix."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

from tests.unit.configs import host_config
from vfleet.config.lora import LoraAdapter
from vfleet.roles.preflight._adapter_checks import check_adapters, projection_dims
from vfleet.roles.preflight._adapter_facts import adapter_facts
from vfleet.roles.preflight._check_base import FAIL, PASS

# the lab's tiny Llama (vfleet/lab/model/build_tiny_model.py Shape)
TINY = {
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
}
PREFIX = "base_model.model.model.layers"


def peft_shapes(config: dict, rank: int, layers: int = 2) -> dict[str, list[int]]:
    """The tensors peft writes for every projection of `layers` layers."""
    out = {}
    for layer in range(layers):
        for module, (d_in, d_out) in projection_dims(config).items():
            part = "self_attn" if module.endswith(("q_proj", "k_proj", "v_proj", "o_proj")) else "mlp"
            out[f"{PREFIX}.{layer}.{part}.{module}.lora_A.weight"] = [rank, d_in]
            out[f"{PREFIX}.{layer}.{part}.{module}.lora_B.weight"] = [d_out, rank]
    return out


def write_adapter(folder: Path, rank: int, shapes: dict[str, list[int]]) -> Path:
    """adapter_config.json and a safetensors file whose header holds `shapes` (bf16, zeros)."""
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "base_model_name_or_path": "tiny"}))
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = 2 * shape[0] * shape[1]
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    (folder / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    return folder


def checks(cfg, adapters: dict) -> list:
    return check_adapters(cfg, {"lora_adapters": adapters, "model_config": TINY})


def test_an_adapter_of_the_model_passes_with_its_rank_and_tensor_count():
    [c] = checks(host_config(), {"alpha": {"rank": 8, "base": "tiny", "shapes": peft_shapes(TINY, 8)}})
    assert (c.id, c.status) == ("model.lora.alpha", PASS) and "rank 8, 28 tensors fit" in c.message


def test_an_adapter_of_another_base_model_is_refused_naming_the_tensor_and_the_fix():
    other = peft_shapes({**TINY, "num_attention_heads": 2, "head_dim": 64}, 8)
    [c] = checks(host_config(), {"alpha": {"rank": 8, "base": "org/other-1b", "shapes": other}})
    assert c.status == FAIL and "adapter alpha does not fit model tiny" in c.message
    assert "o_proj.lora_A.weight is [8, 128], the model's o_proj takes [8, 256] at rank 8" in c.message
    assert "trained for (adapter_config.json names 'org/other-1b')" in c.fix
    [c] = checks(host_config(), {"alpha": {"rank": 8, "base": None, "shapes": peft_shapes(TINY, 8, layers=3)}})
    assert c.status == FAIL and "is for layer 2, the model has 2 layers" in c.message
    [c] = checks(host_config(), {"alpha": {"rank": 16, "base": None, "shapes": peft_shapes(TINY, 8)}})
    assert c.status == FAIL and "at rank 16" in c.message  # config and weights disagree on r


def test_a_rank_vllm_cannot_serve_and_an_unreadable_source_fail_with_the_fix():
    [c] = checks(host_config(), {"alpha": {"rank": 1024, "base": None, "shapes": None}})
    assert c.status == FAIL and "vLLM serves ranks 1 to 512" in c.message and "retrain" in c.fix
    [c] = checks(host_config(), {"alpha": {"error": "hf://org/x@v9: revision 'v9' is not in the Hugging Face cache"}})
    assert c.status == FAIL and "adapter alpha: hf://org/x@v9" in c.message and "hf download" in c.fix
    assert checks(host_config(), {}) == []


def test_facts_are_read_from_the_controllers_folder_header_only(tmp_path):
    good = write_adapter(tmp_path / "alpha", 8, peft_shapes(TINY, 8))
    (tmp_path / "empty").mkdir()
    broken = tmp_path / "broken"
    write_adapter(broken, 8, {})
    (broken / "adapter_model.safetensors").write_bytes(struct.pack("<Q", 10**6) + b"{}")
    cfg = dataclasses.replace(
        host_config(),
        lora_adapters=(
            LoraAdapter("alpha", str(good)),
            LoraAdapter("empty", str(tmp_path / "empty")),
            LoraAdapter("broken", str(broken)),
        ),
    )
    facts = adapter_facts(cfg)
    assert facts["alpha"]["rank"] == 8 and facts["alpha"]["shapes"] == peft_shapes(TINY, 8)
    assert "no adapter_config.json there" in facts["empty"]["error"]
    assert "runs past the end" in facts["broken"]["error"] and "\n" not in facts["broken"]["error"]
    statuses = {c.id: c.status for c in check_adapters(cfg, {"lora_adapters": facts, "model_config": TINY})}
    assert statuses == {"model.lora.alpha": PASS, "model.lora.empty": FAIL, "model.lora.broken": FAIL}


def test_the_planner_takes_the_adapters_slots_from_the_kv_cache():
    from vfleet.roles.preflight import _capacity as capacity
    from vfleet.roles.preflight._capacity.lora import lora_bytes_per_gpu, lora_reserve_bytes
    from vfleet.roles.preflight._capacity.model import ModelShape

    # a Llama-3.1-8B shape on an H200: rank 16, 2 slots, bf16
    llama = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    }
    shape = ModelShape.from_config(llama)
    per_layer = (
        (3 * 16 * 4096 + 6144 * 16)
        + (16 * 4096 + 4096 * 16)
        + (2 * 16 * 4096 + 2 * 14336 * 16)
        + (16 * 14336 + 4096 * 16)
    )
    embeddings = 2 * (128256 * 16 + 4096 * 16)
    assert lora_bytes_per_gpu(shape, 16, 2, 2) == 2 * 2 * (32 * per_layer + embeddings)
    assert lora_bytes_per_gpu(shape, 16, 2, 2, tp=2) < lora_bytes_per_gpu(shape, 16, 2, 2)
    without = capacity.plan(llama, 143771, max_model_len=8192)
    with_lora = capacity.plan(llama, 143771, max_model_len=8192, lora=(16, 2))
    assert with_lora.lora_bytes_per_gpu == lora_bytes_per_gpu(shape, 16, 2, 2)
    taken = without.kv_cache_bytes_per_gpu - with_lora.kv_cache_bytes_per_gpu
    # the stacks, and the second set of CUDA graphs and LoRA's profiling buffers (capacity/lora.py)
    assert taken == with_lora.lora_bytes_per_gpu + lora_reserve_bytes(16, 2, enforce_eager=False)
    assert lora_reserve_bytes(16, 2, enforce_eager=True) < lora_reserve_bytes(16, 2, enforce_eager=False)
    cfg = host_config({"lora_adapters": [{"name": "a", "source": "/x"}, {"name": "b", "source": "/y"}]})
    facts = {
        "model_config": llama,
        "gpus": [{"memory_total_mib": 143771}],
        "lora_adapters": {"a": {"rank": 8}, "b": {"rank": 12}},
    }
    assert capacity.plan_for_host(cfg, facts).lora_bytes_per_gpu == lora_bytes_per_gpu(shape, 16, 2, 2)
    facts["lora_adapters"]["b"] = {"error": "unreadable"}
    assert capacity.plan_for_host(cfg, facts).lora_bytes_per_gpu == 0  # the adapter check fails instead
