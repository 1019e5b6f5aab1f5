"""PromQL over vLLM's metric names, shared by the alert rules, the verdict alerts and the
dashboard. Its own module so that _rules.py and _verdict_rules.py both import it without a
cycle."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

Names = Mapping[str, "str | Sequence[str]"]


def any_of(names: Names, key: str, term: Callable[[str], str]) -> str:
    """`term(name)` for each exported name of a logical metric, joined with `or` (a vLLM
    version may export a metric under two names while it renames it)."""
    value = names[key]
    exported = [value] if isinstance(value, str) else list(value)
    if not exported:
        raise ValueError(f"no exported metric name for {key!r}")
    parts = [term(n) for n in exported]
    return parts[0] if len(parts) == 1 else "(" + " or ".join(f"({p})" for p in parts) + ")"
