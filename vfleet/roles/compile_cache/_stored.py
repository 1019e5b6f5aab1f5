"""What a host keeps beside its compile cache (files.KEY_FILE), and which entries a source packs.

    {"digest": "<sha256 of the key>", "key": {...CacheKey.stored()...},
     "entries": ["0a1b2c3d4e", "torch_aot_compile/<64 hex>"], "source": "gpu01"}

A later run reads it to tell whether a host already holds the cache of its key (nothing to copy),
or holds one whose key no longer holds (dropped, with the field that differs). Read strictly and
bounded: a file that is not one of ours reads as none, never a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vfleet.engine.errors import VfleetError
from vfleet.roles.compile_cache._files import ENTRY, Entry
from vfleet.roles.compile_cache._key import CacheKey, KeyError_

__all__ = ["StoredCache", "parse_stored", "choose_entries"]


@dataclass(frozen=True)
class StoredCache:
    key: CacheKey
    entries: tuple[str, ...]
    source: str

    def to_json(self) -> str:
        return json.dumps(
            {"digest": self.key.digest, "key": self.key.stored(), "entries": list(self.entries), "source": self.source},
            sort_keys=True,
        )


def parse_stored(text: str) -> StoredCache | None:
    """The host's key file, or None (absent, empty, or not one vfleet wrote)."""
    if not text.strip():
        return None
    try:
        data: Any = json.loads(text)
        if not isinstance(data, dict):
            return None
        key = CacheKey.from_stored(data.get("key"))
        entries = data.get("entries")
        source = data.get("source")
        if not (
            isinstance(entries, list)
            and all(isinstance(e, str) and ENTRY.fullmatch(e) for e in entries)
            and isinstance(source, str)
        ):
            return None
        return StoredCache(key, tuple(entries), source)
    except (ValueError, KeyError_, VfleetError, TypeError):
        return None


def choose_entries(
    entries: list[Entry], started_at: int | None, stored: StoredCache | None, key: CacheKey
) -> tuple[list[str], str]:
    """The entries of the running process's key, and how they were told apart: those written
    since its start (it compiled them); else, when it started warm, those the stored key of the
    same digest names (a shared cache it was given or packed before); else every entry it has
    (a cache of its own from an earlier start: an equal host's vLLM computes the same hash and
    loads only that entry, the one this host serves with and that passed the gate)."""
    if started_at is not None:
        fresh = [e.name for e in entries if e.mtime >= started_at]
        if fresh:
            return fresh, "written since the service started"
    if stored is not None and stored.key.digest == key.digest:
        have = {e.name for e in entries}
        kept = [e for e in stored.entries if e in have]
        if kept:
            return kept, "recorded with this key by an earlier run"
    if entries:  # warm from a cache of its own: vLLM loads only the entry of its hash on an equal host
        return [e.name for e in entries], "the service started warm: every entry it has"
    return [], "the service has no cache entry"
