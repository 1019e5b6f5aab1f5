"""Reading one inventory or vars file into data, every failure as one line naming the file.

Which format an inventory is in is decided here, the way Ansible's plugins decide it:
`.ini` is INI, `.yml`/`.yaml`/`.json` are YAML, and a file with another or no suffix is
INI when its first meaningful line is an INI section header (`[vllm]`), when YAML reads
the whole file as one plain string (host lines without sections), or when it is not
valid YAML and holds a section header.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from vfleet.engine.inventory.yamlfile import YamlProblem, parse_yaml

__all__ = ["read_text", "read_yaml", "looks_like_ini"]

_YAML_SUFFIXES = (".yml", ".yaml", ".json")
_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?$")


def read_text(path: Path, display: str, errors: list[str]) -> str | None:
    """A file's text, or None with the reason appended to errors."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        errors.append(f"{display}: no such file")
    except IsADirectoryError:
        errors.append(f"{display}: is a directory; give the inventory file (e.g. {display}/hosts.yml)")
    except (OSError, UnicodeDecodeError) as exc:
        errors.append(f"{display}: cannot read: {exc}")
    return None


def looks_like_ini(path: Path, text: str) -> bool:
    """True for an INI inventory (by suffix, else by content; see the module docstring)."""
    if path.suffix == ".ini":
        return True
    if path.suffix in _YAML_SUFFIXES:
        return False
    lines = [line.strip() for line in text.splitlines()]
    meaningful = [line for line in lines if line and line[0] not in "#;"]
    if meaningful and _SECTION.match(meaningful[0]):
        return True
    try:
        data, _ = parse_yaml(text)
    except (yaml.YAMLError, YamlProblem):
        return any(_SECTION.match(line) for line in meaningful)
    return isinstance(data, str)


def read_yaml(text: str, display: str, errors: list[str]) -> tuple[bool, Any]:
    """(ok, data) of a YAML text; problems appended to errors as one line each."""
    try:
        data, duplicates = parse_yaml(text)
    except YamlProblem as exc:
        errors.append(f"{display}: line {exc.line}: {exc.message}")
        return False, None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        errors.append(f"{display}: {where}YAML syntax error: {problem}")
        return False, None
    for key, line in duplicates:
        errors.append(f"{display}: line {line}: duplicate key '{key}' (the earlier one would be silently lost)")
    return True, data
