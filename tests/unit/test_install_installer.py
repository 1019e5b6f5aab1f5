"""The install step's tool, uv or pip (vfleet/roles/install/_installer.py): which one a host
gets and the script each renders (data/plans/installer.yaml), the errors of an explicit
vllm_installer that cannot be met, and the whole install run for real on this machine with
each tool from a small wheelhouse (uv a stand-in shipped as a wheel, as the lab's wheelhouse
ships the real one: the unpacking, the flags and the verify step are the real ones)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.configs import host_config
from vfleet.engine.errors import VfleetError
from vfleet.engine.facts import FileState
from vfleet.roles.install import _venv as vllm_install
from vfleet.roles.install._installer import choose, uv_wheel_in

CASES = yaml.safe_load((Path(__file__).parent / "data" / "plans" / "installer.yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_the_installer_and_its_script(case: dict[str, Any]) -> None:
    cfg = host_config(case["vars"])
    facts = {
        "root": FileState("dir", mode="755"),
        "marker": FileState("missing"),
        "current": None,
        "uv": case["uv_on_path"],
    }
    change = next(c for c in vllm_install.plan(cfg, facts, uv_wheel=case["uv_wheel"]) if c.action == "venv")
    installer = choose(cfg, uv_on_path=case["uv_on_path"], uv_wheel=case["uv_wheel"])
    assert installer.tool == case["tool"] and case["why"] in installer.why, installer
    assert f"with {case['tool']} ({installer.why})" in change.reason
    for piece in case["has"]:
        assert piece in change.command, (piece, change.command)
    for piece in case["lacks"]:
        assert piece not in change.command, (piece, change.command)


@pytest.mark.parametrize(
    "vars, uv_on_path, error",
    [
        (
            {"vllm_installer": "uv", "vllm_wheelhouse": "/srv/wheels"},
            False,
            "no uv on the host's PATH nor a uv wheel in vllm_wheelhouse",
        ),
        ({"vllm_installer": "uv"}, False, "no uv on the host's PATH$"),
        (
            {"vllm_installer": "uv", "vllm_site_packages": ["/opt/torch/site-packages"]},
            True,
            "uv does not see the packages vllm_site_packages adds",
        ),
    ],
)
def test_an_explicit_uv_that_cannot_run_fails_the_plan(vars: dict[str, Any], uv_on_path: bool, error: str) -> None:
    with pytest.raises(VfleetError, match=error):
        choose(host_config(vars), uv_on_path=uv_on_path, uv_wheel=None)


def test_the_wheelhouses_uv_wheel_is_the_newest_of_uvs_own(tmp_path: Path) -> None:
    for name in [
        "uv-0.9.30-py3-none-any.whl",
        "uv-0.13.10-py3-none-any.whl",
        "uv-0.13.9-py3-none-any.whl",
        "uv_build-0.20.0-py3-none-any.whl",
        "uv-latest.whl",
        "uvicorn-0.30.0-py3-none-any.whl",
    ]:
        (tmp_path / name).write_bytes(b"")
    assert uv_wheel_in(str(tmp_path)) == "uv-0.13.10-py3-none-any.whl"
    assert uv_wheel_in(str(tmp_path / "missing")) is None and uv_wheel_in(None) is None


# The stand-in uv: records its arguments beside itself, installs with this Python's pip into
# the venv's site folder (--target), uninstalls by removing the package's folders.
FAKE_UV = """#!/bin/sh
echo "$*" >> "$0.calls"
sub=$2
while [ "$1" != "--" ]; do case $1 in --python) py=$2;; --find-links) wh=$2;; esac; shift; done; shift
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ "$sub" = install ]; then
    exec {python} -m pip install -q --disable-pip-version-check --no-index --find-links "$wh" --target "$site" -- "$@"
fi
for p; do rm -rf "$site/$p" "$site/$p"-*.dist-info; done
"""


def _wheel(dest: Path, name: str, version: str, files: dict[str, str]) -> None:
    """A minimal wheel (PEP 427 layout) holding `files`."""
    dist = f"{name}-{version}.dist-info"
    files = {
        **files,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in (["torch", "torchvision"] if name == "vllm" else [])),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{p},,\n" for p in [*files, f"{dist}/RECORD"])
    with zipfile.ZipFile(dest / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)


@pytest.mark.parametrize("tool", ["uv", "pip"])
def test_the_install_runs_with_each_tool_and_removes_what_it_is_told(tmp_path: Path, tool: str) -> None:
    """`vfleet install` on this machine as a local host (the wheelhouse already in place, a
    quote in vllm_root): a stand-in vLLM that needs torch and torchvision, torchvision removed."""
    root = tmp_path / "it's vllm"
    wheels = root / "wheelhouse"
    wheels.mkdir(parents=True)
    _wheel(wheels, "vllm", "0.32.0", {"vllm/__init__.py": "__version__ = '0.32.0'\n"})
    _wheel(
        wheels, "torch", "2.9.0", {"torch/__init__.py": "__version__ = '2.9.0+cpu'\nclass version:\n    cuda = None\n"}
    )
    _wheel(wheels, "torchvision", "0.24.0", {"torchvision/__init__.py": ""})
    if tool == "uv":
        _wheel(wheels, "uv", "0.0.1", {"uv-0.0.1.data/scripts/uv": FAKE_UV.format(python=sys.executable)})
    host_vars = {
        "ansible_connection": "local",
        "vllm_root": str(root),
        "vllm_version": "0.32.0",
        "vllm_package": "vllm",
        "vllm_python": sys.executable,
        "vllm_wheelhouse": str(wheels),
        "vllm_remove_packages": ["torchvision"],
        "model_name": "tiny",
    }
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"vllm": {"hosts": {"gpu-local": host_vars}}}}}))
    # no uv of this machine's: the host has only what the wheelhouse brings
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if not shutil.which("uv", path=d))
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
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )
    assert r.returncode == 0, r.stdout + r.stderr
    venv = root / "vllm-0.32.0"
    assert json.loads((venv / vllm_install.MARKER).read_text())["verified"]["version"] == "0.32.0"
    site = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    assert (site / "vllm").is_dir() and not (site / "torchvision").exists()
    report = (tmp_path / "report.json").read_text()
    if tool == "uv":
        calls = (root / ".tools" / "uv-0.0.1" / "uv.calls").read_text().splitlines()
        cache = root / ".tools" / "uv-cache"
        assert [c.split(" -- ")[0] for c in calls] == [
            f"pip install -q --python {venv}/bin/python --cache-dir {cache} --no-config --offline --no-index "
            f"--find-links {wheels} --compile-bytecode",
            f"pip uninstall -q --python {venv}/bin/python --cache-dir {cache}",
        ]
        assert not cache.exists()
        assert not (venv / "bin" / "pip").exists() and "with uv (uv 0.0.1 from the wheelhouse)" in report
    else:
        assert (venv / "bin" / "pip").exists() and "with pip (no uv on the host's PATH nor in the wheelhouse)" in report
