"""Where a shared compile cache lives on a host, and the shell commands that pack and install it
(pure: strings in, strings out; tests/unit/test_compile_cache_files.py runs them in real bash).

    <cache_dir>/vllm/                                   VLLM_CACHE_ROOT (the unit's)
        torch_compile_cache/<10 hex>/                   one vLLM cache entry (backends.py)
        torch_compile_cache/torch_aot_compile/<64 hex>/ another (decorators.py, AOT)
        .vfleet-compile-key.json                        the key of the entries vfleet packed or
                                                        installed there, and their names
    <cache_dir>/.vfleet-compile/export-<digest12>/      the packed cache on its source host:
        torch_compile_cache/...  key.json  MANIFEST.sha256
    <cache_dir>/.vfleet-compile/staging-<digest12>/     where a copy lands on another host

Why entries and not the whole folder: vLLM names each entry by its own hash, so an entry is the
unit that is whole or absent. Installing one is a rename inside the same filesystem (atomic: vLLM
never sees half an entry) after the manifest verified every byte; the key file is written last,
so a host claims a cache only once every entry is in. An entry the host already has is kept (the
same hash is the same compile, and a running vLLM may be reading it).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from vfleet.config.hostconfig import HostConfig
from vfleet.config.quoting import shell_quote as q
from vfleet.engine.errors import VfleetError
from vfleet.roles.model_source import MANIFEST_NAME

__all__ = [
    "Entry",
    "CacheFiles",
    "ENTRY",
    "KEY_FILE",
    "parse_entries",
    "list_command",
    "pack_command",
    "install_command",
    "drop_command",
    "read_key_command",
]

# vLLM's entry names: sha256[:10] (backends.py) and a full sha256 under torch_aot_compile (decorators.py)
ENTRY = re.compile(r"[0-9a-f]{10}|torch_aot_compile/[0-9a-f]{64}")
KEY_FILE = ".vfleet-compile-key.json"
KEY_LIMIT = 65536


@dataclass(frozen=True)
class Entry:
    """One vLLM cache entry of a host: its name under torch_compile_cache, the newest mtime of
    anything in it (whole seconds since the epoch) and its size in bytes."""

    name: str
    mtime: int
    size: int


@dataclass(frozen=True)
class CacheFiles:
    """The paths of one service's compile cache (the same on every host of a key)."""

    root: str  # VLLM_CACHE_ROOT
    work: str  # vfleet's own folder beside it

    @classmethod
    def of(cls, cfg: HostConfig) -> CacheFiles:
        return cls(cfg.vllm_cache_root, posixpath.join(cfg.cache_dir, ".vfleet-compile"))

    @property
    def compiled(self) -> str:
        return posixpath.join(self.root, "torch_compile_cache")

    @property
    def key_file(self) -> str:
        return posixpath.join(self.root, KEY_FILE)

    def export(self, digest: str) -> str:
        return posixpath.join(self.work, f"export-{digest[:12]}")

    def staging(self, digest: str) -> str:
        return posixpath.join(self.work, f"staging-{digest[:12]}")


def _entries(names: list[str]) -> list[str]:
    bad = [n for n in names if not ENTRY.fullmatch(n)]
    if bad:
        raise VfleetError(f"compile cache: {bad[0]!r} is not a vLLM cache entry name")
    return names


def list_command(files: CacheFiles) -> str:
    """One line per folder under torch_compile_cache: newest mtime, bytes, name (parse_entries
    keeps those named like vLLM's entries)."""
    return (
        f"cd -- {q(files.compiled)} 2>/dev/null || exit 0; "
        'for d in * torch_aot_compile/*; do [ -d "$d" ] && [ ! -L "$d" ] || continue; '
        "printf '%s %s %s\\n' \"$(find \"$d\" -printf '%T@\\n' | sort -n | tail -n 1 | cut -d. -f1)\" "
        '"$(du -sb -- "$d" | cut -f1)" "$d"; done'
    )


def parse_entries(lines: list[str]) -> list[Entry]:
    out = []
    for line in lines:
        words = line.split()
        if len(words) == 3 and words[0].isdigit() and words[1].isdigit() and ENTRY.fullmatch(words[2]):
            out.append(Entry(words[2], int(words[0]), int(words[1])))
    return sorted(out, key=lambda e: e.name)


