"""Copies of loaded values made of plain dicts and lists, with an optional per-entry
replacement. Apart from common.py so that masking (which uses it) and the loading stages
import it without the model's types, and no module of the package imports in a circle."""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["KEEP", "copy_tree"]

KEEP = object()  # copy_tree's `replace` returns it to copy an entry as it is


def copy_tree(value: Any, replace: Callable[[Any, Any], Any] | None = None) -> Any:
    """A copy made of ordinary dicts and lists (keys in the order written), so hosts carry no
    loader bookkeeping and no two hosts share a mutable value. `replace(key, value)` may give
    a mapping entry another value (a mask). Iterative: the depth is the input's to choose,
    never the stack's."""
    root: list[Any] = [None]
    todo: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while todo:
        parent, key, item = todo.pop()
        if isinstance(item, dict):
            copy: Any = dict.fromkeys(item)
            for k, v in item.items():
                new = KEEP if replace is None else replace(k, v)
                if new is KEEP:
                    todo.append((copy, k, v))
                else:
                    copy[k] = new
        elif isinstance(item, list):
            copy = [None] * len(item)
            todo.extend((copy, i, v) for i, v in enumerate(item))
        else:
            copy = item
        parent[key] = copy
    return root[0]
