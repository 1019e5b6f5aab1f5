"""What eval takes from the inventory: the target, the `measured` record, and the note about
batch invariance (a version fact: vllm_facts.yaml env_vars)."""

from __future__ import annotations

import pytest

from tests.unit.configs import host_config
from vfleet.clients.eval.targets import batch_invariance_note, gateway_target, host_target, measured_for
from vfleet.config import vllm_facts


def test_batch_invariant_variable_is_a_version_fact():
    assert vllm_facts.env_var("VLLM_BATCH_INVARIANT", "0.11.0") is None  # then VLLM_KERNEL_OVERRIDE_...
    row = vllm_facts.env_var("VLLM_BATCH_INVARIANT", "0.11.1")
    assert row and row["value"] == "1" and "docs.vllm.ai" in row["source"]
    assert vllm_facts.env_var("VLLM_BATCH_INVARIANT", "0.20.0") is row
    assert vllm_facts.env_var("VLLM_BATCH_INVARIANT", None) is None


@pytest.mark.parametrize(
    "version,env,noted",
    [
        ("0.32.0", {}, True),
        ("0.32.0", {"VLLM_BATCH_INVARIANT": "0"}, True),
        ("0.32.0", {"VLLM_BATCH_INVARIANT": "1"}, False),
        ("0.10.2", {}, False),  # no such mode in that version: nothing to suggest
    ],
)
def test_note_when_the_version_has_batch_invariance_and_the_host_does_not_set_it(version, env, noted):
    cfg = host_config({"vllm_version": version, "vllm_env": env})
    note = batch_invariance_note(cfg)
    assert (note is not None) is noted
    if noted:
        assert note.startswith(f"note: gpu01: vLLM {version} has VLLM_BATCH_INVARIANT=1") and "\n" not in note


def test_targets_and_measured_record_from_the_inventory():
    cfg = host_config(
        {
            "quantization": "fp8",
            "dtype": "bfloat16",
            "api_key": "sk-secret-123456",
            "vllm_port": 8001,
            "gateway_port": 8080,
        },
        address="10.0.0.5",
    )
    t = host_target(cfg)
    assert (t.base_url, t.model, t.api_key, t.label) == ("http://10.0.0.5:8001", "tiny", "sk-secret-123456", "gpu01")
    assert "sk-secret" not in str(t.to_dict()) and gateway_target(cfg).base_url == "http://10.0.0.5:8080"
    assert measured_for(cfg) == {
        "vllm_version": "0.32.0",
        "model": "tiny",
        "dtype": "bfloat16",
        "quantization": "fp8",
        "kv_cache_dtype": "auto",
    }
