"""Model-folder checks (vfleet/roles/preflight/_model_checks.py) over the small folders in
tests/unit/data/models/, read the way the controller reads model_source."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.preflight_cases import config
from vfleet.roles.preflight import _model_checks as mc, host_checks
from vfleet.roles.preflight._model_facts import custom_code_files, model_facts_from_folder, with_model_source

MODELS = Path(__file__).parent / "data" / "models"
V100 = [
    {
        "index": 0,
        "name": "Tesla V100-PCIE-32GB",
        "compute_capability": "7.0",
        "memory_total_mib": 32768,
        "ecc_uncorrected": 0,
        "persistence_mode": "Enabled",
    }
]
T4 = [{"name": "Tesla T4", "compute_capability": "7.5", "memory_total_mib": 15360}]
A100 = [{"name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0", "memory_total_mib": 81920}]


def facts(name: str, gpus: list | None = None) -> dict:
    return {**model_facts_from_folder(MODELS / name), "gpus": gpus or []}


def by_id(checks: list, cid: str):
    return next(c for c in checks if c.id == cid)


def test_folder_reading() -> None:
    f = model_facts_from_folder(MODELS / "yuan2_custom_code")
    assert f["model_config"]["model_type"] == "yuan"
    assert f["model_files"] == ["config.json", "configuration_yuan.py", "tokenizer_config.json", "yuan_hf_model.py"]
    assert f["tokenizer_config"] == {"chat_template": False, "tokenizer_class": "LlamaTokenizer"}
    assert model_facts_from_folder(MODELS / "no-such-model") == {
        "model_config": None,
        "model_files": [],
        "tokenizer_config": None,
    }


@pytest.mark.parametrize(
    "name,status",
    [
        ("llama_chat", "pass"),
        ("jinja_template", "pass"),
        ("qwen_awq_yarn", "pass"),
        ("base_no_template", "fail"),
        ("yuan2_custom_code", "fail"),
    ],
)
def test_chat_template(name: str, status: str) -> None:
    c = mc.check_chat_template(config({}), facts(name))
    assert c.status == status
    if status == "fail":
        assert "chat_template.jinja" in c.fix and "serve_completions_only: true" in c.fix


def test_chat_template_ways_out() -> None:
    f = facts("base_no_template")
    assert mc.check_chat_template(config({"chat_template": "/etc/vllm/llama3.jinja"}), f).status == "pass"
    c = mc.check_chat_template(config({"serve_completions_only": True}), f)
    assert c.status == "warn" and "/v1/completions" in c.message
    assert mc.check_chat_template(config({}), {"model_config": {"model_type": "llama"}}) is None  # folder not listed


def test_remote_code_needs_trust_remote_code() -> None:
    c = mc.check_remote_code(config({}), facts("yuan2_custom_code"))
    assert c.status == "fail" and "configuration_yuan.py, yuan_hf_model.py" in c.message
    assert "trust_remote_code: true" in c.fix
    c = mc.check_remote_code(config({"trust_remote_code": True}), facts("yuan2_custom_code"))
    assert c.status == "warn" and "yuan_hf_model.py" in c.message
    assert mc.check_remote_code(config({}), facts("llama_chat")).status == "pass"


def test_auto_map_into_another_repository() -> None:
    cfg = {
        "auto_map": {
            "AutoModelForCausalLM": "deepseek-ai/DeepSeek-V3--modeling_deepseek.DeepseekV3ForCausalLM",
            "AutoConfig": ["configuration_x.XConfig", None],
        }
    }
    assert custom_code_files(["config.json", "modeling_local.py"], cfg) == [
        "modeling_local.py",
        "deepseek-ai/DeepSeek-V3--modeling_deepseek.py",
        "configuration_x.py",
    ]


def test_checkpoint_quantization_against_inventory_and_gpu() -> None:
    assert mc.check_checkpoint_quantization(config({}), facts("qwen_awq_yarn", A100)).status == "pass"
    assert (
        mc.check_checkpoint_quantization(config({"quantization": "awq_marlin"}), facts("qwen_awq_yarn", A100)).status
        == "pass"
    )
    c = mc.check_checkpoint_quantization(config({"quantization": "gptq"}), facts("qwen_awq_yarn", A100))
    assert c.status == "fail" and "quantization: awq" in c.fix
    c = mc.check_checkpoint_quantization(config({}), facts("qwen_awq_yarn", V100))
    assert c.status == "fail" and "awq" in c.message and "V100" in c.message
    assert (
        mc.check_checkpoint_quantization(config({}), facts("qwen_awq_yarn", T4)).status == "pass"
    )  # plain AWQ, CC 7.5
    gptq = {"model_config": {"quantization_config": {"quant_method": "gptq", "bits": 4}}, "gpus": V100}
    assert mc.check_checkpoint_quantization(config({}), gptq).status == "warn"
    assert mc.check_checkpoint_quantization(config({}), facts("llama_chat", A100)) is None


def test_max_model_len_against_config() -> None:
    assert mc.derived_max_len(facts("qwen_awq_yarn")["model_config"]) == 131072  # yarn x4
    assert mc.derived_max_len(facts("llama_chat")["model_config"]) == 131072  # llama3: no factor
    assert mc.check_max_model_len(config({"max_model_len": 65536}), facts("qwen_awq_yarn")).status == "pass"
    c = mc.check_max_model_len(config({"max_model_len": 16384}), facts("yuan2_custom_code"))
    assert c.status == "fail" and "8192" in c.fix
    assert mc.check_max_model_len(config({}), facts("yuan2_custom_code")) is None


def test_host_checks_include_the_model_checks_and_the_bf16_config_on_v100() -> None:
    v = config({"vllm_version": "0.5.4", "dtype": "auto", "tensor_parallel_size": 1, "max_model_len": 4096})
    f = {
        **facts("yuan2_custom_code", V100),
        "gpu_state": "ok",
        "gpu_count": 1,
        "driver_version": "535.104.05",
        "topology": {},
        "shm_bytes": 16 << 30,
    }
    got = {c.id: c.status for c in host_checks(v, f)}
    assert got["model.chat_template"] == "fail" and got["model.remote_code"] == "fail"
    assert got["model.max_model_len"] == "pass"
    assert got["gpu.dtype"] in ("warn", "fail")  # config says bfloat16, the V100 cannot


def test_controller_model_source_fills_what_the_host_lacks() -> None:
    src = MODELS / "yuan2_custom_code"
    got = with_model_source({"model_config": None, "model_files": None, "gpus": V100}, src)
    assert got["model_files"][0] == "config.json" and got["model_config"]["model_type"] == "yuan"
    assert got["gpus"] == V100
    host = {"model_files": ["config.json"], "model_config": {"model_type": "llama"}}
    assert with_model_source(host, src)["model_config"] == {"model_type": "llama"}
    assert with_model_source(host, None) is host  # a HOST:/path source: nothing on the controller
