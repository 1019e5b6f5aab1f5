"""The group graph: cycles, parents, depths, ancestors and 'ungrouped', without recursion.

Depth decides precedence (a child group beats its parent), so it must be computed on a
graph with no cycles; every walk here uses an explicit stack or a topological order,
because a generated inventory may nest groups hundreds of levels deep.
"""

from __future__ import annotations

from vfleet.engine.inventory.parse import RawInventory

__all__ = ["break_cycles", "attach_orphans", "add_ungrouped", "Tree"]


def break_cycles(raw: RawInventory, errors: list[str]) -> None:
    """Report each cycle in children (Ansible refuses them too) and drop the closing edge."""
    state: dict[str, int] = {}  # 1 = on the path, 2 = done
    for start in list(raw.groups):
        if start in state:
            continue
        path: list[str] = [start]
        todo = [iter(list(raw.children.get(start, {})))]
        state[start] = 1
        while todo:
            child = next(todo[-1], None)
            g = path[-1]
            if child is None:
                state[g] = 2
                path.pop()
                todo.pop()
            elif state.get(child) == 1:
                cycle = path[path.index(child) :] + [child]
                errors.append(f"{raw.display}: group '{g}': children form a cycle: " + " -> ".join(cycle))
                del raw.children[g][child]
            elif child not in state:
                state[child] = 1
                path.append(child)
                todo.append(iter(list(raw.children.get(child, {}))))


def attach_orphans(raw: RawInventory) -> None:
    """Make every group that is nobody's child a child of 'all' (Ansible's
    reconcile_inventory): INI sections declare groups without saying where they hang."""
    has_parent = {k for kids in raw.children.values() for k in kids}
    for g in raw.groups:
        if g != "all" and g not in has_parent:
            raw.children["all"][g] = None


def add_ungrouped(raw: RawInventory) -> dict[str, set[str]]:
    """Put hosts that are in no group but 'all' into 'ungrouped' (Ansible's rule, which
    also takes a host out of 'ungrouped' once it is in another group); return each host's
    direct groups."""
    raw.add_group("ungrouped")
    raw.children["all"] = {"ungrouped": None, **raw.children["all"]}
    member_of: dict[str, set[str]] = {h: set() for h in raw.host_vars}
    for g, hs in raw.group_hosts.items():
        for h in hs:
            member_of[h].add(g)
    ungrouped = raw.group_hosts["ungrouped"]
    for h, groups in member_of.items():
        if groups <= {"all", "ungrouped"}:
            ungrouped[h] = None
            groups.add("ungrouped")
        elif "ungrouped" in groups:
            ungrouped.pop(h, None)
            groups.discard("ungrouped")
    return member_of


class Tree:
    """Parents, depth and ancestors of every group of a graph without cycles, in which
    every group but 'all' has a parent (attach_orphans)."""

    def __init__(self, raw: RawInventory):
        self.parents: dict[str, set[str]] = {g: set() for g in raw.groups}
        for g, kids in raw.children.items():
            for k in kids:
                self.parents[k].add(g)
        self.order = self._topological(raw)
        self.depth: dict[str, int] = {}
        self.ancestors: dict[str, frozenset[str]] = {}
        for g in self.order:  # parents before children
            ps = self.parents[g]
            self.depth[g] = 1 + max((self.depth[p] for p in ps), default=-1)
            self.ancestors[g] = frozenset({g}).union(*(self.ancestors[p] for p in ps))

    def _topological(self, raw: RawInventory) -> list[str]:
        """Kahn's algorithm: each group after all of its parents."""
        waiting = {g: len(ps) for g, ps in self.parents.items()}
        kids: dict[str, list[str]] = {g: [] for g in raw.groups}
        for g, ps in self.parents.items():
            for p in ps:
                kids[p].append(g)
        ready = [g for g, n in waiting.items() if n == 0]
        order: list[str] = []
        while ready:
            g = ready.pop()
            order.append(g)
            for k in kids[g]:
                waiting[k] -= 1
                if waiting[k] == 0:
                    ready.append(k)
        return order
