"""What the compile-cache step reads from a host, as facts (a command and a pure parser each,
gathered in one round trip): the GPU model, the copy of the model its link points at, when the
unit's process started, the cache entries it has and the key it keeps beside them."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.config.quoting import shell_quote as q
from vfleet.engine.facts import LinkFact
from vfleet.roles.compile_cache._files import CacheFiles, Entry, list_command, parse_entries, read_key_command
from vfleet.roles.compile_cache._stored import StoredCache, parse_stored

__all__ = ["GpuModel", "StartedAt", "CacheEntries", "StoredKey", "facts_for", "model_identity"]

NO_GPU = "none"


@dataclass(frozen=True)
class GpuModel:
    """The GPU names of the host, sorted and joined ("NVIDIA H200"; "none" without nvidia-smi):
    Triton and Inductor compile for one architecture."""

    def command(self) -> str:
        return "nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null; true"

    def process(self, lines: list[str]) -> str:
        names = sorted({ln.strip() for ln in lines if ln.strip()})
        return " + ".join(names) if names else NO_GPU


@dataclass(frozen=True)
class StartedAt:
    """When the unit's main process started (seconds since the epoch), None when not running."""

    unit: str

    def command(self) -> str:
        u = q(self.unit)
        return (
            f"s=$(systemctl show -p ExecMainStartTimestamp --value -- {u} 2>/dev/null); "
            f'systemctl is-active --quiet -- {u} && [ -n "$s" ] && date -d "$s" +%s 2>/dev/null; true'
        )

    def process(self, lines: list[str]) -> int | None:
        word = lines[0].strip() if lines else ""
        return int(word) if word.isdigit() else None


@dataclass(frozen=True)
class CacheEntries:
    files: CacheFiles

    def command(self) -> str:
        return list_command(self.files)

    def process(self, lines: list[str]) -> list[Entry]:
        return parse_entries(lines)


@dataclass(frozen=True)
class StoredKey:
    files: CacheFiles

    def command(self) -> str:
        return read_key_command(self.files)

    def process(self, lines: list[str]) -> StoredCache | None:
        return parse_stored("\n".join(lines))


def facts_for(cfg: HostConfig) -> dict[str, Any]:
    files = CacheFiles.of(cfg)
    facts: dict[str, Any] = {
        "gpu": GpuModel(),
        "started": StartedAt(cfg.unit),
        "entries": CacheEntries(files),
        "stored": StoredKey(files),
    }
    if cfg.model_path:
        facts["model"] = LinkFact(cfg.model_path)
    return facts


def model_identity(cfg: HostConfig, link: str | None) -> str:
    """The model as the key names it: the verified copy the model link points at (its folder
    name carries the weights manifest id, vfleet/roles/weights/_sync.py copy_name), else the
    path itself (weights that vfleet did not copy: equal paths are all it can tell)."""
    if link and link != "OTHER":
        return posixpath.basename(link.rstrip("/"))
    return f"{cfg.model_path} (not a vfleet copy)"
