"""Load an Ansible YAML inventory into validated hosts with merged variables.

Existing Ansible inventories must load unchanged, so the format, the group_vars/ and
host_vars/ folders and the precedence rules are Ansible's:

    default < all < parent group < child group < host < --set
    (groups of equal depth: alphabetical by name, later wins)
    inline group vars < group_vars/GROUP file; inline host vars < host_vars/HOST file
    mapping values are replaced, never deep-merged

Every problem found is collected and raised together as one InventoryError (one line each,
naming the file, line, group or host, key path and what was expected), so an operator fixes
them all in one pass, and nothing connects to a host while an inventory is invalid. Each
merged value remembers where it came from, because a bad value found on host gpu07 was most
likely written once in a group, and that is where the operator must go to fix it.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet.errors import InventoryError, VfleetError
from fleet.hostpatterns import expand_host_range, match_limit
from fleet.varschema import VarSchema, value_kind

__all__ = ["Host", "Group", "Inventory", "load_inventory", "parse_set_args", "masked_vars",
           "SetArgs", "Source"]

_GROUP_KEYS = ("hosts", "children", "vars")
_VARS_EXTS = ("", ".yml", ".yaml", ".json")   # Ansible's order for group_vars/host_vars files
# Alias sets for connection settings: vfleet's name first (it wins at equal precedence).
_ADDRESS = ("ssh_host", "ansible_host", "ansible_ssh_host")
_USER = ("ssh_user", "ansible_user", "ansible_ssh_user")
_PORT = ("ssh_port", "ansible_port", "ansible_ssh_port")
_KEY = ("ssh_key_file", "ansible_ssh_private_key_file", "ansible_private_key_file")
_CONN = ("connection", "ansible_connection")
_LOCAL_NAMES = ("localhost",)
_MASK_WORDS = re.compile(r"password|passwd|secret|token", re.I)


# ----------------------------------------------------------------------------- public types
@dataclass
class Host:
    """A host ready to connect to: merged vars and the connection settings read from them."""

    name: str
    vars: dict[str, Any] = field(repr=False)  # fully merged, validated, secrets resolved
    groups: list[str]              # every group the host is in, incl. ancestors and 'all'
    address: str                   # ansible_host/ssh_host or name
    user: str | None               # None -> current user
    port: int                      # default 22
    key_file: str | None
    connection: str                # 'ssh' | 'local'
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
    path: Path
    hosts: dict[str, Host]         # in file order
    groups: dict[str, Group]

    def group_hosts(self, name: str) -> list[str]:
        """All hosts of a group, its descendants' included, in inventory order."""
        return [h.name for h in self.hosts.values() if name in h.groups]

    def select(self, limit: str | None) -> list[Host]:
        """Hosts an Ansible `--limit` selects (None: all), in inventory order."""
        if limit is None or not limit.strip():
            return list(self.hosts.values())
        groups = {g: self.group_hosts(g) for g in self.groups}
        names = match_limit(limit, list(self.hosts), groups, source=str(self.path))
        return [self.hosts[n] for n in names]

    def to_list_json(self) -> dict:
        """Like `ansible-inventory --list`: hostvars (secrets masked, defaults left out)."""
        hostvars = {}
        for h in self.hosts.values():
            shown = {k: v for k, v in h.vars.items() if h.sources.get(k, "") != "default"}
            hostvars[h.name] = masked_vars(shown)
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
        """Like `ansible-inventory --graph`: groups and hosts as a tree, sorted by name."""
        lines = ["@all:"]

        def walk(name: str, indent: str) -> None:
            g = self.groups[name]
            for child in sorted(g.children):
                lines.append(f"{indent}|--@{child}:")
                walk(child, indent + "|  ")
            if name != "all":
                for h in sorted(g.hosts):
                    lines.append(f"{indent}|--{h}")

        walk("all", "  ")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Source:
    """Where a value was written: file, line and the group/host it belongs to."""

    file: str
    scope: str                     # "group 'vllm'", "host 'gpu01'", "--set", "default"
    line: int | None = None

    def __str__(self) -> str:
        if not self.file:
            return self.scope
        line = f": line {self.line}" if self.line else ""
        return f"{self.file}{line}: {self.scope}"


class SetArgs(dict):
    """Parsed `--set` values, remembering the raw text so string variables keep '0.10'."""

    raw: dict[str, str]


