"""The public inventory types: what a loaded inventory is, independent of how it was read.

Kept apart from the loader so tasks and roles that only consume hosts (the runner, the
rollout) depend on small data classes, not on YAML or INI parsing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vfleet.engine.hostpatterns import match_limit

__all__ = ["Host", "Group", "Inventory", "Source", "SetArgs"]


@dataclass
class Host:
    """A host ready to connect to: merged vars and the connection settings read from them."""

    name: str
    vars: dict[str, Any] = field(repr=False)  # fully merged, validated, secrets resolved
    groups: list[str]  # every group the host is in, incl. ancestors and 'all'
    address: str  # ansible_host/ssh_host or name
    user: str | None  # None -> current user
    port: int  # default 22
    key_file: str | None
    connection: str  # 'ssh' | 'local'
    # Where each var came from ("inv.yaml: line 4: group 'vllm'", "default", "--set"): lets
    # tools explain a value; not part of equality.
    sources: dict[str, str] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class Group:
    """A group as written: its own vars (inline, then group_vars files) and direct members."""

    name: str
    vars: dict[str, Any]
    children: list[str]
    hosts: list[str]


@dataclass
class Inventory:
    """A validated inventory. `warnings` are problems that do not stop a run (a distant typo,
    a group and a host of one name, a world-readable secret file): the CLI prints them."""

    path: Path
    hosts: dict[str, Host]  # in file order
    groups: dict[str, Group]
    warnings: list[str] = field(default_factory=list)
    # The VarSchema it was validated with: to_list_json masks the schema's secrets.
    schema: Any = field(default=None, repr=False, compare=False)

    def group_hosts(self, name: str) -> list[str]:
        """All hosts of a group, its descendants' included, in inventory order."""
        return [h.name for h in self.hosts.values() if name in h.groups]

    def select(self, limit: str | None) -> list[Host]:
        """Hosts an Ansible `--limit` selects (None: all), in inventory order.

        A name that is both a group and a host selects the group, as Ansible's
        InventoryManager does (groups are matched first); the loader warns about the clash.
        """
        if limit is None or not limit.strip():
            return list(self.hosts.values())
        members: dict[str, list[str]] = {g: [] for g in self.groups}
        for h in self.hosts.values():
            for g in h.groups:
                members.setdefault(g, []).append(h.name)
        names = match_limit(limit, list(self.hosts), members, source=str(self.path))
        return [self.hosts[n] for n in names]

    def to_list_json(self) -> dict:
        """Like `ansible-inventory --list`: hostvars (secrets masked, defaults left out)."""
        from vfleet.engine.inventory.masking import masked_vars

        hostvars = {}
        for h in self.hosts.values():
            shown = {k: v for k, v in h.vars.items() if h.sources.get(k, "") != "default"}
            hostvars[h.name] = masked_vars(shown, schema=self.schema)
        out: dict[str, Any] = {"_meta": {"hostvars": hostvars}}
        for g in self.groups.values():
            entry: dict[str, list[str]] = {}
            if g.hosts and g.name != "all":
                entry["hosts"] = list(g.hosts)
            if g.children:
                entry["children"] = list(g.children)
            if entry or g.name == "all":
                out[g.name] = entry
        return out

    def graph(self) -> str:
        """Like `ansible-inventory --graph`: groups and hosts as a tree, sorted by name.

        Walked with an explicit stack: inventories nest groups hundreds deep (Ansible parses
        200 levels) and Python's recursion limit must not decide what loads.
        """
        lines = ["@all:"]
        stack: list[tuple[str, str, bool]] = [("all", "  ", False)]
        while stack:
            name, indent, is_host = stack.pop()
            if is_host:
                lines.append(f"{indent}|--{name}")
                continue
            if name != "all":
                lines.append(f"{indent[:-3]}|--@{name}:")
            g = self.groups[name]
            todo = [(c, indent + "|  ", False) for c in sorted(g.children)]
            if name != "all":
                todo += [(h, indent, True) for h in sorted(g.hosts)]
            stack.extend(reversed(todo))
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Source:
    """Where a value was written: file, line and the group/host it belongs to."""

    file: str
    scope: str  # "group 'vllm'", "host 'gpu01'", "--set", "default"
    line: int | None = None

    def __str__(self) -> str:
        if not self.file:
            return self.scope
        line = f": line {self.line}" if self.line else ""
        return f"{self.file}{line}: {self.scope}"


class SetArgs(dict):
    """Parsed `--set` values, remembering the raw text so string variables keep '0.10'."""

    raw: dict[str, str]
