"""group_vars/ and host_vars/ beside the inventory, looked up the way Ansible does.

For a group or host NAME Ansible reads NAME (a file, or a folder of files merged in name
order), then NAME.yml, NAME.yaml, NAME.json. Each folder is listed once, and only names
present are opened: a 100,000-host inventory must not cost 400,000 failed stat calls.
"""

from __future__ import annotations

import os
from pathlib import Path

from vfleet.engine.inventory.common import Entry, kind, line_of
from vfleet.engine.inventory.files import read_text, read_yaml
from vfleet.engine.inventory.model import Source
from vfleet.engine.inventory.yamlfile import plain

__all__ = ["VarsFolder"]

_VARS_EXTS = ("", ".yml", ".yaml", ".json")  # Ansible's order


class VarsFolder:
    """One group_vars/ or host_vars/ folder (which may not exist)."""

    def __init__(self, folder: Path, display_dir: str):
        self.folder, self.display_dir = folder, display_dir
        try:
            self.names = set(os.listdir(folder)) if folder.is_dir() else set()
        except OSError:
            self.names = set()

    def _files(self, name: str) -> list[Path]:
        out: list[Path] = []
        for ext in _VARS_EXTS:
            if f"{name}{ext}" not in self.names:
                continue
            p = self.folder / f"{name}{ext}"
            if p.is_dir() and ext == "":
                out += [
                    sub
                    for sub in sorted(p.rglob("*"))
                    if sub.is_file() and not sub.name.startswith(".") and sub.suffix in _VARS_EXTS
                ]
            elif p.is_file():
                out.append(p)
        return out

    def load(self, name: str, scope: str, errors: list[str]) -> dict[str, Entry]:
        """The merged variables of NAME's files, each with file and line."""
        merged: dict[str, Entry] = {}
        for f in self._files(name):
            display = os.path.join(self.display_dir, str(f.relative_to(self.folder)))
            text = read_text(f, display, errors)
            ok, data = read_yaml(text, display, errors) if text is not None else (False, None)
            if not ok or data is None:
                continue
            if not isinstance(data, dict):
                errors.append(f"{display}: expected a mapping of variables for {scope}, got {kind(data)}")
                continue
            for k, v in data.items():
                merged[str(k)] = Entry(plain(v), Source(display, scope, line_of(data, k)))
        return merged
