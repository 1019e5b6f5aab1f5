"""What the weights step sent, as typed values: the report's "weights" section.

Kept apart from the copy itself (_sync.py) so that what a run reports is one small, plain
type: the controller's bytes, the fan-out's waves and the copies made, per model source
when a run deploys several."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["WeightsTotals", "WeightsBySource", "AdapterTotals", "DraftTotals"]


@dataclass
class WeightsTotals:
    """One weights run (one model source), counted as the copies go."""

    REPORT_KEY: ClassVar[str] = "weights"

    controller_bytes_sent: int = 0
    waves: int = 0
    copies: int = 0
    hub_commit: str | None = None  # an hf:// source: the commit its revision resolved to
    chain_rounds: int = 0  # weights_distribution chain: its rounds (_chain.py)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "controller_bytes_sent": self.controller_bytes_sent,
            "waves": self.waves,
            "copies": self.copies,
        }
        if self.hub_commit:
            out["hub_commit"] = self.hub_commit
        if self.chain_rounds:
            out["chain_rounds"] = self.chain_rounds
        return out


@dataclass(frozen=True)
class WeightsBySource:
    """A run over several model sources: each source's totals (None: no host was left to
    copy to)."""

    REPORT_KEY: ClassVar[str] = "weights"

    totals: dict[str, WeightsTotals | None]

    def to_dict(self) -> dict[str, Any]:
        return {"per_model_source": {src: t.to_dict() if t else {} for src, t in self.totals.items()}}


@dataclass(frozen=True)
class _TotalsByName:
    """Several weights runs of one kind of payload (_payload.py), each under its name; a class
    per kind, because a run keeps one note per type (Play.note)."""

    totals: dict[str, WeightsTotals | None]

    def to_dict(self) -> dict[str, Any]:
        return {name: t.to_dict() if t else {} for name, t in self.totals.items()}


class DraftTotals(_TotalsByName):
    """The speculative draft models' copies, per source."""

    REPORT_KEY: ClassVar[str] = "speculative_draft"


class AdapterTotals(_TotalsByName):
    """The LoRA adapters' copies, per adapter name."""

    REPORT_KEY: ClassVar[str] = "lora_adapters"