# ------------------------------------------------------------------------------ YAML reading
class _Map(dict):
    """A mapping that remembers the line of each key, for error messages."""

    lines: dict[Any, int]


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that records key lines and duplicate keys (PyYAML silently keeps the last)."""

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        # Lines and duplicates from the keys as written, before '<<' merge keys are flattened
        # in (a key overriding a merged one is not a duplicate).
        lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            try:
                key = self.construct_object(key_node, deep=True)
                if key in lines:
                    self.duplicates.append((key, key_node.start_mark.line + 1))
                lines[key] = key_node.start_mark.line + 1
            except TypeError:
                pass
        m = _Map(super().construct_mapping(node, deep=True))
        m.lines = lines
        return m

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[Any, int]] = []


_LineLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _LineLoader.construct_mapping)


def _plain(value: Any) -> Any:
    """Strip line bookkeeping so hosts carry ordinary dicts."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _read_yaml(path: Path, display: str, errors: list[str]) -> tuple[bool, Any]:
    """(ok, data) of a YAML file; problems appended to errors as one line each."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        errors.append(f"{display}: no such file")
        return False, None
    except IsADirectoryError:
        errors.append(f"{display}: is a directory; give the inventory file (e.g. {display}/hosts.yml)")
        return False, None
    except (OSError, UnicodeDecodeError) as exc:
        errors.append(f"{display}: cannot read: {exc}")
        return False, None
    loader = _LineLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        hint = ""
        if path.suffix == ".ini" or re.match(r"\s*\[[^\]:]+\]\s*$", text.split("\n", 1)[0]):
            hint = ("; INI inventories are not supported: convert with "
                    f"'ansible-inventory -i {display} --list -y'")
        errors.append(f"{display}: {where}YAML syntax error: {problem}{hint}")
        return False, None
    finally:
        loader.dispose()
    for key, line in loader.duplicates:
        errors.append(f"{display}: line {line}: duplicate key '{key}' (the earlier one would be "
                      "silently lost)")
    return True, data


def _kind(value: Any) -> str:
    return value_kind(value, none="nothing")


def _line(mapping: Any, key: Any) -> int | None:
    return getattr(mapping, "lines", {}).get(key)


def _loc(display: str, line: int | None) -> str:
    return f"{display}: line {line}" if line else display


# --------------------------------------------------------------------------- parsing groups
@dataclass
class _Raw:
    """What the files say, before merging: per group and per host, vars with their sources."""

    display: str
    group_order: list[str] = field(default_factory=lambda: ["all"])
    group_vars: dict[str, dict[str, tuple[Any, Source]]] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    group_hosts: dict[str, list[str]] = field(default_factory=dict)
    host_order: list[str] = field(default_factory=list)
    host_vars: dict[str, dict[str, tuple[Any, Source]]] = field(default_factory=dict)

    def add_group(self, name: str) -> None:
        if name not in self.group_order:
            self.group_order.append(name)
        self.group_vars.setdefault(name, {})
        self.children.setdefault(name, [])
        self.group_hosts.setdefault(name, [])


def _vars_block(raw: _Raw, value: Any, path: str, line: int | None, scope: str,
                errors: list[str]) -> dict[str, tuple[Any, Source]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.append(f"{_loc(raw.display, line)}: {path}: expected a mapping of variables, "
                      f"got {_kind(value)}")
        return {}
    return {str(k): (_plain(v), Source(raw.display, scope, _line(value, k) or line))
            for k, v in value.items()}


def _parse_group(raw: _Raw, name: str, body: Any, path: str, line: int | None,
                 errors: list[str]) -> None:
    raw.add_group(name)
    if body is None:
        return
    if not isinstance(body, dict):
        errors.append(f"{_loc(raw.display, line)}: {path}: expected a mapping with keys "
                      f"hosts/children/vars, got {_kind(body)}")
        return
    for key in body:
        if key not in _GROUP_KEYS:
            close = difflib.get_close_matches(str(key), _GROUP_KEYS, n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            errors.append(f"{_loc(raw.display, _line(body, key))}: {path}: unknown key '{key}' "
                          f"(a group takes hosts, children, vars){hint}")
    # Keys in the order written, so hosts keep file order whether hosts or children come first.
    for key in body:
        if key == "vars":
            raw.group_vars[name].update(_vars_block(
                raw, body["vars"], f"{path}.vars", _line(body, "vars"), f"group '{name}'",
                errors))
        elif key == "hosts":
            _parse_hosts(raw, name, body["hosts"], path, _line(body, "hosts"), errors)
        elif key == "children":
            _parse_children(raw, name, body["children"], path, _line(body, "children"), errors)


def _parse_hosts(raw: _Raw, name: str, hosts: Any, path: str, hline: int | None,
                 errors: list[str]) -> None:
    if isinstance(hosts, list):
        errors.append(f"{_loc(raw.display, hline)}: {path}.hosts: expected a mapping of host "
                      "names to their variables, got a list (write 'gpu01:' not '- gpu01')")
    elif hosts is not None and not isinstance(hosts, dict):
        errors.append(f"{_loc(raw.display, hline)}: {path}.hosts: expected a mapping of host "
                      f"names to their variables, got {_kind(hosts)}")
    elif hosts:
        for pattern, hvars in hosts.items():
            _parse_host(raw, name, str(pattern), hvars, f"{path}.hosts",
                        _line(hosts, pattern) or hline, errors)


def _parse_children(raw: _Raw, name: str, children: Any, path: str, cline: int | None,
                    errors: list[str]) -> None:
    if children is not None and not isinstance(children, dict):
        errors.append(f"{_loc(raw.display, cline)}: {path}.children: expected a mapping of "
                      f"group names, got {_kind(children)}")
    elif children:
        for child, cbody in children.items():
            child = str(child)
            if child not in raw.children[name]:
                raw.children[name].append(child)
            _parse_group(raw, child, cbody, f"{path}.children.{child}",
                         _line(children, child) or cline, errors)


def _parse_host(raw: _Raw, group: str, pattern: str, hvars: Any, path: str,
                line: int | None, errors: list[str]) -> None:
    port = None
    m = re.match(r"^(.+):(\d+)$", pattern)
    if m and ":" not in re.sub(r"\[[^\]]*\]", "", m.group(1)):
        pattern, port = m.group(1), int(m.group(2))   # Ansible's 'name:port' host key
    try:
        names = expand_host_range(pattern) if ("[" in pattern or "]" in pattern) else [pattern]
    except ValueError as exc:
        errors.append(f"{_loc(raw.display, line)}: {path}: {exc}")
        return
    if hvars is not None and not isinstance(hvars, dict):
        errors.append(f"{_loc(raw.display, line)}: {path}.{pattern}: expected a mapping of "
                      f"variables (or nothing), got {_kind(hvars)}")
        hvars = None
    for name in names:
        scope = f"host '{name}'"
        if name not in raw.host_vars:
            raw.host_order.append(name)
            raw.host_vars[name] = {}
        if name not in raw.group_hosts[group]:
            raw.group_hosts[group].append(name)
        block = _vars_block(raw, hvars, f"{path}.{pattern}", line, scope, errors)
        if port is not None:
            block.setdefault("ansible_port", (port, Source(raw.display, scope, line)))
        raw.host_vars[name].update(block)


def _parse_top(raw: _Raw, data: Any, errors: list[str]) -> None:
    if data is None:
        errors.append(f"{raw.display}: the file is empty; expected an Ansible YAML inventory "
                      "starting with 'all:'")
        return
    if not isinstance(data, dict):
        errors.append(f"{raw.display}: expected a mapping of groups at the top level (an Ansible "
                      f"YAML inventory starting with 'all:'), got {_kind(data)}"
                      + ("; INI inventories are not supported" if isinstance(data, (list, str))
                         else ""))
        return
    for key, body in data.items():
        key = str(key)
        if key in _GROUP_KEYS:
            errors.append(f"{_loc(raw.display, _line(data, key))}: top level: '{key}' would be a "
                          f"group named '{key}'; put it under 'all:'")
            continue
        _parse_group(raw, key, body, key, _line(data, key), errors)
        if key != "all" and key not in raw.children["all"]:
            raw.children["all"].append(key)


# ------------------------------------------------------------------- group_vars / host_vars
def _vars_files(folder: Path, name: str) -> list[Path]:
    """Ansible's lookup: NAME (file, or folder of files merged in name order), NAME.yml, ..."""
    out: list[Path] = []
    for ext in _VARS_EXTS:
        p = folder / f"{name}{ext}"
        if p.is_dir() and ext == "":
            for sub in sorted(p.rglob("*")):
                if (sub.is_file() and not sub.name.startswith(".")
                        and sub.suffix in _VARS_EXTS):
                    out.append(sub)
        elif p.is_file():
            out.append(p)
    return out


