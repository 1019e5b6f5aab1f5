"""Multi-host replicas (Ray or vLLM's own multi-node): member facts, checks, units, rollout."""
from __future__ import annotations

from ._ray_render import render_member
from ._rollout import ReplicaRollout, unit_keys
from . import _allreduce as allreduce
from . import _deploy as deploy
from . import _preflight as preflight

__all__ = ["allreduce", "deploy", "preflight", "render_member", "ReplicaRollout", "unit_keys"]
