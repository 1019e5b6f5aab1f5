"""Batches of a rolling restart (Ansible's serial): which hosts restart together, in order.

Apart from vfleet/roles/rollout/_rolling.py, which runs the batches: planning is pure (hosts and
a spec in, lists out), is checked before anything connects (`deploy --batch` validates the
spec up front) and is timed on its own at fleet scale (benchmarks/render_scale.py)."""

from __future__ import annotations

import math
from typing import Mapping

from vfleet.engine.errors import VfleetError

__all__ = ["plan_batches", "batch_sizes"]


def plan_batches(
    spec: str, hosts: list[str], models: Mapping[str, str] | None = None, group_sizes: Mapping[str, int] | None = None
) -> list[list[str]]:
    """The hosts in batches of batch_sizes(spec), in inventory order.

    With `models` (host -> the model it serves) the spec applies to each model's hosts on
    their own, and batch n is every model's n-th batch together: models restart side by
    side, a percentage is of a model's hosts, and a batch never holds every host of a model
    that has more than one (`group_sizes`: each model's host count behind the gateways, when
    more hosts serve it than are restarted). A model with a single host still gets its
    batch; the drain refuses to take a model's last healthy host."""
    if models is None:
        return _batches(spec, hosts, None)
    groups: dict[str, list[str]] = {}
    for h in hosts:
        groups.setdefault(models[h], []).append(h)
    out: list[list[str]] = []
    for m, hs in groups.items():  # each model's n-th batch joins batch n: one pass over the hosts
        for n, batch in enumerate(_batches(spec, hs, (group_sizes or {}).get(m, len(hs)))):
            if n == len(out):
                out.append([])
            out[n] += batch
    return out


def _batches(spec: str, hosts: list[str], serving: int | None) -> list[list[str]]:
    """`serving`: how many hosts serve this model; a batch leaves at least one of them."""
    cap = serving - 1 if serving and serving > 1 else None
    batches, i = [], 0
    for size in batch_sizes(spec, len(hosts)):
        for part in range(0, size, cap or size):
            batches.append(hosts[i + part : i + min(size, part + (cap or size))])
        i += size
    return batches


def batch_sizes(spec: str, total: int) -> list[int]:
    """Ansible's serial: '1', '25%', or a list '1,25%,100%' whose last size repeats until every
    host is covered. A percentage is of all hosts, rounded down, at least 1."""
    if total <= 0:
        return []
    parts = [p.strip() for p in str(spec).split(",") if p.strip()]
    if not parts:
        raise VfleetError(f"--batch {spec!r}: give a count, a percentage or a list like 1,25%,100%")
    sizes: list[int] = []
    for p in parts:
        try:
            n = max(1, math.floor(total * float(p[:-1]) / 100)) if p.endswith("%") else int(p)
        except ValueError:
            raise VfleetError(f"--batch {spec!r}: {p!r} is not a count or a percentage") from None
        if n < 1:
            raise VfleetError(f"--batch {spec!r}: sizes must be at least 1")
        sizes.append(n)
    out: list[int] = []
    covered = 0  # a running total: summing `out` each round was quadratic (100,000 batches of 1)
    while covered < total:
        out.append(min(sizes[min(len(out), len(sizes) - 1)], total - covered))
        covered += out[-1]
    return out
