"""The live `measured` record of a vLLM host (vfleet/roles/status/_measured.py), from what its
probes print (tests/unit/data/status/measured.yaml) without a host: the parsers, the record, the
plan's memory, and the record shared by the hosts behind a gateway."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.unit.configs import host_config
from vfleet.clients.measured import differences
from vfleet.engine.fact_protocol import Output, results
from vfleet.roles.status import _measured as m

DATA = yaml.safe_load((Path(__file__).parent / "data" / "status" / "measured.yaml").read_text())
MODELS = Path(__file__).parent / "data" / "models"


def answers(cfg, **outputs: str):
    """Each probe's parsed answer, as the fact protocol hands them over (a probe without output:
    None, as when nvidia-smi is missing)."""
    return results(m.measured_probes(cfg), {k: Output(v) for k, v in outputs.items()})


def test_the_record_of_a_lab_host():
    cfg = host_config({"dtype": "bfloat16", "kv_cache_dtype": "fp8", "model_source": "/nonexistent/tiny"})
    got = answers(cfg, install=DATA["install"], weights=DATA["weights"], argv=DATA["argv"], gpus=DATA["gpus_two"])
    rec = m.record_of(cfg, got)
    assert rec == {
        "vllm_version": "0.32.0",
        "vllm_argv": DATA["argv"].splitlines(),
        "model": "tiny",
        "weights_version": "tiny-1a2b3c4d5e6f",
        "dtype": "bfloat16",
        "kv_cache_dtype": "fp8",
        "gpu_model": "NVIDIA H200",
        "gpu_count": 2,
        "gpu_memory_used_mib": 260210.0,
    }
    assert list(rec) == [k for k in m.measured.FIELDS if k in rec]  # the record's own order
    json.dumps(rec)  # it travels in a JSON report


def test_a_host_that_answered_nothing_still_says_what_the_inventory_sets():
    cfg = host_config({"quantization": "fp8"})
    rec = m.record_of(cfg, answers(cfg))
    assert rec == {"model": "tiny", "dtype": "auto", "quantization": "fp8", "kv_cache_dtype": "auto"}


def test_an_api_key_on_the_command_line_is_masked():
    argv = m.parse_argv(DATA["argv_with_key"])
    assert argv[3:6] == ["--api-key", "***", "--api-key=***"] and argv[-2:] == ["--port", "8000"]
    assert "sk-lab" not in json.dumps(argv)
    assert m.parse_argv("") is None


def test_the_argv_probe_reads_the_units_main_process():
    cmd = m.measured_probes(host_config())["argv"].command()
    assert "systemctl show -p MainPID --value -- vllm.service" in cmd and "/proc/$pid/cmdline" in cmd


@pytest.mark.parametrize("source", ["/nonexistent/tiny", "host1:/srv/src/tiny", str(MODELS)])
def test_no_planned_weights_without_the_model_on_the_controller(source):
    assert m.planned_weights_gib(host_config({"model_source": source}), 143771) is None


def test_planned_weights_are_the_whole_models_over_its_tp_gpus():
    one = m.planned_weights_gib(host_config({"model_source": str(MODELS / "llama_chat")}), 143771)
    two = m.planned_weights_gib(
        host_config({"model_source": str(MODELS / "llama_chat"), "tensor_parallel_size": 2}), 143771
    )
    # config.json alone (no safetensors here): an 8B Llama in bf16 is counted from its shape, about 15 GiB
    # whether one GPU holds it or two hold half each; the KV cache is not in it (same for every variant)
    assert one is not None and 14.5 < one < 15.5
    assert two == pytest.approx(one, abs=0.02)
    assert m.planned_weights_gib(host_config({"model_source": str(MODELS / "llama_chat")}), None) is None


def test_the_record_behind_a_gateway_keeps_what_hosts_share_on_top():
    a = {"vllm_version": "0.32.0", "model": "tiny", "gpu_count": 1, "gpu_memory_used_mib": 100.0}
    b = {"vllm_version": "0.32.0", "model": "tiny", "gpu_count": 2, "gpu_memory_used_mib": 200.0}
    both = m.common_record({"lab1": a, "lab2": b})
    assert both == {"vllm_version": "0.32.0", "model": "tiny", "hosts": {"lab1": a, "lab2": b}}
    later = m.common_record({"lab1": {**a, "vllm_version": "0.33.0"}, "lab2": {**b, "vllm_version": "0.33.0"}})
    assert differences(both, later) == ["vLLM version 0.32.0 -> 0.33.0"]
    assert m.common_record({}) == {"hosts": {}}


def test_the_gpu_probe_is_answered_by_the_labs_nvidia_smi():
    """The query the probe sends, as the lab's simulated nvidia-smi answers it (the H200 profile,
    captured on a real H200): the record says NVIDIA H200, one GPU, 0 MiB used."""
    import subprocess
    import sys

    lab = Path(__file__).resolve().parents[2] / "vfleet" / "lab"
    cfg = host_config()
    args = m.measured_probes(cfg)["gpus"].command().split()[1:]
    out = subprocess.run(
        [sys.executable, str(lab / "nvidia_smi.py"), *args],
        capture_output=True,
        text=True,
        env={"VFLEET_GPU_PROFILE": str(lab / "profiles" / "h200-1"), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    rec = m.record_of(cfg, answers(cfg, gpus=out.stdout))
    assert (rec["gpu_model"], rec["gpu_count"], rec["gpu_memory_used_mib"]) == ("NVIDIA H200", 1, 0.0)


AWQ_CONFIG = Path(__file__).parent / "data" / "planner" / "quantized" / "qwen2.5-7b-instruct-awq.json"


def test_served_quantization_says_none_for_a_plain_checkpoint_and_the_method_of_a_quantized_one(tmp_path):
    plain, awq = tmp_path / "plain", tmp_path / "awq"
    plain.mkdir(), awq.mkdir()
    config = json.loads(AWQ_CONFIG.read_text())
    (awq / "config.json").write_text(json.dumps(config))
    (plain / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "quantization_config"}))
    assert m.served_quantization(host_config({"model_source": str(plain)})) == "none"
    assert m.served_quantization(host_config({"model_source": str(awq)})) == "awq"
    assert m.served_quantization(host_config({"model_source": str(plain), "quantization": "fp8"})) == "fp8"
    assert m.served_quantization(host_config({"model_source": str(tmp_path / "absent")})) is None


def test_planned_weights_count_lora_slots_and_the_speculative_draft(tmp_path):
    """vLLM's model memory grows by its LoRA stacks and a draft's weights (both measured on the
    H200, docs/evidence/h200-lora-spec): the record's plan must too, or a LoRA variant looks heavier
    than planned."""
    source = str(MODELS / "llama_chat")
    plain = m.planned_weights_gib(host_config({"model_source": source}), 143771)
    adapter = tmp_path / "alpha"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 256, "base_model_name_or_path": "llama"}))
    lora = m.planned_weights_gib(
        host_config({"model_source": source, "lora_adapters": [{"name": "alpha", "source": str(adapter)}]}), 143771
    )
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text((MODELS / "llama_chat" / "config.json").read_text())
    (draft / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 2 * 2**30}, "weight_map": {}})
    )
    spec = m.planned_weights_gib(
        host_config(
            {
                "model_source": source,
                "speculative_decoding": {"method": "draft_model", "num_speculative_tokens": 3, "source": str(draft)},
            }
        ),
        143771,
    )
    assert plain is not None and lora is not None and spec is not None
    assert lora > plain + 0.5  # an 8B Llama's stacks at rank 256 are GiBs
    assert spec == pytest.approx(plain + 2, abs=0.02)  # the draft's 2 GiB of weights
