"""The piece manifest of a model, kept on the controller between deploys.

Why: cutting a model into hashed pieces (pieces.make_piece_manifest) reads every byte of it;
for a 70B model in 16 bits that is 140 GB of disk and sha256 before the chain can send its
first piece, on every deploy that copies it. The pieces of a copy follow from its files,
which MANIFEST.sha256 names by hash, so they are kept under the copy's id (the manifest's
sha256) and the piece size, with each file's size and mtime as the controller saw them, and
read back while those still match (rsync's quick check, git's index). A kept entry that does
not match, does not parse or does not hash to its own id is made again, never trusted.

What this cannot break: a host checks every piece against this manifest and its whole copy
against MANIFEST.sha256 (chain.whole_command) before anything serves from it, so a wrong
entry fails the copy with the chain's one line; it never puts bytes in place.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from vfleet.engine.controller_cache import controller_cache
from vfleet.engine.errors import VfleetError
from vfleet.roles.weights._pieces import (
    DEFAULT_PIECE_SIZE,
    PieceFile,
    PieceManifest,
    canonical_id,
    make_piece_manifest,
    piece_file_names,
)


def _stamps(root: Path) -> list[list]:
    """[path, size, mtime_ns] of each file the chain carries: what must not have changed."""
    out = []
    for name in piece_file_names(root):
        st = (root / name).stat()
        out.append([name, st.st_size, st.st_mtime_ns])
    return out


def _entry_path(manifest_id: str, piece_size: int) -> Path:
    return controller_cache("pieces") / f"{manifest_id}-{piece_size}.json"


def _read_entry(path: Path, stamps: list[list], piece_size: int) -> PieceManifest | None:
    """The kept manifest, or None when there is none or it no longer fits the files."""
    try:
        entry = json.loads(path.read_text())
        if entry["stamps"] != stamps or entry["piece_size"] != piece_size:
            return None
        files = tuple(PieceFile(f["path"], int(f["size"]), tuple(f["sha256"])) for f in entry["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    pm = PieceManifest(piece_size, files, canonical_id(piece_size, files))
    return pm if pm.id == entry.get("id") else None


def _write_entry(path: Path, pm: PieceManifest, stamps: list[list]) -> None:
    """Whole or not at all (a temp file renamed into place); a cache that cannot be written
    costs the next deploy a re-hash, so that is not an error."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".piece-", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump({"id": pm.id, "stamps": stamps, **pm.as_json()}, f)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def piece_manifest_for(
    model_dir: Path | str, manifest_id: str, piece_size: int = DEFAULT_PIECE_SIZE
) -> tuple[PieceManifest, bool]:
    """The piece manifest of the copy `manifest_id` of `model_dir` (whose MANIFEST.sha256
    sync.resolve_payload made), and whether it was kept from an earlier deploy (True) or
    hashed now (False). A file that changed while it was hashed is not kept."""
    root = Path(model_dir)
    try:
        stamps = _stamps(root)
        path = _entry_path(manifest_id, piece_size)
        kept = _read_entry(path, stamps, piece_size)
        if kept is not None:
            return kept, True
        pm = make_piece_manifest(root, piece_size)
        if _stamps(root) == stamps:
            _write_entry(path, pm, stamps)
    except OSError as e:
        raise VfleetError(
            f"model folder {root}: cannot read {e.filename}: {e.strerror or e}; fix its "
            "permissions or let the download that writes it finish, then deploy again"
        ) from None
    return pm, False
