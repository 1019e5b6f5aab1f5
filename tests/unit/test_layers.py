"""The package's layers, checked from the source (docs/architecture.md describes them).

vfleet/ is one package in layers, lowest first:

    engine < config < templates < clients < roles < lab < cli

A module may import its own layer and the layers below it, never one above: the engine knows
nothing of vLLM, the configuration nothing of the roles, the roles nothing of the CLI. The
package root (vfleet/__init__.py: the version) sits below every layer and imports nothing of
vfleet. Imports inside functions count for this rule too: a lazy import is still a dependency.

More rules: module-level imports between vfleet's modules form no cycle; each role package
offers what it offers in its __init__.py (its face, with __all__) and keeps every module private
("_name"); nothing outside a role imports those private modules or names; the role packages
import each other in one direction only.

Every module under vfleet/ is parsed with ast; nothing is imported, so the test also covers
modules whose dependencies are missing here. A new package under vfleet/ must be given a layer
below (the test fails until it is).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vfleet"

# Lowest first. The root package (vfleet/__init__.py) is below them all.
LAYERS = ["engine", "config", "templates", "clients", "roles", "lab", "cli"]
ROOT_LAYER = "vfleet"


def layer_rank(layer: str) -> int:
    return -1 if layer == ROOT_LAYER else LAYERS.index(layer)


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted
    target: str  # imported vfleet module (or package), dotted
    names: tuple  # the names taken from it (`from X import a, b`), empty for `import X`
    line: int
    module_level: bool  # executed when the module is imported (not inside a function)
    type_only: bool  # under `if TYPE_CHECKING:`

    def where(self) -> str:
        path = module_path(self.source).relative_to(ROOT)
        return f"{path}:{self.line}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_path(name: str) -> Path:
    base = ROOT.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = all_modules()


def is_package(name: str) -> bool:
    return module_path(name).name == "__init__.py"


def layer_of(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ROOT_LAYER


def role_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "roles" else None


def _resolve_relative(source: str, level: int, module: str | None) -> str:
    base = source.split(".")
    if not is_package(source):
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(source: str) -> list[Import]:
    """Every import of a vfleet module in `source`, with where and how it runs."""
    tree = ast.parse(MODULES[source].read_text(), filename=str(MODULES[source]))
    found: list[Import] = []

    def add(target: str, names: tuple, node: ast.stmt, module_level: bool, type_only: bool):
        if target == "vfleet" or target.startswith("vfleet."):
            found.append(Import(source, target, names, node.lineno, module_level, type_only))

    def visit(nodes, module_level: bool, type_only: bool):
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, (), node, module_level, type_only)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = _resolve_relative(source, node.level, node.module)
                names = tuple(a.name for a in node.names)
                # `from P import m` where P.m is a module depends on P.m; else on P itself.
                plain = [n for n in names if f"{base}.{n}" not in MODULES]
                for n in names:
                    if f"{base}.{n}" in MODULES:
                        add(f"{base}.{n}", (), node, module_level, type_only)
                if plain:
                    add(base, tuple(plain), node, module_level, type_only)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(ast.iter_child_nodes(node), False, type_only)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.body, module_level, True)
                visit(node.orelse, module_level, type_only)
            else:
                visit(ast.iter_child_nodes(node), module_level, type_only)

    visit(tree.body, True, False)
    return found


ALL_IMPORTS = [imp for name in MODULES for imp in imports_of(name)]


def test_every_module_is_in_a_layer():
    unknown = sorted({layer_of(m) for m in MODULES} - set(LAYERS) - {ROOT_LAYER})
    assert not unknown, (
        f"packages under vfleet/ with no layer: {unknown}; add each to LAYERS in "
        f"tests/unit/test_layers.py and to docs/architecture.md"
    )


def test_imports_only_go_down_the_layers():
    wrong = []
    for imp in ALL_IMPORTS:
        have, want = layer_of(imp.source), layer_of(imp.target)
        if layer_rank(want) > layer_rank(have):
            how = "" if imp.module_level else " (inside a function)"
            wrong.append(f"{imp.where()}: {imp.source} ({have}) imports {imp.target} ({want}){how}")
    order = " < ".join(LAYERS)
    assert not wrong, f"imports of a higher layer (order: {order}):\n" + "\n".join(wrong)


def test_the_package_root_imports_nothing_of_vfleet():
    assert not [i for i in ALL_IMPORTS if i.source == "vfleet"]


def private_parts(imp: Import) -> list[str]:
    """The private modules or names of a role that `imp` reaches for."""
    parts = [p for p in imp.target.split(".")[3:] if p.startswith("_") and p != "__init__"]
    return parts + [n for n in imp.names if n.startswith("_")]


def reaches_into_a_role(imp: Import) -> bool:
    """An import from outside a role package of one of its private modules or names."""
    theirs = role_of(imp.target)
    return theirs is not None and role_of(imp.source) != theirs and bool(private_parts(imp))


def test_nothing_outside_a_role_imports_its_private_modules():
    """The CLI, the lab and the other roles use a role through its face (its __init__.py)."""
    wrong = [
        f"{imp.where()}: {imp.source} imports {imp.target} {private_parts(imp)}; import it from "
        f"vfleet.roles.{role_of(imp.target)} (add it to that face's __all__ if it is offered)"
        for imp in ALL_IMPORTS
        if reaches_into_a_role(imp)
    ]
    assert not wrong, "a role's private modules used from outside it:\n" + "\n".join(wrong)


ROLE_PACKAGES = sorted({role_of(m) for m in MODULES if role_of(m)})
# The testinfra suite `vfleet verify` hands to pytest by path: pytest collects it by its name.
NOT_MODULES = {"vfleet.roles.verify.test_deployed"}


def face_all(role: str) -> list[str] | None:
    """The role face's __all__, read from its source."""
    tree = ast.parse(module_path(f"vfleet.roles.{role}").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


def test_every_role_names_its_offer_and_keeps_the_rest_private():
    wrong = []
    for role in ROLE_PACKAGES:
        if face_all(role) is None:
            wrong.append(f"vfleet/roles/{role}/__init__.py: no __all__ naming what the role offers")
        for name in MODULES:
            parts = name.split(".")
            if len(parts) == 4 and parts[2] == role and not parts[3].startswith("_") and name not in NOT_MODULES:
                wrong.append(
                    f"{module_path(name).relative_to(ROOT)}: a public module inside role {role}; "
                    f"name it _{parts[3]} and offer what others use from the face"
                )
    assert not wrong, "\n".join(wrong)


def role_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], Import]]:
    """Role package -> the role packages it imports, at module level or inside functions."""

    def edge(imp: Import) -> tuple[str, str] | None:
        mine, theirs = role_of(imp.source), role_of(imp.target)
        return (mine, theirs) if mine and theirs and mine != theirs and not imp.type_only else None

    return import_graph(ROLE_PACKAGES, edge)


