"""A Hugging Face hub cache built the way the hub's downloads leave it, for tests that resolve
hf:// sources offline: each file's content in blobs/<ETag> (the sha256 of an LFS file, the git
blob sha1 of a regular one), snapshots/<commit>/<name> a relative link to its blob, and
refs/<branch> holding the commit (huggingface_hub's scan_cache_dir reads it without a warning)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from huggingface_hub.utils.sha import git_hash

__all__ = ["repo_folder", "add_revision", "files_of"]

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")  # what hub repos' .gitattributes send to LFS


def repo_folder(cache: Path, repo_id: str) -> Path:
    return cache / ("models--" + repo_id.replace("/", "--"))


def add_revision(cache: Path, repo_id: str, commit: str, files: dict[str, bytes], ref: str | None = "main") -> Path:
    """One revision of `repo_id` in `cache`; returns its snapshot folder."""
    repo = repo_folder(cache, repo_id)
    for name, data in files.items():
        etag = hashlib.sha256(data).hexdigest() if name.endswith(LFS_SUFFIXES) else git_hash(data)
        blob = repo / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    if ref:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return repo / "snapshots" / commit


def files_of(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """{relative name: content} of a model folder (what a repo of it would hold)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in skip
    }