def _load_vars_files(folder: Path, display_dir: str, name: str, scope: str,
                     errors: list[str]) -> dict[str, tuple[Any, Source]]:
    merged: dict[str, tuple[Any, Source]] = {}
    for f in _vars_files(folder, name):
        display = os.path.join(display_dir, str(f.relative_to(folder)))
        ok, data = _read_yaml(f, display, errors)
        if not ok or data is None:
            continue
        if not isinstance(data, dict):
            errors.append(f"{display}: expected a mapping of variables for {scope}, "
                          f"got {_kind(data)}")
            continue
        for k, v in data.items():
            merged[str(k)] = (_plain(v), Source(display, scope, _line(data, k)))
    return merged


# ------------------------------------------------------------------------- graph structure
def _break_cycles(raw: _Raw, errors: list[str]) -> None:
    """Report each cycle in children (Ansible refuses them too) and drop the closing edge."""
    state: dict[str, int] = {}   # 1 = on the stack, 2 = done

    def visit(g: str, stack: list[str]) -> None:
        state[g] = 1
        for child in list(raw.children.get(g, [])):
            if state.get(child) == 1:
                cycle = stack[stack.index(child):] + [g, child] if child in stack else [g, child]
                errors.append(f"{raw.display}: group '{g}': children form a cycle: "
                              + " -> ".join(cycle))
                raw.children[g].remove(child)
            elif state.get(child) is None:
                visit(child, stack + [g])
        state[g] = 2

    for g in list(raw.group_order):
        if state.get(g) is None:
            visit(g, [])


