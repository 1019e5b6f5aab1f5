"""Piece manifest: every file of a model cut into fixed-size pieces, a sha256 per piece.

Why pieces: the pipelined chain (_chain.py, _relay.py) forwards a piece to the next host as
soon as it has checked it, so every host finishes about when one copy would have, instead of
waiting for whole files as the waves of _sync.py do. A per-piece hash lets each host check a
piece the moment it lands, resume from the pieces it already verified, and refuse to pass a
damaged piece on. The files are those of _manifest.py (same selection rules) plus the
MANIFEST.sha256 itself, so a staged copy can still be checked by _sync.py's verify_command.

Piece size: 4 MiB by default. A hop passes a piece's bytes on as they arrive and holds back
only its last read until the piece's hash is checked (_relay.py), so the piece size sets what a
resume or a bad piece costs, not each hop's delay; each piece costs a frame header (16 bytes),
one hash and one log line, and a hop holds one piece in memory.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from vfleet.roles.model_source import MANIFEST_NAME, model_files, write_manifest
from vfleet.roles.weights._relay_wire import in_bitmap

DEFAULT_PIECE_SIZE = 4 << 20
MIN_PIECE_SIZE = 4 << 10


@dataclass(frozen=True)
class PieceFile:
    """One file: its path relative to the model folder, its size and one sha256 per piece."""

    path: str
    size: int
    sha256: tuple[str, ...]


@dataclass(frozen=True)
class PieceManifest:
    """What a relay checks pieces against. `id` is the sha256 of its canonical JSON, so two
    controllers that cut the same bytes the same way name the copy the same."""

    piece_size: int
    files: tuple[PieceFile, ...]
    id: str = field(default="", compare=False)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def piece_count(self) -> int:
        return sum(len(f.sha256) for f in self.files)

    def as_json(self) -> dict:
        return {
            "piece_size": self.piece_size,
            "files": [{"path": f.path, "size": f.size, "sha256": list(f.sha256)} for f in self.files],
        }


def pieces_of(size: int, piece_size: int) -> int:
    """Pieces of a file of `size` bytes; an empty file still has one (empty) piece, so it is
    created and recorded like any other."""
    return max(1, -(-size // piece_size))


def _hash_pieces(path: Path, piece_size: int) -> tuple[str, ...]:
    out = []
    with open(path, "rb") as f:
        while True:
            data = f.read(piece_size)
            if not data and out:
                break
            out.append(hashlib.sha256(data).hexdigest())
            if len(data) < piece_size:
                break
    return tuple(out)


def canonical_id(piece_size: int, files: tuple[PieceFile, ...]) -> str:
    body = PieceManifest(piece_size, files).as_json()
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def piece_file_names(model_dir: Path | str) -> list[str]:
    """The files the chain carries: the manifest's (manifest.model_files) and MANIFEST.sha256."""
    return sorted(set(model_files(Path(model_dir))) | {MANIFEST_NAME})


def make_piece_manifest(model_dir: Path | str, piece_size: int = DEFAULT_PIECE_SIZE) -> PieceManifest:
    """Hash every file of the model folder piece by piece, one thread per file up to the
    controller's cores (hashlib lets go of the GIL, so a model of many shards hashes at the
    disk's speed, not one core's). MANIFEST.sha256 is written first when it is missing, as
    _sync.py's resolve_source does; one that is there is kept (the copy's id is its hash), and
    each host's `sha256sum -c` of it is what finds it stale."""
    if piece_size < MIN_PIECE_SIZE:
        raise ValueError(
            f"piece size {piece_size} is below {MIN_PIECE_SIZE} bytes: the frame and hash overhead would dominate"
        )
    root = Path(model_dir)
    if not (root / MANIFEST_NAME).is_file():
        write_manifest(root)
    names = piece_file_names(root)
    with ThreadPoolExecutor(max_workers=max(1, min(len(names), os.cpu_count() or 1))) as pool:
        hashes = list(pool.map(lambda n: _hash_pieces(root / n, piece_size), names))
    files = tuple(PieceFile(n, (root / n).stat().st_size, h) for n, h in zip(names, hashes))
    return PieceManifest(piece_size, files, canonical_id(piece_size, files))


def read_pieces(
    model_dir: Path | str, manifest: PieceManifest, want: bytes | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """(file index, piece index, bytes) for every piece, in order: what the controller feeds.
    `want`: only the pieces its bitmap names (relay_wire.bitmap: a resumed chain sends only
    what some host of it lacks); the others are skipped, never read."""
    root, k = Path(model_dir), 0
    for fi, f in enumerate(manifest.files):
        first, k = k, k + len(f.sha256)
        if want is not None and not any(in_bitmap(want, first + pi) for pi in range(len(f.sha256))):
            continue
        with open(root / f.path, "rb") as fh:
            for pi in range(len(f.sha256)):
                if want is None or in_bitmap(want, first + pi):
                    fh.seek(pi * manifest.piece_size)
                    yield fi, pi, fh.read(manifest.piece_size)
