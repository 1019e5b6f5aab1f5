"""hf:// model sources (vfleet/roles/model_source/_hub.py): a real Hugging Face cache layout (blobs
named by the hub's ETags, snapshots of links, refs) built here and resolved by huggingface_hub
in offline mode; the export's manifest checked by the same `sha256sum -c` a host runs; the
hostile cases each end in one line with nothing exported."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from huggingface_hub import constants, scan_cache_dir
from huggingface_hub.utils.sha import git_hash

from tests.hf_cache import add_revision
from tests.unit.configs import host_config
from vfleet.engine.errors import VfleetError
from vfleet.roles.model_source import _hub as hub, _payload as payload
from vfleet.roles.model_source._manifest import MANIFEST_NAME, verify_command
from vfleet.roles.weights import _sync as sync

REPO = "acme/tiny-chat"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OLD_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
WEIGHTS = bytes(range(256)) * 64  # model.safetensors, an LFS file: its blob is named by its sha256
CONFIG = b'{"model_type": "llama", "hidden_size": 64}\n'  # a git file: named by its git sha1
VOCAB = b"a\nb\n"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An offline controller: HF_HUB_CACHE and vfleet's export folder under tmp_path."""
    hub_cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    payload.hub_export.cache_clear()
    add_revision(
        hub_cache, REPO, COMMIT, {"config.json": CONFIG, "model.safetensors": WEIGHTS, "tokenizer/vocab.txt": VOCAB}
    )
    return hub_cache


def test_the_built_cache_is_one_huggingface_hub_reads_without_a_warning(cache):
    info = scan_cache_dir(cache)
    assert not info.warnings and [r.repo_id for r in info.repos] == [REPO]
    assert {rev.commit_hash for r in info.repos for rev in r.revisions} == {COMMIT}


def test_a_branch_resolves_offline_to_its_commit_and_exports_verified_links(cache, tmp_path):
    export = hub.resolve(hub.parse(f"hf://{REPO}@main"))
    assert export.commit == COMMIT
    assert export.folder == tmp_path / "xdg" / "vfleet" / "hf" / "models--acme--tiny-chat" / COMMIT
    assert (export.folder / "model.safetensors").read_bytes() == WEIGHTS
    assert os.readlink(export.folder / "tokenizer" / "vocab.txt").startswith(str(cache))
    lines = (export.folder / MANIFEST_NAME).read_text().splitlines()
    assert lines == [
        f"{hashlib.sha256(CONFIG).hexdigest()}  config.json",
        f"{hashlib.sha256(WEIGHTS).hexdigest()}  model.safetensors",
        f"{hashlib.sha256(VOCAB).hexdigest()}  tokenizer/vocab.txt",
    ]
    assert not list(export.folder.parent.glob(".*")), "no temporary export left behind"
    assert scan_cache_dir(cache).warnings == [] and not (cache / "models--acme--tiny-chat" / "vfleet").exists()


def test_the_copy_a_host_gets_with_copy_links_passes_the_hosts_own_check(cache, tmp_path):
    export = hub.resolve(hub.parse(f"hf://{REPO}"))
    staging = tmp_path / "staging"
    subprocess.run(["rsync", "-a", "--copy-links", f"{export.folder}/", f"{staging}/"], check=True)
    assert not any(p.is_symlink() for p in staging.rglob("*"))
    assert subprocess.run(["sh", "-c", verify_command(str(staging))]).returncode == 0
    (staging / "model.safetensors").write_bytes(WEIGHTS[:-1] + b"x")
    assert subprocess.run(["sh", "-c", verify_command(str(staging))], capture_output=True).returncode != 0