def _parents(raw: _Raw) -> dict[str, set[str]]:
    parents: dict[str, set[str]] = {g: set() for g in raw.group_order}
    for g, kids in raw.children.items():
        for k in kids:
            parents[k].add(g)
    for g in raw.group_order:
        if g != "all" and not parents[g]:
            parents[g].add("all")
    return parents


def _depths(raw: _Raw, parents: dict[str, set[str]]) -> dict[str, int]:
    depth: dict[str, int] = {"all": 0}

    def d(g: str) -> int:
        if g not in depth:
            depth[g] = 1 + max((d(p) for p in parents[g]), default=0)
        return depth[g]

    for g in raw.group_order:
        d(g)
    return depth


# -------------------------------------------------------------------------------- merging
def _default_schema() -> VarSchema:
    # The table of vfleet's variables lives with the roles; the engine only falls back on it
    # when the caller passes no schema, and imports it late so fleet/ stays importable and
    # testable without roles/ (pass schema= to use the engine alone).
    from roles.variables import SCHEMA
    return SCHEMA


def _pick(merged: dict, names: tuple[str, ...]) -> Any:
    """Value of the highest-precedence alias present; vfleet's name wins at equal level."""
    best = None
    for n in names:
        if n in merged and merged[n][0] is not None:
            rank = merged[n][2]
            if best is None or rank > best[0]:
                best = (rank, merged[n][0])
    return None if best is None else best[1]


def _resolve_secrets(host: str, merged: dict, schema: VarSchema, base: Path,
                     errors: list[str], cache: dict) -> None:
    """Replace NAME_file / NAME_env by the secret's value; never echo a secret anywhere."""
    for name in schema.secret_names:
        f_key, e_key = schema.secret_sources(name)
        given = [(merged[k][2], k) for k in (name, f_key, e_key)
                 if k in merged and merged[k][0] is not None and merged[k][1].scope != "default"]
        if not given:
            continue
        top = max(r for r, _ in given)
        winners = [k for r, k in given if r == top]
        if len(winners) > 1:
            src = merged[winners[0]][1]
            errors.append(f"{src}: set only one of {', '.join(winners)}")
            continue
        key = winners[0]
        value, src, rank = merged[key]
        if key == name:
            continue
        if not isinstance(value, str) or not value:
            continue   # the schema check reports the bad NAME_file / NAME_env value
        if key == e_key:
            secret = os.environ.get(value)
            if not secret:
                errors.append(f"{src}: vars.{key}: environment variable '{value}' is not set or "
                              f"empty (needed for {name} of host '{host}')")
                continue
        else:
            path = Path(value).expanduser()
            if not path.is_absolute():
                path = base / path
            if path not in cache:
                try:
                    cache[path] = (path.read_text(encoding="utf-8").strip(), None)
                except FileNotFoundError:
                    cache[path] = (None, "no such file")
                except (OSError, UnicodeDecodeError) as exc:
                    cache[path] = (None, getattr(exc, "strerror", None) or type(exc).__name__)
            secret, why = cache[path]
            if secret is None or not secret:
                errors.append(f"{src}: vars.{key}: cannot read secret file '{path}' for "
                              f"{name} of host '{host}': {why or 'the file is empty'}")
                continue
        merged[name] = (secret, src, rank)


