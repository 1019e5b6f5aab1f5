"""Ansible's INI inventory format, read by the rules of ansible-core's `ini` plugin.

Why a parser here rather than ansible-core's: ansible-core is a large dependency (its
plugin loader, templating and config system) to import for a ~100-line format, and its
parser cannot be used without building its InventoryData. configparser is no substitute:
INI inventories are not INI files (host lines have no '=', `key=value` pairs share a line
with shlex quoting, duplicate sections merge). So this mirrors ansible-core's
plugins/inventory/ini.py rule by rule, and tests/unit/test_inventory_ini.py pins the
behaviour:

- lines are stripped; blank lines and lines starting with '#' or ';' are skipped;
- `[name]` holds hosts, `[name:children]` groups, `[name:vars]` variables; another
  `:type` is an error; hosts before any section are 'ungrouped';
- a host line is split like a shell line (shlex, '#' starts a comment): the first word is
  the host (`name`, `name:port`, ranges), the others `key=value`;
- a `[name:children]` entry must be declared as a group somewhere in the file, and a
  `[name:vars]` section needs the group declared too;
- every value (host lines and :vars alike: that is what ansible-core's code does, whatever
  its documentation says of :vars) goes through ast.literal_eval: `2222` is a number,
  `True` a boolean, `"'0.10'"` a string; what literal_eval refuses stays the text written;
  tuples and sets become lists, complex numbers and `...` their text.

Unlike ansible-core, every problem is collected (not only the first), each one line with
the file and line number.
"""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from typing import Any

from vfleet.engine.inventory.common import Entry
from vfleet.engine.inventory.model import Source
from vfleet.engine.inventory.parse import RawInventory, add_hosts
from vfleet.engine.inventory.yamlfile import MAX_INT_BITS, has_surrogate

__all__ = ["parse_ini_inventory", "ini_value"]

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")


class _Unusable(Exception):
    """literal_eval made a value the inventory cannot hold: the text is kept instead."""


def ini_value(text: str) -> Any:
    """A value as ansible-core's INI plugin reads it (`_parse_value`).

    Two results of literal_eval stay the text written, as its refusals do: an integer too
    long to print ('0x' and 5000 hex digits: Python's decimal str() stops at 4300 digits, so
    it would fail later, in a message or a report) and a string holding a lone surrogate
    ('\\udc80' is not text; the schema then refuses the text with the line).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            value = ast.literal_eval(text)
        return _normalise(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, _Unusable):
        return text


def _normalise(value: Any) -> Any:
    """Only YAML-like types reach the inventory (depth is bounded by Python's parser)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise _Unusable
    if isinstance(value, str) and has_surrogate(value):
        raise _Unusable
    if isinstance(value, (list, tuple, set)):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {_normalise(k): _normalise(v) for k, v in value.items()}
    if value is ...:
        return "..."
    if isinstance(value, complex):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


class _IniReader:
    """One pass over the lines, as ansible-core's `_parse` does."""

    def __init__(self, raw: RawInventory, errors: list[str]):
        self.raw, self.errors = raw, errors
        self.group, self.state = "ungrouped", "hosts"
        self.pending: dict[str, dict[str, Any]] = {}
        raw.add_group("ungrouped")

    def error(self, line: int, message: str) -> None:
        self.errors.append(f"{self.raw.display}: line {line}: {message}")

    def feed(self, n: int, line: str) -> None:
        m = _SECTION.match(line)
        if m:
            self.section(n, m.group(1), m.group(2) or "hosts")
        elif line.startswith("[") and line.endswith("]"):
            self.error(
                n, f"invalid section header {line!r}: write [group], [group:children] or [group:vars], with no spaces"
            )
        elif self.state == "hosts":
            self.host_line(n, line)
        elif self.state == "vars":
            self.vars_line(n, line)
        elif self.state == "children":
            self.child_line(n, line)

    def section(self, n: int, group: str, state: str) -> None:
        if state not in ("hosts", "children", "vars"):
            self.error(
                n,
                f"section [{group}:{state}] has unknown type '{state}'; use [group], [group:children] or [group:vars]",
            )
            self.group, self.state = group, "skip"
            return
        self.group, self.state = group, state
        if group not in self.raw.groups:
            if state == "vars" and group not in self.pending:
                self.pending[group] = {"line": n, "state": "vars", "parents": []}
            self.raw.add_group(group)
        decl = self.pending.get(group)
        if decl is not None and state != "vars":
            if decl["state"] == "children":
                self._adopt(group)
            else:
                del self.pending[group]

    def _adopt(self, group: str) -> None:
        """A group named in [p:children] before it was declared is declared now."""
        todo = [group]
        while todo:
            g = todo.pop()
            decl = self.pending.pop(g, None)
            for parent in decl["parents"] if decl else []:
                self.raw.children[parent][g] = None
                if self.pending.get(parent, {}).get("state") == "children":
                    todo.append(parent)

    def host_line(self, n: int, line: str) -> None:
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            self.error(n, f"cannot split the host line: {exc} (check the quotes)")
            return
        if not words:
            return
        pattern = words[0]
        if pattern.endswith(":"):
            self.error(n, f"host '{pattern}' ends with ':'; write host:PORT or the host alone")
            return
        if pattern == "---":
            self.error(n, "'---' is the start of a YAML document: name the file .yml")
            return
        hvars: dict[str, Any] = {}
        for i, word in enumerate(words[1:], start=2):
            key, sep, text = word.partition("=")
            if not sep:
                self.error(
                    n,
                    f"host '{pattern}': word {i} has no '=': expected key=value "
                    "after the host name (quote values that hold spaces)",
                )
                return
            hvars[key] = ini_value(text)
        add_hosts(self.raw, self.group, pattern, hvars or None, f"[{self.group}]", n, self.errors)

    def vars_line(self, n: int, line: str) -> None:
        key, sep, text = line.partition("=")
        if not sep:
            self.error(n, f"[{self.group}:vars]: expected key=value")
            return
        key = key.strip()
        self.raw.group_vars[self.group][key] = Entry(
            ini_value(text.strip()), Source(self.raw.display, f"group '{self.group}'", n)
        )

    def child_line(self, n: int, line: str) -> None:
        m = _GROUP_NAME.match(line)
        if not m:
            self.error(n, f"[{self.group}:children]: expected a group name, got {line!r}")
            return
        child = m.group(1)
        if child in self.raw.groups:
            self.raw.children[self.group][child] = None
        elif child in self.pending:
            self.pending[child]["parents"].append(self.group)
        else:
            self.pending[child] = {"line": n, "state": "children", "parents": [self.group]}

    def finish(self) -> None:
        for name, decl in self.pending.items():
            if decl["state"] == "vars":
                self.error(
                    decl["line"],
                    f"section [{name}:vars] is for group '{name}', which is declared nowhere; add a [{name}] section",
                )
            else:
                parent = decl["parents"][-1]
                self.error(
                    decl["line"],
                    f"[{parent}:children] names group '{name}', which is declared nowhere; add a [{name}] section",
                )


def parse_ini_inventory(raw: RawInventory, text: str, errors: list[str]) -> None:
    """Fill `raw` from an INI inventory's text."""
    reader = _IniReader(raw, errors)
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if line and line[0] not in "#;" and reader.state != "skip":
            reader.feed(n, line)
        elif line.startswith("[") and reader.state == "skip":
            reader.feed(n, line)
    reader.finish()
