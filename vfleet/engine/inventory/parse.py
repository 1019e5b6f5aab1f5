"""Groups and hosts as the file writes them (Ansible's YAML layout), before any merging.

The result, RawInventory, is the same whatever the format (the INI reader fills it too),
so merging and validation know nothing of YAML or INI. Nested `children:` are walked with
an explicit stack, in the order written: hosts keep file order, and nesting depth is
bounded by the YAML reader, not by Python's recursion limit. Host ranges are counted
before they are expanded, against MAX_HOSTS, so a pattern like `gpu[0:10000000]` is a
one-line error instead of a process that grows until it is killed.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from vfleet.engine.hostpatterns import expand_host_range, host_range_size, quoted
from vfleet.engine.inventory.common import Entry, kind, line_of, loc, unsafe_name
from vfleet.engine.inventory.model import Source
from vfleet.engine.inventory.yamlfile import plain
from vfleet.engine.schema_words import short_value
from vfleet.engine.varschema import MAX_NAME, text_problem

__all__ = ["RawInventory", "parse_yaml_inventory", "add_hosts", "vars_block", "MAX_HOSTS"]

MAX_HOSTS = 100_000  # hosts one inventory may hold, host ranges expanded
_GROUP_KEYS = ("hosts", "children", "vars")
_NAME_PORT = re.compile(r"^(.+):(\d+)$")


@dataclass
class RawInventory:
    """What the files say, before merging: per group and per host, vars with their sources.

    Membership is kept in dicts used as ordered sets: a 100,000-host group must not be
    searched as a list for every host added to it.
    """

    display: str
    groups: dict[str, None] = field(default_factory=dict)
    group_vars: dict[str, dict[str, Entry]] = field(default_factory=dict)
    children: dict[str, dict[str, None]] = field(default_factory=dict)
    group_hosts: dict[str, dict[str, None]] = field(default_factory=dict)
    host_vars: dict[str, dict[str, Entry]] = field(default_factory=dict)  # in file order

    def __post_init__(self) -> None:
        self.add_group("all")

    def add_group(self, name: str) -> None:
        if name not in self.groups:
            self.groups[name] = None
            self.group_vars[name] = {}
            self.children[name] = {}
            self.group_hosts[name] = {}


def vars_block(
    display: str, value: Any, path: str, line: int | None, scope: str, errors: list[str]
) -> dict[str, Entry]:
    """The variables of one `vars:` (or host) mapping, each with the line it is on."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.append(f"{loc(display, line)}: {path}: expected a mapping of variables, got {kind(value)}")
        return {}
    return {str(k): Entry(plain(v), Source(display, scope, line_of(value, k) or line)) for k, v in value.items()}


def add_hosts(
    raw: RawInventory, group: str, pattern: str, hvars: Any, path: str, line: int | None, errors: list[str]
) -> None:
    """Add the hosts one host key names (a name, `name:port`, or a range) to a group."""
    port = None
    m = _NAME_PORT.match(pattern)
    if m and ":" not in re.sub(r"\[[^\]]*\]", "", m.group(1)):
        pattern, port = m.group(1), int(m.group(2))  # Ansible's 'name:port' host key
    where = f"{loc(raw.display, line)}: {path}"
    try:
        size = host_range_size(pattern)
    except ValueError as exc:
        errors.append(f"{where}: {exc}")
        return
    if len(raw.host_vars) + size > MAX_HOSTS:
        errors.append(
            f"{where}: {quoted(pattern)} would make more than {MAX_HOSTS} hosts "
            f"({size} from this pattern); split the fleet into several inventories"
        )
        return
    names = expand_host_range(pattern) if size > 1 or "[" in pattern else [pattern]
    why = unsafe_name(names[0]) or unsafe_name(pattern)
    if why:
        errors.append(
            f"{where}: host name {pattern!r} {why}; use the inventory name "
            "as a label and put the address in ansible_host"
        )
        return
    if hvars is not None and not isinstance(hvars, dict):
        errors.append(f"{where}.{pattern}: expected a mapping of variables (or nothing), got {kind(hvars)}")
        hvars = None
    # One block for all the names of a range: its values are checked (and reported) once,
    # like a group's, and 100,000 hosts share them instead of holding 100,000 copies.
    scope = f"host '{pattern if len(names) > 1 else names[0]}'"
    block = vars_block(raw.display, hvars, f"{path}.{pattern}", line, scope, errors)
    if port is not None:
        block.setdefault("ansible_port", Entry(port, Source(raw.display, scope, line)))
    members = raw.group_hosts[group]
    for name in names:
        raw.host_vars.setdefault(name, {}).update(block)
        members[name] = None