def read_key_command(files: CacheFiles) -> str:
    return f"head -c {KEY_LIMIT} -- {q(files.key_file)} 2>/dev/null; true"


def pack_command(files: CacheFiles, digest: str, entries: list[str]) -> str:
    """On the source host: copy the entries into export-<digest>, with the key JSON (read from
    stdin, never on the command line) and a sha256 manifest of every file; built beside and
    renamed into place, so an export that exists is whole. Prints the export's bytes."""
    export = files.export(digest)
    tmp = export + ".tmp"
    copies = "; ".join(
        f"mkdir -p -- {q(posixpath.dirname(posixpath.join(tmp, 'torch_compile_cache', e)))} && "
        f"cp -a -- {q(posixpath.join(files.compiled, e))} {q(posixpath.join(tmp, 'torch_compile_cache', e))}"
        for e in _entries(entries)
    )
    return (
        f"set -e; umask 022; rm -rf -- {q(tmp)}; mkdir -p -- {q(tmp)}; {copies}; "
        f"cat > {q(tmp + '/key.json')}; cd -- {q(tmp)}; "
        f"find . -type f ! -name {MANIFEST_NAME} -printf '%P\\n' | LC_ALL=C sort "
        f"| xargs -d '\\n' -r sha256sum -- > {MANIFEST_NAME}; cd /; "
        f"rm -rf -- {q(export)}; mv -T -- {q(tmp)} {q(export)}; "
        f"cp -- {q(export + '/key.json')} {q(files.key_file + '.tmp')}; mv -T -- {q(files.key_file + '.tmp')} "
        f"{q(files.key_file)}; du -sb -- {q(export)} | cut -f1"
    )


def install_command(files: CacheFiles, digest: str, entries: list[str], user: str | None, group: str | None) -> str:
    """On another host, once the export was copied into staging-<digest>: verify every file
    against the manifest, hand them to the service user, rename each entry into place (one
    that is there already is kept), then the key file, then remove the staging folder. A failed
    verification moves nothing. Prints `installed NAME` or `kept NAME` per entry."""
    staging = files.staging(digest)
    owner = f"{user}:{group or ''}" if user else ""
    chown = (
        (
            f"chown -R -- {q(owner)} {q(staging)} 2>/dev/null || true; "
            f"chown -- {q(owner)} {q(files.root)} {q(files.compiled)} {q(files.compiled + '/torch_aot_compile')} "
            f"2>/dev/null || true; "
        )
        if owner
        else ""
    )
    moves = "; ".join(
        f"if [ -e {q(posixpath.join(files.compiled, e))} ]; then echo {q('kept ' + e)}; "
        f"else mv -T -- {q(posixpath.join(staging, 'torch_compile_cache', e))} "
        f"{q(posixpath.join(files.compiled, e))}; echo {q('installed ' + e)}; fi"
        for e in _entries(entries)
    )
    return (
        f"set -e; umask 022; cd -- {q(staging)}; sha256sum --quiet --strict -c {MANIFEST_NAME}; cd /; "
        f"mkdir -p -- {q(files.compiled + '/torch_aot_compile')}; chmod -R u=rwX,go=rX -- {q(staging)}; "
        f"{chown}{moves}; cp -- {q(staging + '/key.json')} {q(files.key_file + '.tmp')}; "
        f"{('chown -- ' + q(owner) + ' ' + q(files.key_file + '.tmp') + ' 2>/dev/null || true; ') if owner else ''}"
        f"mv -T -- {q(files.key_file + '.tmp')} {q(files.key_file)}; rm -rf -- {q(staging)}"
    )


def drop_command(files: CacheFiles, entries: list[str]) -> str:
    """Remove the entries a stored key names, then the key file (its key no longer holds)."""
    gone = " ".join(q(posixpath.join(files.compiled, e)) for e in _entries(entries))
    return f"rm -f -- {q(files.key_file)}; " + (f"rm -rf -- {gone}" if gone else "true")
