"""The install script, run for real on this machine (a venv, pip from a wheelhouse, the verify
step), for a host whose image already carries torch: the venv sees it through
vllm_site_packages, and vllm_install_no_deps installs exactly the wheelhouse's pins."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pip
import pytest
import yaml

from tests.unit.configs import host_config
from vfleet.roles.install import _venv as vllm_install


def _wheel(dest: Path, name: str, version: str, requires: list[str], module: str) -> None:
    """A minimal wheel (PEP 427 layout) whose package is one __init__.py."""
    dist = f"{name}-{version}.dist-info"
    meta = (
        "\n".join(
            [
                "Metadata-Version: 2.1",
                f"Name: {name}",
                f"Version: {version}",
                *[f"Requires-Dist: {r}" for r in requires],
            ]
        )
        + "\n"
    )
    files = {
        f"{name}/__init__.py": module,
        f"{dist}/METADATA": meta,
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{p},,\n" for p in [*files, f"{dist}/RECORD"])
    with zipfile.ZipFile(dest / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> tuple[Path, Path]:
    """(wheelhouse, preinstalled site folder): vllm 0.20.0 needs torch and a wheel that is in
    neither place; torch is only in the image's site folder."""
    root = tmp_path_factory.mktemp("image")
    wheels, site = root / "wheels", root / "site"
    wheels.mkdir()
    shutil.copytree(Path(pip.__file__).parent, site / "pip")  # the image's pip (no ensurepip needed)
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("__version__ = '2.11.0'\nclass version:\n    cuda = None\n")
    (site / "torch-2.11.0.dist-info").mkdir()
    (site / "torch-2.11.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
    _wheel(wheels, "vllm", "0.20.0", ["torch==2.11.0", "flashinfer-python"], "__version__ = '0.20.0'\n")
    _wheel(wheels, "xgrammar", "0.1.33", [], "")
    return wheels, site


def _install(tmp_path: Path, wheels: Path, **more) -> tuple[subprocess.CompletedProcess, Path]:
    """`vfleet install` on this machine as a local host (the device's way: no SSH, no rsync,
    the wheelhouse already where pip reads it)."""
    shutil.copytree(wheels, tmp_path / "wheelhouse")
    host_vars = {
        "ansible_connection": "local",
        "vllm_root": str(tmp_path),
        "vllm_version": "0.20.0",
        "vllm_package": "vllm",
        "vllm_python": sys.executable,
        "vllm_wheelhouse": str(tmp_path / "wheelhouse"),
        "vllm_extra_pins": ["xgrammar==0.1.33"],
        "model_name": "tiny",
        **more,
    }
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"vllm": {"hosts": {"gpu-local": host_vars}}}}}))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "vfleet.cli",
            "install",
            "--inventory",
            str(inv),
            "--report",
            str(tmp_path / "report.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[2],
    )
    return r, tmp_path / "vllm-0.20.0"


def test_no_deps_install_sees_the_images_torch_and_verifies(tmp_path, image) -> None:
    wheels, site = image
    r, venv = _install(tmp_path, wheels, vllm_site_packages=[str(site)], vllm_install_no_deps=True)
    assert r.returncode == 0, r.stdout + r.stderr
    report = (tmp_path / "report.json").read_text()
    assert "in place (local host)" in report
    marker = json.loads((venv / vllm_install.MARKER).read_text())
    assert marker["verified"]["torch"] == "2.11.0"
    assert marker["spec"]["site_packages"] == [str(site)] and marker["spec"]["no_deps"] is True
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True
    ).stdout
    assert {"vllm", "xgrammar"} <= {p["name"] for p in json.loads(listed)}


def test_without_no_deps_pip_counts_the_images_torch_and_names_what_is_missing(tmp_path, image) -> None:
    wheels, site = image
    r, venv = _install(tmp_path, wheels, vllm_site_packages=[str(site)])
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "flashinfer-python" in out and "torch" not in out.split("flashinfer-python")[0].split("ERROR")[-1]
    assert not (venv / vllm_install.MARKER).exists()


def test_the_defaults_keep_the_marker_of_venvs_verified_before() -> None:
    spec = host_config().install_spec.as_dict()
    assert "site_packages" not in spec and "no_deps" not in spec
