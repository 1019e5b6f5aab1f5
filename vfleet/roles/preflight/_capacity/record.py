"""What preflight planned for one host, as a typed record noted on its result.

Why a record: the plan is read again by later steps of the same run (the gateway's max_conns is
the planner's max concurrency), which used to fish it back out of the report's `data` dict by
string key. Steps now hand each other this record (`result.get(CapacityRecord)`); the report's
`capacity` and `layout` entries are written from it, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vfleet.engine.results import HostResult
from vfleet.roles.preflight._capacity import Plan
from vfleet.roles.preflight._capacity.parallel import ParallelPlan

__all__ = ["CapacityRecord"]

CPU_SOURCE = "cpu_kvcache_space_gib"


@dataclass(frozen=True)
class CapacityRecord:
    """A GPU host's plan (None: no plan, the model's config.json or the GPUs unknown) and its
    smallest TP x PP layout when one was looked for, or a CPU build's KV capacity in tokens."""

    plan: Plan | None = None
    layout: ParallelPlan | None = None
    cpu_kv_capacity_tokens: int | None = None

    @property
    def max_concurrency(self) -> float | None:
        """Full-length requests the KV cache holds at once (the gateway's max_conns)."""
        return self.plan.max_concurrency if self.plan else None

    def capacity(self) -> dict[str, Any] | None:
        """The report's `capacity` entry."""
        if self.cpu_kv_capacity_tokens is not None:
            return {"kv_capacity_tokens": self.cpu_kv_capacity_tokens, "source": CPU_SOURCE}
        return self.plan.to_dict() if self.plan else None

    def note_on(self, result: HostResult) -> None:
        """Hand the record to later steps and write its report entries."""
        result.note(self)
        result.data["capacity"] = self.capacity()
        if self.layout is not None:
            result.data["layout"] = self.layout.to_dict()