def test_model_revision_pins_a_source_written_without_one(cache):
    add_revision(cache, REPO, OLD_COMMIT, {"config.json": CONFIG, "model.safetensors": WEIGHTS[:512]}, ref="v1")
    cfg = host_config({"model_source": f"hf://{REPO}", "model_revision": "v1"})
    src = sync.resolve_source(cfg)
    assert src.hub_commit == OLD_COMMIT and src.pinned == f"hf://{REPO} (commit {OLD_COMMIT})"
    assert src.manifest_id == hashlib.sha256((src.controller_dir / MANIFEST_NAME).read_bytes()).hexdigest()
    assert sync.controller_folder(cfg) == src.controller_dir
    by_commit = sync.resolve_source(host_config({"model_source": f"hf://{REPO}@{COMMIT}"}))
    assert by_commit.hub_commit == COMMIT and by_commit.manifest_id != src.manifest_id


def test_a_branch_that_moved_is_a_new_copy(cache):
    first = sync.resolve_source(host_config({"model_source": f"hf://{REPO}@main"}))
    add_revision(cache, REPO, OLD_COMMIT, {"config.json": CONFIG, "model.safetensors": WEIGHTS[:1024]})
    payload.hub_export.cache_clear()  # a later run
    moved = sync.resolve_source(host_config({"model_source": f"hf://{REPO}@main"}))
    assert (first.hub_commit, moved.hub_commit) == (COMMIT, OLD_COMMIT) and moved.manifest_id != first.manifest_id


def _refused(spec: str, match: str, xdg: Path) -> str:
    with pytest.raises(VfleetError) as e:
        hub.resolve(hub.parse(spec))
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"model_source {spec}: ") and match in text, text
    assert not (xdg / "vfleet" / "hf" / "models--acme--tiny-chat" / COMMIT).exists(), "nothing exported"
    return text


def test_a_blob_that_does_not_match_its_hash_is_refused(cache, tmp_path):
    blob = cache / "models--acme--tiny-chat" / "blobs" / hashlib.sha256(WEIGHTS).hexdigest()
    blob.write_bytes(WEIGHTS[:-1] + b"\0")
    text = _refused(f"hf://{REPO}@main", "model.safetensors does not match the hash the hub recorded", tmp_path / "xdg")
    assert "download the revision again" in text


def test_a_git_file_that_does_not_match_its_sha1_is_refused(cache, tmp_path):
    (cache / "models--acme--tiny-chat" / "blobs" / git_hash(CONFIG)).write_bytes(CONFIG.replace(b"64", b"65"))
    _refused(f"hf://{REPO}@main", "config.json does not match", tmp_path / "xdg")


def test_a_link_that_leaves_the_cache_is_refused(cache, tmp_path):
    outside = tmp_path / "secret"
    outside.write_text("not a model")
    link = cache / "models--acme--tiny-chat" / "snapshots" / COMMIT / "config.json"
    link.unlink()
    os.symlink(outside, link)
    _refused(f"hf://{REPO}@main", "config.json links to", tmp_path / "xdg")


def test_a_plain_file_in_a_snapshot_has_no_recorded_hash_and_is_refused(cache, tmp_path):
    (cache / "models--acme--tiny-chat" / "snapshots" / COMMIT / "extra.py").write_text("import os\n")
    _refused(f"hf://{REPO}@main", "extra.py is not a link into the cache's blobs", tmp_path / "xdg")


def test_a_revision_not_in_the_cache_while_offline_says_how_to_get_it(cache, tmp_path):
    text = _refused(f"hf://{REPO}@v9", "revision 'v9' is not in the Hugging Face cache", tmp_path / "xdg")
    assert "HF_HUB_OFFLINE is set" in text and "hf download acme/tiny-chat --revision v9" in text


def test_a_repo_that_is_not_in_the_cache_while_offline_is_refused(cache, tmp_path):
    spec = "hf://acme/other@main"
    with pytest.raises(VfleetError, match="is not in the Hugging Face cache"):
        hub.resolve(hub.parse(spec))


@pytest.mark.parametrize(
    "spec, why",
    [
        ("hf://../../etc", "Repo id must use"),
        ("hf://acme/tiny/../../x", "a path inside a model repository"),
        ("hf://datasets/acme/tiny", "a dataset repository"),
        ("hf://acme/tiny@main;id", "has the revision"),
        ("hf://acme/tiny@-rf", "has the revision"),
    ],
)
def test_a_source_with_path_or_shell_characters_is_refused_by_the_schema(spec, why):
    with pytest.raises(VfleetError) as e:
        host_config({"model_source": spec})
    assert "model_source" in str(e.value) and why in str(e.value) and "\n" not in str(e.value).strip()
    with pytest.raises(hub.HubError, match=why.split()[0]):
        hub.parse(spec)


