import hashlib
import json
import shutil
import subprocess

import pytest

from vfleet.roles.model_source import _manifest as wm


def _model(tmp_path, sharded=False):
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text('{"a": 1}\n')
    (d / "tokenizer.json").write_text("{}\n")
    (d / "sub").mkdir()
    (d / "sub" / "x.txt").write_bytes(b"hello")
    if sharded:
        (d / "model-00001-of-00002.safetensors").write_bytes(b"A" * 100)
        (d / "model-00002-of-00002.safetensors").write_bytes(b"B" * 50)
        (d / wm.INDEX_NAME).write_text(
            json.dumps(
                {
                    "metadata": {},
                    "weight_map": {
                        "a.weight": "model-00001-of-00002.safetensors",
                        "b.weight": "model-00002-of-00002.safetensors",
                        "c.weight": "model-00002-of-00002.safetensors",
                    },
                }
            )
        )
    else:
        (d / "model.safetensors").write_bytes(b"W" * 10)
    return d


def test_make_manifest_hashes_sizes_and_format(tmp_path):
    d = _model(tmp_path)
    m = wm.make_manifest(d)
    assert set(m["files"]) == {"config.json", "tokenizer.json", "sub/x.txt", "model.safetensors"}
    assert m["files"]["sub/x.txt"] == {"sha256": hashlib.sha256(b"hello").hexdigest(), "size": 5}
    assert m["total_bytes"] == sum(f["size"] for f in m["files"].values())
    lines = m["text"].splitlines()
    assert lines == sorted(lines, key=lambda line: line[66:])
    assert all(len(line.split("  ", 1)[0]) == 64 for line in lines)
    assert wm.parse_manifest(m["text"]) == {k: v["sha256"] for k, v in m["files"].items()}


def test_manifest_excludes_itself_and_is_stable(tmp_path):
    d = _model(tmp_path)
    first = wm.write_manifest(d)
    assert first["changed"]
    second = wm.write_manifest(d)
    assert not second["changed"]
    assert wm.MANIFEST_NAME not in second["files"]
    assert (d / wm.MANIFEST_NAME).read_text() == first["text"]


def test_missing_shard_is_refused(tmp_path):
    d = _model(tmp_path, sharded=True)
    assert wm.make_manifest(d)["shards"] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    (d / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(wm.ManifestError, match="00002"):
        wm.make_manifest(d)


def _verify(d) -> subprocess.CompletedProcess:
    """The command a host runs before a copy is trusted, run here with the real sha256sum."""
    return subprocess.run(["sh", "-c", wm.verify_command(str(d))], capture_output=True, text=True)


def test_verify_command_accepts_a_good_copy_and_names_what_is_wrong(tmp_path):
    d = _model(tmp_path, sharded=True)
    wm.write_manifest(d)
    assert _verify(d).returncode == 0
    (d / "config.json").write_text("changed")
    r = _verify(d)
    assert r.returncode != 0 and "config.json: FAILED" in r.stdout + r.stderr
    wm.write_manifest(d)
    (d / "model-00001-of-00002.safetensors").unlink()
    r = _verify(d)
    assert r.returncode != 0 and "00001" in r.stdout + r.stderr


def test_parse_rejects_garbage():
    with pytest.raises(wm.ManifestError):
        wm.parse_manifest("nothex  file\n")
    assert wm.parse_manifest("a" * 64 + " *bin.file\n") == {"bin.file": "a" * 64}


@pytest.mark.skipif(not shutil.which("sha256sum"), reason="coreutils sha256sum")
def test_real_sha256sum_verifies_the_manifest(tmp_path):
    d = _model(tmp_path, sharded=True)
    wm.write_manifest(d)
    cmd = wm.verify_command(str(d))
    ok = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    # corrupt one byte: sha256sum -c fails
    (d / "sub" / "x.txt").write_bytes(b"hellO")
    bad = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True)
    assert bad.returncode != 0 and "x.txt" in bad.stdout + bad.stderr


@pytest.mark.skipif(not shutil.which("sha256sum"), reason="coreutils sha256sum")
def test_real_check_catches_shard_missing_from_manifest_and_disk(tmp_path):
    d = _model(tmp_path, sharded=True)
    wm.write_manifest(d)
    # a manifest made before the index gained a shard: sha256sum alone passes
    idx = json.loads((d / wm.INDEX_NAME).read_text())
    idx["weight_map"]["z.weight"] = "model-00003-of-00003.safetensors"
    (d / wm.INDEX_NAME).write_text(json.dumps(idx))
    # rewrite the manifest by hand to match the new index file's hash
    lines = []
    for rel, digest in wm.parse_manifest((d / wm.MANIFEST_NAME).read_text()).items():
        if rel == wm.INDEX_NAME:
            digest = wm.sha256_file(d / rel)
        lines.append(f"{digest}  {rel}\n")
    (d / wm.MANIFEST_NAME).write_text("".join(lines))
    r = subprocess.run(["sh", "-c", wm.verify_command(str(d))], capture_output=True, text=True)
    assert r.returncode != 0
    assert "model-00003-of-00003.safetensors" in r.stderr


def test_verify_command_quotes_the_path():
    cmd = wm.verify_command("/srv/models/a b; rm -rf /")
    assert "'/srv/models/a b; rm -rf /'" in cmd
