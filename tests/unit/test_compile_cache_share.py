"""The compile-cache step of a rollout (vfleet/roles/compile_cache/_share.py) over four hosts whose
commands run for real in bash on temporary folders (no SSH; the copy between hosts is cp -a):
the first batch's host packs what its start compiled; a host of the same key gets it before its
restart; a host with another GPU model is skipped with one line naming the field; a host that
kept a cache under an older key has it dropped with one line, then gets the new one."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.unit.configs import host_config
from vfleet.engine.connection import CommandResult
from vfleet.engine.runner import HostFailed
from vfleet.roles.compile_cache._files import CacheFiles
from vfleet.roles.compile_cache._share import CacheShare
from vfleet.roles.compile_cache._stored import StoredCache

VARS = {"vllm_version": "0.20.0", "model_name": "llama", "model_source": "/srv/src/llama", "compile_cache_share": True}
ENTRIES = ("0a1b2c3d4e", "torch_aot_compile/" + "cd" * 32)


class Ctx:
    """A HostContext whose commands run in local bash."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.config = host_config(VARS, name=name)
        self.host = SimpleNamespace(user=None, address="127.0.0.1", port=22)
        self.records: list[tuple[str, Any, str]] = []

    def run(self, command: str, *, timeout: float | None = None, stdin: str | None = None) -> CommandResult:
        r = subprocess.run(["bash", "-c", command], input=stdin, capture_output=True, text=True, timeout=60)
        return CommandResult(command, r.returncode, r.stdout, r.stderr)

    def must(self, command: str, *, what: str, timeout: float | None = None, stdin: str | None = None):
        r = self.run(command, stdin=stdin)
        if not r.ok:
            raise HostFailed(f"{what}: {r.tail()}")
        return r

    def record(self, action: str, target: str, status: Any, message: str = "", **_: Any) -> None:
        self.records.append((action, status, message))


class CopyByCp:
    def copy(self, dst: Ctx, src: Ctx, export: str, staging: str) -> int:
        os.makedirs(os.path.dirname(staging), exist_ok=True)
        shutil.copytree(export, staging)
        return 1


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(
        CacheFiles,
        "of",
        classmethod(
            lambda cls, cfg: cls(str(tmp_path / cfg.name / "vllm"), str(tmp_path / cfg.name / ".vfleet-compile"))
        ),
    )
    ctxs = {n: Ctx(n) for n in ("gpu01", "gpu02", "gpu03", "gpu04")}
    play = SimpleNamespace(contexts=ctxs, options=SimpleNamespace(check=False), printed=[])
    play.print = lambda line, **_: play.printed.append(line)
    return tmp_path, ctxs, play


def compiled(tmp: Path, host: str) -> Path:
    base = tmp / host / "vllm" / "torch_compile_cache"
    for e in ENTRIES:
        (base / e / "rank_0_0").mkdir(parents=True, exist_ok=True)
        (base / e / "rank_0_0" / "model").write_text(f"{e} compiled on {host}")
    return base


def test_first_batch_cache_reaches_equal_keys_only(fleet) -> None:
    tmp, ctxs, play = fleet
    compiled(tmp, "gpu01")
    cs = CacheShare(play)  # type: ignore[arg-type]
    for ctx in ctxs.values():
        cs._read(ctx)  # type: ignore[arg-type]
    key, facts = cs.hosts["gpu01"]
    cs.hosts["gpu01"] = (key, {**facts, "started": 0})  # its unit started before it compiled
    other_gpu = dataclasses.replace(cs.hosts["gpu03"][0], gpu_model="NVIDIA H100 80GB HBM3")
    cs.hosts["gpu03"] = (other_gpu, cs.hosts["gpu03"][1])
    # gpu04 kept a cache installed under vLLM 0.19.1: its key file says so
    old = dataclasses.replace(key, vllm_version="0.19.1")
    old_entry = "9f8e7d6c5b"
    (tmp / "gpu04" / "vllm" / "torch_compile_cache" / old_entry).mkdir(parents=True)
    files4 = CacheFiles.of(ctxs["gpu04"].config)
    (tmp / "gpu04" / "vllm" / ".vfleet-compile-key.json").write_text(StoredCache(old, (old_entry,), "gpu09").to_json())
    cs._read(ctxs["gpu04"])  # type: ignore[arg-type]

    cs._pack(ctxs["gpu01"])  # type: ignore[arg-type]
    assert list(cs.packed) == [key.digest] and cs.packed[key.digest].entries == tuple(sorted(ENTRIES))
    for name in ("gpu02", "gpu03", "gpu04"):
        cs._copy(ctxs[name], CopyByCp())  # type: ignore[arg-type]

    for name in ("gpu02", "gpu04"):
        got = tmp / name / "vllm" / "torch_compile_cache" / ENTRIES[1] / "rank_0_0" / "model"
        assert got.read_text() == f"{ENTRIES[1]} compiled on gpu01"
        assert "installed before the restart: 2 of 2 entries new" in ctxs[name].records[-1][2]
    assert not (tmp / "gpu03" / "vllm" / "torch_compile_cache").exists()
    assert not (Path(files4.compiled) / old_entry).exists()
    assert sorted(cs.lines) == [
        "gpu03: compile cache of gpu01 not copied: gpu_model differs (none in gpu01, NVIDIA H100 80GB HBM3 on gpu03): "
        "gpu03 compiles its own (gpu_model)",
        "gpu04: compile cache dropped: vllm_version differs (0.19.1 in the cache, 0.20.0 here): "
        "gpu04 compiles its own (vllm_version)",
    ]

    # a later run: gpu02 holds the cache of its key already, nothing moves
    cs2 = CacheShare(play)  # type: ignore[arg-type]
    cs2._read(ctxs["gpu02"])  # type: ignore[arg-type]
    cs2.packed = cs.packed
    cs2._copy(ctxs["gpu02"], CopyByCp())  # type: ignore[arg-type]
    assert ctxs["gpu02"].records[-1][2] == "already holds the compile cache of its key"


def test_a_damaged_copy_is_a_line_not_a_failed_host(fleet) -> None:
    tmp, ctxs, play = fleet
    compiled(tmp, "gpu01")
    cs = CacheShare(play)  # type: ignore[arg-type]
    for name in ("gpu01", "gpu02"):
        cs._read(ctxs[name])  # type: ignore[arg-type]
    key, facts = cs.hosts["gpu01"]
    cs.hosts["gpu01"] = (key, {**facts, "started": 0})
    cs._pack(ctxs["gpu01"])  # type: ignore[arg-type]

    class Damaging(CopyByCp):
        def copy(self, dst, src, export, staging):
            super().copy(dst, src, export, staging)
            Path(staging, "torch_compile_cache", ENTRIES[0], "rank_0_0", "model").write_text("half")
            return 1

    cs._copy(ctxs["gpu02"], Damaging())  # type: ignore[arg-type]
    assert len(cs.lines) == 1 and cs.lines[0].startswith("gpu02: compile cache of gpu01 not installed (")
    assert cs.lines[0].endswith("gpu02 compiles its own")
    assert not (tmp / "gpu02" / "vllm" / "torch_compile_cache" / ENTRIES[0]).exists()
    assert not (tmp / "gpu02" / ".vfleet-compile" / f"staging-{key.digest[:12]}").exists()
