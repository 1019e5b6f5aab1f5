"""load_inventory: read, parse, merge and validate, in that order, collecting every problem.

Every problem found is raised together as one InventoryError (one line each, naming the
file, line, group or host, key path and what was expected), so an operator fixes them all
in one pass, and nothing connects to a host while an inventory is invalid. Problems that
do not stop a run come back as Inventory.warnings.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vfleet.engine.errors import InventoryError
from vfleet.engine.inventory.common import Entry, in_file_order
from vfleet.engine.inventory.files import looks_like_ini, read_text, read_yaml
from vfleet.engine.inventory.graph import Tree, add_ungrouped, attach_orphans, break_cycles
from vfleet.engine.inventory.ini import parse_ini_inventory
from vfleet.engine.inventory.merge import Merger, default_entries
from vfleet.engine.inventory.model import Group, Inventory, Source
from vfleet.engine.inventory.parse import RawInventory, parse_yaml_inventory
from vfleet.engine.inventory.secrets import SecretReader
from vfleet.engine.inventory.validate import Checker
from vfleet.engine.inventory.varsfiles import VarsFolder
from vfleet.engine.varschema import VarSchema

__all__ = ["load_inventory"]


def load_inventory(path: str | Path, overrides: dict[str, Any] | None = None, *, schema: VarSchema) -> Inventory:
    """Read, merge and validate an inventory (YAML or INI); raise InventoryError with every
    problem found.

    `overrides` are `--set` values (see parse_set_args); they beat everything else.
    `schema` is the table of variables to check against: the engine has none of its own.
    """
    path = Path(path)
    errors: list[str] = []
    warnings: list[str] = []
    raw = _parse(path, errors)
    break_cycles(raw, errors)
    attach_orphans(raw)
    member_of = add_ungrouped(raw)
    tree = Tree(raw)
    _warn_name_clashes(raw, warnings)

    display_dir = os.path.dirname(raw.display)
    gv = VarsFolder(path.parent / "group_vars", os.path.join(display_dir, "group_vars"))
    hv = VarsFolder(path.parent / "host_vars", os.path.join(display_dir, "host_vars"))
    group_layers = {g: [raw.group_vars[g], gv.load(g, f"group '{g}'", errors)] for g in raw.groups}
    host_layers = (
        {h: [raw.host_vars[h], hv.load(h, f"host '{h}'", errors)] for h in raw.host_vars}
        if hv.names
        else {h: [raw.host_vars[h]] for h in raw.host_vars}
    )
    set_layer = _set_layer(overrides, schema)

    checker = Checker(schema, errors, warnings)
    for layers in list(group_layers.values()) + list(host_layers.values()) + [[set_layer]]:
        for layer in layers:
            checker.names(layer)
    merger = Merger(
        tree,
        member_of,
        group_layers,
        host_layers,
        default_entries(schema.defaults()),
        set_layer,
        SecretReader(schema, path.parent, errors, warnings),
        checker.value,
    )
    hosts = {h: merger.host(h) for h in raw.host_vars}
    if errors:
        raise InventoryError(in_file_order(errors))
    groups = {
        g: Group(
            name=g,
            vars={k: e.value for layer in group_layers[g] for k, e in layer.items()},
            children=list(raw.children[g]),
            hosts=list(raw.group_hosts[g]),
        )
        for g in raw.groups
    }
    return Inventory(path=path, hosts=hosts, groups=groups, warnings=in_file_order(warnings), schema=schema)


def _parse(path: Path, errors: list[str]) -> RawInventory:
    """The file's groups and hosts; raises at once when the file cannot be read at all."""
    raw = RawInventory(str(path))
    text = read_text(path, raw.display, errors)
    if text is None:
        raise InventoryError(errors)
    if looks_like_ini(path, text):
        parse_ini_inventory(raw, text, errors)
        data_ok = True
    else:
        ok, data = read_yaml(text, raw.display, errors)
        if not ok:
            raise InventoryError(errors)
        parse_yaml_inventory(raw, data, errors)
        data_ok = isinstance(data, dict)
    if data_ok and not raw.host_vars and not errors:
        errors.append(f"{raw.display}: no hosts: the inventory defines no host")
    return raw


def _set_layer(overrides: dict[str, Any] | None, schema: VarSchema) -> dict[str, Entry]:
    raw_text = getattr(overrides, "raw", {}) if overrides else {}
    layer: dict[str, Entry] = {}
    for k, v in (overrides or {}).items():
        if k in raw_text and not isinstance(v, str) and v is not None and schema.is_string_typed(k):
            v = raw_text[k]  # '--set vllm_version=0.10' means the string, not the number 0.1
        layer[k] = Entry(v, Source("", "--set"))
    return layer


def _warn_name_clashes(raw: RawInventory, warnings: list[str]) -> None:
    """Ansible warns "Found both group and host with same name" and, for a pattern of that
    name, selects the group (InventoryManager matches groups first); so does vfleet."""
    for g in raw.groups:
        if g in raw.host_vars:
            warnings.append(
                f"{raw.display}: group and host both named '{g}': --limit {g} "
                "selects the group (as Ansible does); rename one of them"
            )
