"""The compile cache's pack and install commands (vfleet/roles/compile_cache/_files.py) run for real
in bash on temporary folders: a source host's cache packed with its manifest and key, copied
(cp -a, rsync's stand-in) to another host's staging folder at the identical path layout,
installed entry by entry; a damaged copy installs nothing; an entry already there is kept; a
dropped key removes its entries."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.unit.configs import host_config
from vfleet.engine.errors import VfleetError
from vfleet.roles.compile_cache._files import (
    CacheFiles,
    drop_command,
    install_command,
    list_command,
    pack_command,
    parse_entries,
    read_key_command,
)
from vfleet.roles.compile_cache._key import key_of
from vfleet.roles.compile_cache._stored import StoredCache, choose_entries, parse_stored

BACKBONE = "0a1b2c3d4e"
AOT = "torch_aot_compile/" + "ab" * 32
OLD = "9f8e7d6c5b"


def bash(cmd: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", cmd], input=stdin, capture_output=True, text=True, timeout=30)


def host(tmp: Path, name: str) -> CacheFiles:
    """A host's cache layout under tmp/name (cache_dir), like /var/cache/<service_name>."""
    return CacheFiles(str(tmp / name / "vllm"), str(tmp / name / ".vfleet-compile"))


def fill(files: CacheFiles) -> None:
    """What vLLM 0.20 writes: a backbone entry with its inductor cache, an AOT entry, an old one."""
    base = Path(files.compiled)
    for entry, rel, text in (
        (BACKBONE, "rank_0_0/backbone/computation_graph.py", "graph"),
        (BACKBONE, "rank_0_0/backbone/inductor_cache/fx/ab/cd", "kernel"),
        (AOT, "rank_0_0/model", "aot"),
        (AOT, "inductor_cache/x", "x"),
        (OLD, "rank_0_0/backbone/old.py", "old"),
    ):
        p = base / entry / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    old = base / OLD
    for p in [*old.rglob("*"), old]:
        os.utime(p, (1000, 1000))


@functools.lru_cache(maxsize=1)
def key():
    cfg = host_config({"vllm_version": "0.20.0"})
    return key_of(
        cfg,
        gpu_model="NVIDIA H200",
        model="tiny-0123456789ab",
        argv=["vllm", "serve", "/m"],
        env=[("VLLM_CACHE_ROOT", cfg.vllm_cache_root), ("VLLM_API_KEY", "k")],
    )


def packed(tmp: Path) -> tuple[CacheFiles, list[str]]:
    src = host(tmp, "gpu01")
    fill(src)
    listed = bash(list_command(src))
    entries = parse_entries(listed.stdout.splitlines())
    assert [e.name for e in entries] == sorted([BACKBONE, OLD, AOT])
    chosen, why = choose_entries(entries, started_at=2000, stored=None, key=key())
    assert sorted(chosen) == sorted([BACKBONE, AOT]) and why == "written since the service started"
    r = bash(pack_command(src, key().digest, chosen), stdin=StoredCache(key(), tuple(chosen), "gpu01").to_json())
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) > 0
    return src, chosen


def copy_to(src: CacheFiles, dst: CacheFiles) -> None:
    Path(dst.work).mkdir(parents=True, exist_ok=True)
    assert bash(f"cp -a {src.export(key().digest)} {dst.staging(key().digest)}").returncode == 0


def test_pack_then_install_on_another_host(tmp_path: Path) -> None:
    src, chosen = packed(tmp_path)
    export = Path(src.export(key().digest))
    manifest = (export / "MANIFEST.sha256").read_text()
    assert (
        "torch_compile_cache/0a1b2c3d4e/rank_0_0/backbone/computation_graph.py" in manifest and "key.json" in manifest
    )
    assert OLD not in manifest  # another key's entry stays home
    assert not Path(str(export) + ".tmp").exists()
    stored = parse_stored(bash(read_key_command(src)).stdout)  # the source now says what it holds
    assert stored is not None and stored.key == key().__class__.from_stored(key().stored())
    dst = host(tmp_path, "gpu02")
    copy_to(src, dst)
    r = bash(install_command(dst, key().digest, chosen, None, None))
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split("\n")[:-1]) == sorted(f"installed {e}" for e in chosen)
    assert (Path(dst.compiled) / BACKBONE / "rank_0_0/backbone/inductor_cache/fx/ab/cd").read_text() == "kernel"
    assert (Path(dst.compiled) / AOT / "rank_0_0/model").read_text() == "aot"
    assert not Path(dst.staging(key().digest)).exists()
    got = parse_stored(Path(dst.key_file).read_text())
    assert got is not None and got.key.digest == key().digest and set(got.entries) == set(chosen)
    assert "secret" in Path(dst.key_file).read_text() and '"k"' not in Path(dst.key_file).read_text()


def test_damaged_copy_installs_nothing(tmp_path: Path) -> None:
    src, chosen = packed(tmp_path)
    dst = host(tmp_path, "gpu02")
    copy_to(src, dst)
    (Path(dst.staging(key().digest)) / "torch_compile_cache" / AOT / "rank_0_0/model").write_text("half")
    r = bash(install_command(dst, key().digest, chosen, None, None))
    assert r.returncode != 0
    assert not Path(dst.compiled).exists() and not Path(dst.key_file).exists()


def test_entry_already_there_is_kept(tmp_path: Path) -> None:
    src, chosen = packed(tmp_path)
    dst = host(tmp_path, "gpu02")
    mine = Path(dst.compiled) / BACKBONE / "rank_0_0" / "mine"
    mine.parent.mkdir(parents=True)
    mine.write_text("its own")
    copy_to(src, dst)
    r = bash(install_command(dst, key().digest, chosen, None, None))
    assert r.returncode == 0, r.stderr
    assert f"kept {BACKBONE}" in r.stdout and f"installed {AOT}" in r.stdout
    assert mine.read_text() == "its own"


def test_drop_removes_the_keys_entries_only(tmp_path: Path) -> None:
    src, chosen = packed(tmp_path)
    assert bash(drop_command(src, chosen)).returncode == 0
    left = sorted(e.name for e in parse_entries(bash(list_command(src)).stdout.splitlines()))
    assert left == [OLD] and not Path(src.key_file).exists()


def test_warm_source_shares_what_its_key_recorded(tmp_path: Path) -> None:
    src, chosen = packed(tmp_path)
    entries = parse_entries(bash(list_command(src)).stdout.splitlines())
    stored = parse_stored(bash(read_key_command(src)).stdout)
    again, why = choose_entries(entries, started_at=10**10, stored=stored, key=key())
    assert sorted(again) == sorted(chosen) and "recorded" in why
    every, why = choose_entries(entries, started_at=10**10, stored=None, key=key())
    assert sorted(every) == sorted([BACKBONE, AOT, OLD]) and "started warm" in why
    assert choose_entries([], started_at=10**10, stored=None, key=key())[0] == []


def test_names_not_like_vllm_entries_are_refused(tmp_path: Path) -> None:
    with pytest.raises(VfleetError, match="not a vLLM cache entry"):
        pack_command(host(tmp_path, "a"), key().digest, ["../../etc"])
    assert parse_entries(["1 2 ../x", "1 2 torch_aot_compile", "x 2 0a1b2c3d4e"]) == []
    assert parse_stored(json.dumps({"key": {"x": 1}})) is None and parse_stored("not json") is None