def test_model_revision_with_shell_characters_is_refused_by_the_schema():
    with pytest.raises(VfleetError, match="model_revision"):
        host_config({"model_source": f"hf://{REPO}", "model_revision": "main$(id)"})


def test_an_interrupted_export_is_made_again(cache, tmp_path):
    folder = tmp_path / "xdg" / "vfleet" / "hf" / "models--acme--tiny-chat" / COMMIT
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("half")
    export = hub.resolve(hub.parse(f"hf://{REPO}@main"))
    assert (export.folder / MANIFEST_NAME).is_file() and (export.folder / "config.json").read_bytes() == CONFIG


def test_a_blob_deleted_from_the_cache_is_named_and_its_stale_export_is_not_used(cache, tmp_path):
    export = hub.resolve(hub.parse(f"hf://{REPO}@main"))
    (cache / "models--acme--tiny-chat" / "blobs" / hashlib.sha256(WEIGHTS).hexdigest()).unlink()
    with pytest.raises(hub.HubError, match="model.safetensors: its blob .* is missing from the cache"):
        hub.resolve(hub.parse(f"hf://{REPO}@main"))
    assert not export.folder.exists(), "the export whose link lost its blob is gone"


def test_an_export_folder_that_cannot_be_written_is_one_line(cache, tmp_path):
    (tmp_path / "xdg").write_text("a file where vfleet's cache folder would be")
    with pytest.raises(hub.HubError, match="cannot write vfleet's export .*point XDG_CACHE_HOME elsewhere"):
        hub.resolve(hub.parse(f"hf://{REPO}@main"))


def test_hosts_ask_for_the_same_weights_when_their_revisions_agree():
    by_variable = host_config({"model_source": f"hf://{REPO}", "model_revision": "v1"})
    in_uri = host_config({"model_source": f"hf://{REPO}@v1"})
    default = host_config({"model_source": f"hf://{REPO}"})
    assert sync.source_key(by_variable) == sync.source_key(in_uri) == f"hf://{REPO}@v1"
    assert sync.source_key(default) == f"hf://{REPO}@main" != sync.source_key(in_uri)
    assert sync.source_key(host_config({"model_source": "/srv/src/tiny"})) == "/srv/src/tiny"


def test_status_compares_a_hub_source_through_an_existing_export_and_never_hashes_or_downloads(cache, monkeypatch):
    from vfleet.roles.status._drift import Wanted, controller_manifest_id, drift

    monkeypatch.setattr(hub, "_cache_only", True)  # what `vfleet status` sets (hub.never_download)
    cfg = host_config({"model_source": f"hf://{REPO}@main"})
    venv = cfg.venv_path
    seen = drift(cfg, Wanted("u", "e"), None, "enabled", venv, "/srv/models/.versions/tiny-aaaaaaaaaaaa")
    assert seen.changed == () and any("is not exported on this controller yet" in u for u in seen.unknown)
    assert not hub.export_root().exists()  # nothing hashed, nothing written
    src = sync.resolve_source(cfg)  # what deploy does: verify and export
    controller_manifest_id.cache_clear()
    live = f"/srv/models/.versions/{sync.copy_name(cfg, src.manifest_id)}"
    assert drift(cfg, Wanted("u", "e"), None, "enabled", venv, live).changed == ()
    assert drift(cfg, Wanted("u", "e"), None, "enabled", venv, "/srv/models/.versions/tiny-0").changed == ("weights",)
    other = host_config({"model_source": f"hf://{REPO}@v9"})
    seen = drift(other, Wanted("u", "e"), None, "enabled", venv, live)
    assert any(
        "revision 'v9' is not in the Hugging Face cache" in u and "vfleet status never downloads" in u
        for u in seen.unknown
    ), seen.unknown
