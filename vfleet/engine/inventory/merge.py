"""Precedence: each host's variables from defaults, its groups, its own and --set.

    default < all < parent group < child group < host < --set
    (groups of equal depth: alphabetical by name, later wins)
    inline group vars < group_vars/GROUP file; inline host vars < host_vars/HOST file
    mapping values are replaced, never deep-merged

Hosts in the same groups share everything below the host level, so that part is merged,
validated and its secrets resolved once per set of groups, then copied: a 100,000-host
range in one group costs one merge plus 100,000 dict copies, not 100,000 merges.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from vfleet.engine.inventory.common import Entry
from vfleet.engine.inventory.graph import Tree
from vfleet.engine.inventory.model import Host, Source
from vfleet.engine.inventory.secrets import Merged, SecretReader

__all__ = ["Merger", "ADDRESS", "USER", "PORT"]

# Alias sets for connection settings: vfleet's name first (it wins at equal precedence).
ADDRESS = ("ssh_host", "ansible_host", "ansible_ssh_host")
USER = ("ssh_user", "ansible_user", "ansible_ssh_user")
PORT = ("ssh_port", "ansible_port", "ansible_ssh_port")
_KEY = ("ssh_key_file", "ansible_ssh_private_key_file", "ansible_private_key_file")
_CONN = ("connection", "ansible_connection")
_LOCAL_NAMES = ("localhost",)
_SET_RANK = 1 << 30  # --set beats every layer, whatever the depth


@dataclass
class _Base:
    """The merge of everything but a host's own layers, for one set of groups."""

    groups: list[str]
    unresolved: Merged  # before secrets: what a host's own layers go on top of
    merged: Merged  # secrets resolved, entries checked
    vars: dict[str, Any]
    sources: dict[str, str]


class Merger:
    """Builds Host objects; `check(name, entry)` validates (and coerces) one entry."""

    def __init__(
        self,
        tree: Tree,
        member_of: dict[str, set[str]],
        group_layers: dict[str, list[dict[str, Entry]]],
        host_layers: dict[str, list[dict[str, Entry]]],
        defaults: dict[str, Entry],
        set_layer: dict[str, Entry],
        secrets: SecretReader,
        check: Callable[[str, Entry], None],
    ):
        self.tree, self.member_of = tree, member_of
        self.group_layers, self.host_layers = group_layers, host_layers
        self.defaults, self.set_layer = defaults, set_layer
        self.secrets, self.check = secrets, check
        self._bases: dict[frozenset[str], _Base] = {}
        schema = secrets.schema
        self._secret_keys = set(schema.secret_names).union(*(schema.secret_sources(n) for n in schema.secret_names))

    def host(self, name: str) -> Host:
        """The host with its merged, checked variables and connection settings."""
        base = self._base(name)
        own = [layer for layer in self.host_layers.get(name, []) if layer]
        vars_, sources = base.vars.copy(), base.sources.copy()
        if not own:
            return Host(
                name=name, vars=vars_, groups=list(base.groups), sources=sources, **_connection(name, base.merged)
            )
        changed = set(self.set_layer).union(*own)
        secret = not changed.isdisjoint(self._secret_keys)
        # Secrets are resolved again only when the host's own layers name one.
        merged = dict(base.unresolved if secret else base.merged)
        rank = len(base.groups) * 2 + 1
        for rank, layer in enumerate(own, start=rank):
            for k, e in layer.items():
                merged[k] = (e, rank)
        for k, e in self.set_layer.items():
            merged[k] = (e, _SET_RANK)
        if secret:
            self.secrets.resolve(name, merged)
            changed |= self._secret_keys
        for k in changed:
            if k in merged:
                e = merged[k][0]
                if not e.checked:
                    self.check(k, e)
                vars_[k], sources[k] = e.value, e.where
        return Host(name=name, vars=vars_, groups=list(base.groups), sources=sources, **_connection(name, merged))

    def _base(self, host: str) -> _Base:
        """The merge shared by every host in exactly this host's groups (cached)."""
        direct = self.member_of[host]
        key = frozenset(direct)
        base = self._bases.get(key)
        if base is None:
            ups = frozenset({"all"}).union(*(self.tree.ancestors[g] for g in direct))
            groups = sorted(ups, key=lambda g: (self.tree.depth[g], g))
            merged: Merged = {k: (e, 0) for k, e in self.defaults.items()}
            rank = 0
            for g in groups:
                for layer in self.group_layers.get(g, []):
                    rank += 1
                    for k, e in layer.items():
                        merged[k] = (e, rank)
            for k, e in self.set_layer.items():
                merged[k] = (e, _SET_RANK)
            unresolved = dict(merged)
            self.secrets.resolve(host, merged)
            self._check_all(merged)
            base = _Base(
                groups,
                unresolved,
                merged,
                {k: e.value for k, (e, _) in merged.items()},
                {k: e.where for k, (e, _) in merged.items()},
            )
            self._bases[key] = base
        return base

    def _check_all(self, merged: Merged) -> None:
        for k, (e, _) in merged.items():
            if not e.checked:
                self.check(k, e)


def default_entries(defaults: dict[str, Any]) -> dict[str, Entry]:
    """Schema defaults as entries that need no check."""
    src = Source("", "default")
    out = {}
    for k, v in defaults.items():
        e = Entry(v, src)
        e.checked = True
        out[k] = e
    return out


def _pick(merged: Merged, names: tuple[str, ...]) -> Any:
    """Value of the highest-precedence alias present; vfleet's name wins at equal level."""
    best = None
    for n in names:
        if n in merged and merged[n][0].value is not None:
            rank = merged[n][1]
            if best is None or rank > best[0]:
                best = (rank, merged[n][0].value)
    return None if best is None else best[1]


def _connection(name: str, merged: Merged) -> dict[str, Any]:
    """Where and how to connect, from the alias sets (values are validated by now)."""
    address = _pick(merged, ADDRESS) or name
    user = _pick(merged, USER)
    port = _pick(merged, PORT)
    key = _pick(merged, _KEY)
    conn = _pick(merged, _CONN)
    if conn is None:
        conn = "local" if name in _LOCAL_NAMES else "ssh"
    elif conn in ("smart", "paramiko"):
        conn = "ssh"
    return {
        "address": str(address),
        "user": None if user is None else str(user),
        "port": port if isinstance(port, int) and not isinstance(port, bool) else 22,
        "key_file": None if key is None else os.path.expanduser(str(key)),
        "connection": str(conn),
    }