def _connection(name: str, merged: dict) -> tuple[str, str | None, int, str | None, str]:
    address = _pick(merged, _ADDRESS) or name
    user = _pick(merged, _USER)
    port = _pick(merged, _PORT)
    key = _pick(merged, _KEY)
    conn = _pick(merged, _CONN)
    if conn is None:
        conn = "local" if name in _LOCAL_NAMES else "ssh"
    elif conn in ("smart", "paramiko"):
        conn = "ssh"
    return (str(address), None if user is None else str(user),
            port if isinstance(port, int) and not isinstance(port, bool) else 22,
            None if key is None else os.path.expanduser(str(key)), str(conn))


def load_inventory(path: str | Path, overrides: dict[str, Any] | None = None, *,
                   schema: VarSchema | None = None) -> Inventory:
    """Read, merge and validate an inventory; raise InventoryError with every problem found.

    `overrides` are `--set` values (see parse_set_args); they beat everything else.
    """
    schema = schema or _default_schema()
    path = Path(path)
    display = str(path)
    errors: list[str] = []
    ok, data = _read_yaml(path, display, errors)
    if not ok:
        raise InventoryError(errors)
    raw = _Raw(display)
    raw.add_group("all")
    _parse_top(raw, data, errors)
    if data is not None and isinstance(data, dict) and not raw.host_order and not errors:
        errors.append(f"{display}: no hosts: the inventory defines no host")
    _break_cycles(raw, errors)

    # ungrouped: hosts in no group but 'all' (Ansible)
    raw.add_group("ungrouped")
    if "ungrouped" not in raw.children["all"]:
        raw.children["all"].insert(0, "ungrouped")
    member_of: dict[str, set[str]] = {h: set() for h in raw.host_order}
    for g, hs in raw.group_hosts.items():
        for h in hs:
            member_of[h].add(g)
    for h in raw.host_order:
        if member_of[h] <= {"all", "ungrouped"}:
            if h not in raw.group_hosts["ungrouped"]:
                raw.group_hosts["ungrouped"].append(h)
            member_of[h].add("ungrouped")

    parents = _parents(raw)
    depth = _depths(raw, parents)

    base = path.parent
    gv_dir, hv_dir = base / "group_vars", base / "host_vars"
    gv_disp, hv_disp = os.path.join(os.path.dirname(display), "group_vars"), \
        os.path.join(os.path.dirname(display), "host_vars")
    file_group_vars = {g: _load_vars_files(gv_dir, gv_disp, g, f"group '{g}'", errors)
                       for g in raw.group_order} if gv_dir.is_dir() else {}
    file_host_vars = {h: _load_vars_files(hv_dir, hv_disp, h, f"host '{h}'", errors)
                      for h in raw.host_order} if hv_dir.is_dir() else {}

    raw_set = getattr(overrides, "raw", {}) if overrides else {}
    set_layer: dict[str, tuple[Any, Source]] = {}
    for k, v in (overrides or {}).items():
        if k in raw_set and not isinstance(v, str) and v is not None \
                and schema.is_string_typed(k):
            v = raw_set[k]   # '--set vllm_version=0.10' means the string, not the number 0.1
        set_layer[k] = (v, Source("", "--set"))

    # Unknown-key check on every place a var is written, so a typo is caught even in a
    # group with no hosts yet.
    seen: set[str] = set()
    layers_all = (list(raw.group_vars.values()) + list(file_group_vars.values())
                  + list(raw.host_vars.values()) + list(file_host_vars.values()) + [set_layer])
    for layer in layers_all:
        for k, (_, src) in layer.items():
            if k.startswith("ansible_") and k not in schema.known_names:
                continue   # Ansible's own settings (ansible_become, ...): accepted as is
            hint = schema.suggest(k)
            if hint:
                msg = f"{src}: unknown variable '{k}'; did you mean '{hint}'?"
                if msg not in seen:
                    seen.add(msg)
                    errors.append(msg)

    ancestors: dict[str, set[str]] = {}

    def ups(g: str) -> set[str]:
        if g not in ancestors:
            ancestors[g] = {g}.union(*(ups(p) for p in parents[g]))
        return ancestors[g]

    defaults = {k: (v, Source("", "default")) for k, v in schema.defaults().items()}
    secret_cache: dict = {}
    hosts: dict[str, Host] = {}
    for h in raw.host_order:
        groups = set().union(*(ups(g) for g in member_of[h])) | {"all"}
        ordered = sorted(groups, key=lambda g: (depth[g], g))
        layers = [defaults]
        for g in ordered:
            layers += [raw.group_vars.get(g, {}), file_group_vars.get(g, {})]
        layers += [raw.host_vars[h], file_host_vars.get(h, {}), set_layer]
        merged: dict[str, tuple[Any, Source, int]] = {}
        for rank, layer in enumerate(layers):
            for k, (v, src) in layer.items():
                merged[k] = (v, src, rank)
        _resolve_secrets(h, merged, schema, base, errors, secret_cache)
        for k, (v, src, _) in merged.items():
            if src.scope == "default":
                continue
            for problem in schema.check(k, v):
                msg = f"{src}: {problem}"
                if msg not in seen:
                    seen.add(msg)
                    errors.append(msg)
        address, user, port, key_file, conn = _connection(h, merged)
        hosts[h] = Host(name=h, vars={k: v for k, (v, _, _) in merged.items()},
                        groups=ordered, address=address, user=user, port=port,
                        key_file=key_file, connection=conn,
                        sources={k: str(s) for k, (_, s, _) in merged.items()})
    if errors:
        raise InventoryError(_in_file_order(errors))

    groups_out: dict[str, Group] = {}
    for g in raw.group_order:
        gvars = {k: v for k, (v, _) in raw.group_vars.get(g, {}).items()}
        gvars.update({k: v for k, (v, _) in file_group_vars.get(g, {}).items()})
        groups_out[g] = Group(name=g, vars=gvars, children=list(raw.children.get(g, [])),
                              hosts=list(raw.group_hosts.get(g, [])))
    return Inventory(path=path, hosts=hosts, groups=groups_out)