def parse_yaml_inventory(raw: RawInventory, data: Any, errors: list[str]) -> None:
    """Fill `raw` from a YAML inventory's data: top-level groups, then their nesting."""
    if data is None:
        errors.append(f"{raw.display}: the file is empty; expected an Ansible YAML inventory starting with 'all:'")
        return
    if not isinstance(data, dict):
        errors.append(
            f"{raw.display}: expected a mapping of groups at the top level (an "
            f"Ansible YAML inventory starting with 'all:'), got {kind(data)}"
        )
        return
    for key, body in data.items():
        key = str(key)
        if key in _GROUP_KEYS:
            errors.append(
                f"{loc(raw.display, line_of(data, key))}: top level: '{key}' would "
                f"be a group named '{key}'; put it under 'all:'"
            )
            continue
        _walk_group(raw, key, body, line_of(data, key), errors)
        if key != "all":
            raw.children["all"][key] = None


# One step of the walk: ("group", name, body, path, line) or ("hosts"/"vars", ...).
_Step = tuple[str, str, Any, str, "int | None"]


def _walk_group(raw: RawInventory, name: str, body: Any, line: int | None, errors: list[str]) -> None:
    """Depth first, keys in the order written, with a stack of step iterators."""
    stack: list[Iterator[_Step]] = [iter([("group", name, body, name, line)])]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            continue
        what, group, value, path, where = step
        if what == "group":
            stack.append(_group_steps(raw, group, value, path, where, errors))
        elif what == "vars":
            raw.group_vars[group].update(vars_block(raw.display, value, path, where, f"group '{group}'", errors))
        elif what == "hosts":
            _parse_hosts(raw, group, value, path, where, errors)


def _group_steps(
    raw: RawInventory, name: str, body: Any, path: str, line: int | None, errors: list[str]
) -> Iterator[_Step]:
    raw.add_group(name)
    why = text_problem(name) or (f"is longer than {MAX_NAME} characters" if len(name) > MAX_NAME else None)
    if why:  # its path would carry the character into every message below it
        why = why if why.startswith("is ") else f"has {why}"
        errors.append(
            f"{loc(raw.display, line)}: group name {short_value(name)} {why}; "
            "name groups with letters, digits, '_' and '-'"
        )
        return
    if body is None:
        return
    if not isinstance(body, dict):
        errors.append(
            f"{loc(raw.display, line)}: {path}: expected a mapping with keys hosts/children/vars, got {kind(body)}"
        )
        return
    for key in body:
        if key not in _GROUP_KEYS:
            close = difflib.get_close_matches(str(key), _GROUP_KEYS, n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            errors.append(
                f"{loc(raw.display, line_of(body, key))}: {path}: unknown key "
                f"{short_value(str(key))} (a group takes hosts, children, vars){hint}"
            )
    for key in body:
        kline = line_of(body, key)
        if key == "vars":
            yield ("vars", name, body["vars"], f"{path}.vars", kline)
        elif key == "hosts":
            yield ("hosts", name, body["hosts"], path, kline)
        elif key == "children":
            yield from _children_steps(raw, name, body["children"], path, kline, errors)


def _children_steps(
    raw: RawInventory, name: str, children: Any, path: str, cline: int | None, errors: list[str]
) -> Iterator[_Step]:
    if children is not None and not isinstance(children, dict):
        errors.append(
            f"{loc(raw.display, cline)}: {path}.children: expected a mapping of group names, got {kind(children)}"
        )
        return
    for child, cbody in (children or {}).items():
        child = str(child)
        raw.children[name][child] = None
        yield ("group", child, cbody, f"{path}.children.{child}", line_of(children, child) or cline)


def _parse_hosts(raw: RawInventory, group: str, hosts: Any, path: str, hline: int | None, errors: list[str]) -> None:
    if isinstance(hosts, list):
        errors.append(
            f"{loc(raw.display, hline)}: {path}.hosts: expected a mapping of host "
            "names to their variables, got a list (write 'gpu01:' not '- gpu01')"
        )
    elif hosts is not None and not isinstance(hosts, dict):
        errors.append(
            f"{loc(raw.display, hline)}: {path}.hosts: expected a mapping of host "
            f"names to their variables, got {kind(hosts)}"
        )
    elif hosts:
        for pattern, hvars in hosts.items():
            add_hosts(raw, group, str(pattern), hvars, f"{path}.hosts", line_of(hosts, pattern) or hline, errors)
