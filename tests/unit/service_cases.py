"""Shared ground of the vLLM service tests (test_vllm_argv, test_service_unit, test_service_env,
test_service_systemd): vLLM 0.32.0's own --help as the flag ground truth, a stand-in for
roles.vllm_facts.flag_available that reads it, and the lab host's config.

Every config is a real HostConfig (tests/unit/configs.py: inventory loader + schema, so the
defaults are the schema's and invalid values are refused where an operator's would be)."""

import re
from pathlib import Path

from tests.unit.configs import host_config
from tests.unit.test_quoting import systemd_read_words
from vfleet.config.hostconfig import HostConfig
from vfleet.roles.service._argv import vllm_argv

HELP = Path(__file__).resolve().parents[2] / "vfleet" / "config" / "data" / "vllm-0.32.0-help.txt"
SECRET = "sk-lab 'very' \"secret\" $HOME %n;"
HF_SECRET = "hf_lab 'gated' $PATH %i"


def _flags_from_help(path: Path) -> set[str]:
    flags = set()
    for line in path.read_text().splitlines():
        s = line.strip()
        if s.startswith("--"):
            for part in s.split(", "):
                flags.add(part.split()[0])
    return flags


def _choices_from_help(path: Path, flag: str) -> set[str]:
    m = re.search(rf"^\s+{re.escape(flag)} \{{([^}}]*)\}}", path.read_text(), re.M)
    assert m, flag
    return set(m.group(1).split(","))


FLAGS_0_32 = _flags_from_help(HELP)  # ground truth of vLLM 0.32.0 (--help=all)
FLAGS_OLD = FLAGS_0_32 - {"--shutdown-timeout"}


def stub_flag_available(flag: str, version: str) -> bool:
    """Local stand-in for roles.vllm_facts.flag_available in these tests."""
    return flag in (FLAGS_0_32 if version == "0.32.0" else FLAGS_OLD)


LAB = {
    "vllm_version": "0.32.0",
    "vllm_root": "/opt/vllm",
    "model_dir": "/srv/models",
    "model_name": "tiny",
    "vllm_port": 8000,
    "dtype": "bfloat16",
    "max_model_len": 2048,
    "shutdown_timeout": 30,
    "cpu_kvcache_space_gib": 1,
}

# every engine variable set to something other than vLLM's default
ENGINE = {
    "tensor_parallel_size": 2,
    "pipeline_parallel_size": 2,
    "gpu_memory_utilization": 0.85,
    "max_num_seqs": 64,
    "max_num_batched_tokens": 8192,
    "enable_chunked_prefill": True,
    "enable_prefix_caching": False,
    "enforce_eager": True,
    "quantization": "awq",
    "kv_cache_dtype": "fp8",
    "block_size": 32,
    "trust_remote_code": True,
}


def lab(**extra) -> HostConfig:
    return host_config({**LAB, **extra})


def argv_of(cfg: HostConfig, flags=stub_flag_available) -> list[str]:
    return vllm_argv(cfg, flags).argv


def exec_words(unit: str) -> list[str]:
    """ExecStart= of a rendered unit, continuation lines joined, read like systemd does."""
    m = re.search(r"^ExecStart=((?:.*\\\n)*.*)$", unit, re.M)
    assert m, unit
    return systemd_read_words(m.group(1).replace("\\\n", " "))


def value_of(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]
