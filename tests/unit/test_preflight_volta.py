"""The V100 checks of issue 27 (volta_checks.py, engine_checks.py) on the lab's GPU profiles,
from a data file (tests/unit/data/preflight/v100_checks.yaml: one inventory, each check's
verdict on the V100 box and on the H200), and the version rules behind them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.preflight_cases import config, facts
from vfleet.roles.preflight import host_checks
from vfleet.roles.preflight._engine_checks import check_batched_tokens, check_swap_space
from vfleet.roles.preflight._fact_table import MemTotal
from vfleet.roles.preflight._volta_checks import (
    check_attention_backend,
    check_cuda_graphs,
    check_volta_memory_utilization,
    engine_on_gpu,
)

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "vfleet" / "lab" / "profiles"
CASES = yaml.safe_load((Path(__file__).parent / "data" / "preflight" / "v100_checks.yaml").read_text())
GIB = 1024**3


def _host(profile: str, **over: Any) -> tuple[Any, dict[str, Any]]:
    """Config and facts of a lab profile with the case's inventory, the host's RAM read from the
    profile's /proc/meminfo through the fact's own parser."""
    cfg = config({**CASES["vars"], **CASES["profiles"][profile], **over})
    ram = MemTotal().parse((LAB / profile / "extra" / "meminfo").read_text())
    return cfg, facts(cfg, LAB / profile, mem_total_bytes=ram)


@pytest.mark.parametrize("check_id,profile", [(c, p) for c in CASES["expected"] for p in CASES["profiles"]])
def test_each_v100_check_fires_on_the_v100_and_not_on_the_h200(check_id: str, profile: str) -> None:
    want = CASES["expected"][check_id][profile]
    cfg, f = _host(profile)
    found = [c for c in host_checks(cfg, f) if c.id == check_id]
    if want["status"] == "absent":
        assert found == []
        return
    (c,) = found
    assert c.status == want["status"], c
    for words in want.get("says", []):
        assert words in c.message, (words, c.message)
    for words in want.get("fix", []):
        assert words in c.fix, (words, c.fix)


def test_v1_on_volta_refuses_flash_attention_and_uses_flex_attention() -> None:
    cfg, f = _host(
        "v100-8-pcie", vllm_version="0.11.0", vllm_env={}, vllm_extra_args=["--attention-backend", "FLASH_ATTN"]
    )
    c = check_attention_backend(cfg, f)
    assert c.status == "fail" and "FLEX_ATTENTION" in c.message and "--attention-backend" in c.fix
    quiet = check_attention_backend(config({**CASES["vars"], "vllm_version": "0.11.0", "vllm_env": {}}), f)
    assert quiet.status == "pass" and "(V1 engine) uses the FLEX_ATTENTION" in quiet.message


@pytest.mark.parametrize(
    "version,cc,engine",
    [
        ("0.5.4", "7.0", "V0"),
        ("0.9.2", "7.0", "V0"),
        ("0.9.2", "9.0", "V1"),
        ("0.10.2", "7.0", "V1"),
        ("0.11.0", "7.5", "V1"),
    ],
)
def test_engine_on_gpu_follows_the_release_table(version: str, cc: str, engine: str) -> None:
    assert engine_on_gpu(version, cc) == engine


def test_cuda_graphs_pass_with_enforce_eager_or_room_left() -> None:
    cfg, f = _host("v100-8-pcie", enforce_eager=True)
    assert check_cuda_graphs(cfg, f).status == "pass"
    cfg, f = _host("v100-8-pcie", gpu_memory_utilization=0.9)
    c = check_cuda_graphs(cfg, f)
    assert c.status == "pass" and "3.2 GiB" in c.message


def test_swap_space_fails_above_seventy_percent_and_is_gone_from_0_18() -> None:
    cfg, f = _host("v100-8-pcie", swap_space=24)  # 24 x 8 = 192 GiB > 0.7 x 188.4
    c = check_swap_space(cfg, f)
    assert c.status == "fail" and "Too large swap space" in c.message
    cfg, f = _host("v100-8-pcie", vllm_version="0.18.0", swap_space=24)
    assert check_swap_space(cfg, f) is None  # vllm#36216 removed the flag
    cfg, f = _host("v100-8-pcie", swap_space=None)  # vLLM's default 4 GiB x 8
    assert check_swap_space(cfg, f).status == "pass"


def test_swap_space_unknown_ram_says_so() -> None:
    cfg = config(CASES["vars"])
    c = check_swap_space(cfg, facts(cfg, LAB / "v100-8-pcie"))
    assert c.status == "pass" and "host RAM unknown" in c.message


def test_batched_tokens_explicitly_unchunked_fails_on_v1_too() -> None:
    cfg, f = _host("h200-1", enable_chunked_prefill=False)
    c = check_batched_tokens(cfg, f)
    assert c.status == "fail" and "enable_chunked_prefill: false" in c.message
    cfg, f = _host("v100-8-pcie", max_num_batched_tokens=8192)
    assert check_batched_tokens(cfg, f).status == "pass"
    cfg, f = _host("v100-8-pcie", max_num_batched_tokens=None)
    assert check_batched_tokens(cfg, f) is None  # vLLM's own default fits


def test_lab_profiles_ram_reaches_the_facts() -> None:
    assert _host("h200-1")[1]["mem_total_bytes"] == 131961788 * 1024
    assert _host("v100-8-pcie")[1]["mem_total_bytes"] == 197588060 * 1024


def test_memory_utilization_on_volta_with_unknown_memory_size_still_warns() -> None:
    """nvidia-smi prints [N/A] for memory.total on some boards: the parser keeps the key with None."""
    cfg, f = _host("v100-8-pcie", gpu_memory_utilization=0.95)
    f["gpus"] = [{**g, "memory_total_mib": None} for g in f["gpus"]]
    c = check_volta_memory_utilization(cfg, f)
    assert c.status == "warn" and "5% of each GPU" in c.message


def test_v0_turns_chunked_prefill_on_for_long_context_unless_excluded() -> None:
    """vLLM's V0 (_set_default_args_v0) chunks prefill by itself above max_model_len 32768 on CUDA:
    the lab's Qwen2 (use_sliding_window: false) then starts with a small budget."""
    cfg, f = _host("v100-8-pcie", max_model_len=65536)
    c = check_batched_tokens(cfg, f)
    assert c.status == "pass" and "above max_model_len 32768" in c.message
    cfg, f = _host("v100-8-pcie", max_model_len=32768)  # not above: V0 leaves it off
    assert check_batched_tokens(cfg, f).status == "fail"
    cfg, f = _host("v100-8-pcie", max_model_len=65536, lora_adapters=[{"name": "sql", "source": "/srv/src/sql"}])
    c = check_batched_tokens(cfg, f)
    assert c.status == "fail" and "not for --enable-lora" in c.message
    cfg, f = _host("v100-8-pcie", max_model_len=65536, vllm_extra_args=["--task=embed"])
    assert "not for a pooling model" in check_batched_tokens(cfg, f).message
    cfg, f = _host("v100-8-pcie", max_model_len=65536)
    f["model_config"] = {**f["model_config"], "use_sliding_window": True}
    c = check_batched_tokens(cfg, f)
    assert c.status == "fail" and "sliding-window" in c.message
    f["model_config"] = None  # config.json unread: cannot tell
    c = check_batched_tokens(cfg, f)
    assert c.status == "warn" and "was not read" in c.message and "enable_chunked_prefill: true" in c.fix
