"""Weights manifest: sha256 of every file of a model directory, in `sha256sum` format.

Made once on the source (controller) and written as MANIFEST.sha256 beside the weights; it
travels with them (rsync), and a host verifies its copy with

    cd <model_dir> && sha256sum --quiet --strict -c MANIFEST.sha256

plus a check that every shard named in model.safetensors.index.json (if any) is present
(verify_command() renders both as one shell command). Pure functions; no SSH.

Line format (GNU coreutils, text mode): "<64 hex>  <relative path>\\n", sorted by path,
paths relative to the model dir with "/" separators. Names with a newline or a backslash are
refused (sha256sum would escape them, and a model has no business with such names).
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

from vfleet.engine.errors import VfleetError
from vfleet.engine.strict_json import MIB, mapping, read_json

MANIFEST_NAME = "MANIFEST.sha256"
INDEX_NAME = "model.safetensors.index.json"
# files never listed: the manifest itself, and download/cache droppings
IGNORED_NAMES = {MANIFEST_NAME}
IGNORED_DIRS = {".cache", ".git", "__pycache__"}
_CHUNK = 1 << 20
INDEX_LIMIT = 64 * MIB


class ManifestError(VfleetError, ValueError):
    """A model folder the manifest cannot be made of: one line, the CLI exits 2 (a ValueError
    too, as it always was)."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def model_files(model_dir: Path) -> list[str]:
    """The files a copy of the model is made of (relative POSIX names, sorted): what the
    manifest hashes and the piece manifest (_pieces.py) cuts, so both cover the same files."""
    out = []
    for p in sorted(model_dir.rglob("*")):
        rel = p.relative_to(model_dir)
        if any(part in IGNORED_DIRS for part in rel.parts[:-1]) or rel.parts[0] in IGNORED_DIRS:
            continue
        if p.is_symlink() or not p.is_file():
            continue
        if rel.as_posix() in IGNORED_NAMES:
            continue
        name = rel.as_posix()
        if "\n" in name or "\\" in name or "\r" in name:
            raise ManifestError(f"{p}: file name with a newline or backslash")
        out.append(name)
    return out


def index_shards(model_dir: Path) -> list[str]:
    """Shard file names that model.safetensors.index.json refers to ([] when no index)."""
    idx = Path(model_dir) / INDEX_NAME
    if not idx.exists():
        return []
    # Read bounded and strictly (vfleet/engine/strict_json.py): the index is the checkpoint
    # publisher's file. Its weight_map lists every tensor, ~8 MB for DeepSeek-V3: 64 MiB is ample.
    weight_map = mapping(read_json(idx, INDEX_LIMIT), str(idx)).get("weight_map")
    if not isinstance(weight_map, dict) or not all(
        isinstance(v, str) and 0 < len(v) <= 1024 and "\n" not in v for v in weight_map.values()
    ):
        raise ManifestError(
            f"{idx}: key 'weight_map': expected a map of tensor names to shard file names; "
            "fix the index or download the model again"
        )
    return sorted(set(weight_map.values()))


def make_manifest(model_dir: Path | str) -> dict:
    """Hash every file of ``model_dir``.

    Returns {"files": {relpath: {"sha256": hex, "size": bytes}}, "total_bytes": n,
    "shards": [names from the index], "text": the MANIFEST.sha256 content}.
    Raises ManifestError when the index names a shard that is missing.
    """
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ManifestError(f"{model_dir}: not a directory")
    files = {}
    for rel in model_files(model_dir):
        p = model_dir / rel
        files[rel] = {"sha256": sha256_file(p), "size": p.stat().st_size}
    shards = index_shards(model_dir)
    missing = [s for s in shards if s not in files]
    if missing:
        raise ManifestError(f"{model_dir}: shards named in {INDEX_NAME} are missing: " + ", ".join(missing))
    return {
        "files": files,
        "total_bytes": sum(f["size"] for f in files.values()),
        "shards": shards,
        "text": manifest_text(files),
    }


def manifest_text(files: dict) -> str:
    return "".join(f"{files[rel]['sha256']}  {rel}\n" for rel in sorted(files))


def write_manifest(model_dir: Path | str) -> dict:
    """make_manifest + write MANIFEST.sha256 into model_dir (only if its content changed)."""
    m = make_manifest(model_dir)
    path = Path(model_dir) / MANIFEST_NAME
    old = path.read_text() if path.exists() else None
    m["changed"] = old != m["text"]
    if m["changed"]:
        tmp = path.with_name(MANIFEST_NAME + ".tmp")
        tmp.write_text(m["text"])
        tmp.replace(path)
    return m


def manifest_id(model_dir: Path | str) -> str:
    """The id of a copy: the sha256 of its MANIFEST.sha256 (copies are named by it, the piece
    cache is keyed by it, `vfleet status` compares it)."""
    return hashlib.sha256((Path(model_dir) / MANIFEST_NAME).read_bytes()).hexdigest()


def parse_manifest(text: str) -> dict[str, str]:
    """MANIFEST.sha256 text -> {relpath: sha256}. Accepts sha256sum's binary marker '*'."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, name = line.partition("  ")
        if not sep:
            digest, sep, name = line.partition(" *")
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ManifestError(f"line {n}: not a sha256sum line: {line!r}")
        out[name] = digest
    return out


def verify_command(model_dir: str) -> str:
    """Shell command for a host: exit 0 iff every file matches and every indexed shard
    exists. Needs coreutils' sha256sum and python3 (only when an index exists)."""
    d = shlex.quote(str(model_dir))
    check_index = (
        "import json,os,sys; m=json.load(open(%r))['weight_map']; "
        "miss=sorted(s for s in set(m.values()) if not os.path.isfile(s)); "
        "print('missing shards: '+' '.join(miss), file=sys.stderr) if miss else None; "
        "sys.exit(1 if miss else 0)" % INDEX_NAME
    )
    return (
        f"cd {d} && sha256sum --quiet --strict -c {MANIFEST_NAME} && "
        f"{{ [ ! -e {INDEX_NAME} ] || python3 -c {shlex.quote(check_index)}; }}"
    )


if __name__ == "__main__":
    import sys

    for d in sys.argv[1:]:
        r = write_manifest(d)
        print(f"{d}: {len(r['files'])} files, {r['total_bytes']} bytes, {'written' if r['changed'] else 'unchanged'}")