# ------------------------------------------------------------------------------ utilities
def _in_file_order(errors: list[str]) -> list[str]:
    """Errors sorted by file and line, so the operator can walk down the file fixing them."""
    def key(msg: str) -> tuple[str, int]:
        m = re.match(r"^(.*?): line (\d+): ", msg)
        if m:
            return m.group(1), int(m.group(2))
        return (msg.split(": ", 1)[0] if not msg.startswith("--set") else "\uffff"), 0
    return sorted(errors, key=key)


def masked_vars(vars: dict[str, Any], schema: VarSchema | None = None) -> dict[str, Any]:
    """A copy safe to print: secret variables (and keys that look like passwords/tokens)
    become '***'. NAME_file / NAME_env stay: they say where a secret is, not what it is."""
    schema = schema or _default_schema()
    secret = set(schema.secret_names)
    sources = {k for n in secret for k in schema.secret_sources(n)}
    out = {}
    for k, v in vars.items():
        hide = k in secret or (k not in sources and k not in schema.specs
                               and _MASK_WORDS.search(k) is not None)
        out[k] = "***" if hide and v is not None else v
    return out


_SET_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_set_args(items: list[str]) -> dict[str, Any]:
    """`--set k=v` items to a dict of YAML-parsed values (`max_num_seqs=64` gives 64).

    The raw text is kept too (SetArgs.raw): for variables typed string the loader uses it,
    so `vllm_version=0.10` stays '0.10' instead of becoming the number 0.1.
    """
    out = SetArgs()
    out.raw = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep:
            raise VfleetError(f"--set '{item}': expected NAME=VALUE (e.g. --set max_num_seqs=64)")
        if not _SET_KEY.match(key):
            raise VfleetError(f"--set '{item}': '{key}' is not a variable name")
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            raise VfleetError(f"--set {key}: the value is not valid YAML; quote it") from None
        out[key] = value
        out.raw[key] = text
    return out
