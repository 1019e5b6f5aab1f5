"""The measured record: which setup fields differ between two runs (bench.compare, eval.compare)."""

import pytest

from vfleet.clients.measured import differences, record


def test_differences_name_what_changed_and_skip_unknowns_and_varying_figures():
    a = record(vllm_version="0.19.1", model="m", dtype="bfloat16", gpu_memory_used_mib=1000, gpu_count=8)
    b = record(vllm_version="0.20.0", model="m", dtype="bfloat16", gpu_memory_used_mib=2000, quantization="fp8")
    assert differences(a, b) == ["vLLM version 0.19.1 -> 0.20.0"]


def test_argv_change_is_named_without_printing_the_command_line():
    a, b = record(vllm_argv=["vllm", "serve", "x"]), record(vllm_argv=["vllm", "serve", "x", "--dtype", "half"])
    assert differences(a, b) == ["vLLM command line changed"]
    assert differences(None, b) == []


def test_record_refuses_a_field_nobody_compares():
    with pytest.raises(ValueError, match="not a measured field: vllm_verison"):
        record(vllm_verison="0.20.0")