def test_role_packages_import_each_other_in_one_direction():
    """No import between role packages runs back up, lazy ones included: each face can load
    every module of its role without meeting itself half-initialised."""
    assert_no_cycle(*role_graph(), "role packages import each other in a circle", "role {a} imports role {b}")


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(edges):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(edges.get(start, ())))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(edges.get(nxt, ()))))
    return None


def import_graph(
    nodes, edge_of: Callable[[Import], tuple[str, str] | None]
) -> tuple[dict[str, set[str]], dict[tuple[str, str], Import]]:
    """{node: the nodes it imports}, each edge `edge_of(import)` (None: not an edge), and the
    first import that made each edge (where a failure points)."""
    edges: dict[str, set[str]] = {n: set() for n in nodes}
    first: dict[tuple[str, str], Import] = {}
    for imp in ALL_IMPORTS:
        edge = edge_of(imp)
        if edge:
            edges[edge[0]].add(edge[1])
            first.setdefault(edge, imp)
    return edges, first


def assert_no_cycle(edges: dict[str, set[str]], first: dict[tuple[str, str], Import], what: str, step: str) -> None:
    """Fail naming each import of a cycle (`step` formatted with the edge's a and b)."""
    cycle = find_cycle(edges)
    if cycle:
        steps = [f"{first[(a, b)].where()}: " + step.format(a=a, b=b) for a, b in zip(cycle, cycle[1:])]
        raise AssertionError(f"{what}:\n" + "\n".join(steps))


def module_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], Import]]:
    def edge(imp: Import) -> tuple[str, str] | None:
        executed = imp.module_level and not imp.type_only
        return (imp.source, imp.target) if executed and imp.target != imp.source and imp.target in MODULES else None

    return import_graph(MODULES, edge)


def test_module_imports_form_no_cycle():
    assert_no_cycle(*module_graph(), "module-level imports form a cycle", "{a} imports {b}")


def test_the_checks_catch_what_they_are_for():
    """The checker itself: a cycle is found, an acyclic graph passes, relative imports resolve."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert layer_rank("engine") < layer_rank("config") < layer_rank("cli")
    assert _resolve_relative("vfleet.roles.preflight._checks", 1, "_nccl") == "vfleet.roles.preflight._nccl"
    assert _resolve_relative("vfleet.roles.preflight", 1, "_audit") == "vfleet.roles.preflight._audit"
    assert any(
        i.source == "vfleet.roles.preflight._checks" and i.target == "vfleet.roles.preflight._nccl" for i in ALL_IMPORTS
    )
    into = Import("vfleet.cli.deploy", "vfleet.roles.service._unit", ("RESTART",), 1, True, False)
    assert reaches_into_a_role(into)
    assert not reaches_into_a_role(
        Import("vfleet.roles.service._render", "vfleet.roles.service._argv", (), 1, True, False)
    )
    assert not reaches_into_a_role(Import("vfleet.cli.deploy", "vfleet.roles.service", ("RESTART",), 1, True, False))
    assert reaches_into_a_role(
        Import("vfleet.roles.weights._copies", "vfleet.roles.service", ("_wait",), 1, True, False)
    )
