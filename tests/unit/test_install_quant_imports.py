"""The install's verify step imports what the host's quantization makes vLLM import at start
(vllm_facts quantization_imports): an install made with vllm_install_no_deps once verified
vLLM 0.20.0 and then could not start any quantized model (No module named
'compressed_tensors'). The rendered script is run here for real, in a Python whose vllm and
torch are stand-ins, with and without the module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.configs import host_config
from vfleet.config import vllm_facts
from vfleet.roles.install import _venv as vllm_install


def _site(tmp_path: Path, *modules: str) -> Path:
    """A folder of stand-in packages: vllm 0.20.0, a CPU torch, and `modules`."""
    site = tmp_path / "site"
    for name, text in {
        "vllm": "__version__ = '0.20.0'\n",
        "torch": "__version__ = '2.11.0'\nclass version:\n    cuda = None\n",
        **{m: "" for m in modules},
    }.items():
        (site / name).mkdir(parents=True, exist_ok=True)
        (site / name / "__init__.py").write_text(text)
    return site


def _config(tmp_path: Path, quantization: str | None):
    return host_config(
        {
            "vllm_version": "0.20.0",
            "vllm_root": str(tmp_path / "root"),
            "quantization": quantization,
            "vllm_install_no_deps": True,
        }
    )


def _verify(tmp_path: Path, site: Path, quantization: str | None) -> tuple[subprocess.CompletedProcess, Path]:
    """The install change's verify step for a 0.20.0 host with `quantization`, run with `site`."""
    cfg = _config(tmp_path, quantization)
    venv = tmp_path / "root" / "vllm-0.20.0"
    venv.mkdir(parents=True)
    change = vllm_install.install_change(cfg, str(venv))
    r = subprocess.run(
        [sys.executable, "-"],
        input=change.stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    return r, venv / vllm_install.MARKER


def test_a_quantized_host_without_compressed_tensors_fails_with_one_line_and_the_fix(tmp_path) -> None:
    r, marker = _verify(tmp_path, _site(tmp_path, "loguru"), "fp8")
    assert r.returncode != 0 and not marker.exists()
    line = r.stderr.strip()
    assert "\n" not in line, line
    assert "compressed_tensors" in line and "add compressed-tensors to vllm_extra_pins" in line
    assert "quantization fp8" in line and "vLLM 0.20.0" in line


def test_with_the_module_it_verifies_and_the_marker_records_the_imports(tmp_path) -> None:
    r, marker = _verify(tmp_path, _site(tmp_path, "compressed_tensors", "loguru"), "awq")
    assert r.returncode == 0, r.stderr
    cfg = _config(tmp_path, "awq")
    recorded = json.loads(marker.read_text())["spec_id"]
    assert recorded == vllm_install.spec_id(cfg.install_spec, vllm_install.verify_imports(cfg))
    # the same venv without a quantization has another proof: setting one later verifies again
    assert recorded != vllm_install.spec_id(cfg.install_spec)


def test_no_quantization_imports_nothing_more_and_keeps_old_markers(tmp_path) -> None:
    r, _ = _verify(tmp_path, _site(tmp_path), None)
    assert r.returncode == 0, r.stderr
    cfg = host_config({"vllm_version": "0.20.0"})
    assert vllm_install.verify_imports(cfg) == []
    assert "imports" in vllm_install.install_change(cfg, cfg.venv_path).stdin  # the key, empty


@pytest.mark.parametrize(
    "version, quant, modules",
    [
        ("0.20.0", "fp8", {"compressed_tensors", "loguru"}),
        ("0.32.0", "gptq_marlin", {"compressed_tensors", "loguru"}),
        ("0.20.0", "bitsandbytes", {"compressed_tensors", "loguru", "bitsandbytes"}),
        ("0.11.0", "bitsandbytes", {"bitsandbytes"}),  # before the checked floor: only what every version needs
        ("0.11.0", "awq", set()),
        ("0.20.0", None, set()),
    ],
)
def test_the_table_by_version_and_method(version: str, quant: str | None, modules: set[str]) -> None:
    rows = vllm_facts.quantization_imports(version, quant)
    assert {m for r in rows for m in r["modules"]} == modules
    assert all(r["source"] and r["pip"] for r in rows)
