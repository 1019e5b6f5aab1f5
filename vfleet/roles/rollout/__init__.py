"""Rolling restarts and upgrades: batches, drain and undrain, rollback points, per-host lines."""

from __future__ import annotations

from . import _rollback_point as rollback_point
from ._batches import batch_sizes, plan_batches
from ._gate import EvalGate, gate_lines, open_gate
from ._records import Converged, RestartTimes, RestoredUntried, RolloutInfo, RolloutSummary
from ._rolling import Rollout

__all__ = [
    "batch_sizes",
    "Converged",
    "EvalGate",
    "gate_lines",
    "open_gate",
    "plan_batches",
    "RestartTimes",
    "RestoredUntried",
    "rollback_point",
    "Rollout",
    "RolloutInfo",
    "RolloutSummary",
]
