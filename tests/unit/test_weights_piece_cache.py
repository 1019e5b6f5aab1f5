"""The chain's piece manifest kept on the controller between deploys (piece_cache.py): read
back only while the files are as they were, re-made when they changed or the entry was
tampered with; real files in temp dirs."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from vfleet.roles.model_source._manifest import manifest_id, write_manifest
from vfleet.roles.weights import _pieces as pieces
from vfleet.roles.weights._piece_cache import piece_manifest_for

PIECE = 16 << 10


@pytest.fixture(autouse=True)
def cache_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


def _model(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    (d / "sub").mkdir(parents=True)
    (d / "config.json").write_text('{"architectures": ["X"]}\n')
    (d / "model-00001-of-00002.safetensors").write_bytes(os.urandom(5 * PIECE + 7))
    (d / "sub" / "model-00002-of-00002.safetensors").write_bytes(os.urandom(3 * PIECE))
    write_manifest(d)
    return d


def _by_hand(path: Path) -> tuple[str, ...]:
    data = path.read_bytes()
    return tuple(hashlib.sha256(data[i : i + PIECE]).hexdigest() for i in range(0, max(len(data), 1), PIECE))


def test_threaded_hashing_matches_each_piece_hashed_by_hand(tmp_path):
    model = _model(tmp_path)
    pm = pieces.make_piece_manifest(model, PIECE)
    assert [f.path for f in pm.files] == [
        "MANIFEST.sha256",
        "config.json",
        "model-00001-of-00002.safetensors",
        "sub/model-00002-of-00002.safetensors",
    ]
    for f in pm.files:
        assert f.sha256 == _by_hand(model / f.path), f.path


def test_second_deploy_reads_the_kept_manifest_instead_of_hashing(tmp_path, cache_home):
    model = _model(tmp_path)
    first, kept = piece_manifest_for(model, manifest_id(model), PIECE)
    assert not kept and list((cache_home / "vfleet" / "pieces").glob("*.json"))
    again, kept = piece_manifest_for(model, manifest_id(model), PIECE)
    assert kept and again == first and again.id == first.id == pieces.make_piece_manifest(model, PIECE).id


def test_a_changed_file_is_hashed_again(tmp_path):
    model = _model(tmp_path)
    first, _ = piece_manifest_for(model, manifest_id(model), PIECE)
    shard = model / "sub" / "model-00002-of-00002.safetensors"
    shard.write_bytes(os.urandom(3 * PIECE))  # same size, new bytes, new mtime; manifest left stale
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))
    now, kept = piece_manifest_for(model, manifest_id(model), PIECE)
    assert not kept and now != first
    assert {f.path: f.sha256 for f in now.files}[shard.relative_to(model).as_posix()] == _by_hand(shard)


@pytest.mark.parametrize("damage", ["hash", "garbage", "id"])
def test_a_tampered_entry_is_never_trusted(tmp_path, cache_home, damage):
    model = _model(tmp_path)
    first, _ = piece_manifest_for(model, manifest_id(model), PIECE)
    entry = next((cache_home / "vfleet" / "pieces").glob("*.json"))
    body = json.loads(entry.read_text())
    if damage == "hash":
        body["files"][2]["sha256"][0] = "0" * 64
        entry.write_text(json.dumps(body))
    elif damage == "id":
        body["id"] = "f" * 64
        entry.write_text(json.dumps(body))
    else:
        entry.write_text("{not json")
    again, kept = piece_manifest_for(model, manifest_id(model), PIECE)
    assert not kept and again == first


def test_a_cache_that_cannot_be_written_only_costs_a_rehash(tmp_path, cache_home):
    model = _model(tmp_path)
    cache_home.write_text("a file where the cache folder would be")
    a, kept_a = piece_manifest_for(model, manifest_id(model), PIECE)
    b, kept_b = piece_manifest_for(model, manifest_id(model), PIECE)
    assert (kept_a, kept_b) == (False, False) and a == b
    assert not list(tmp_path.rglob(".piece-*"))
