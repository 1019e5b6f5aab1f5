"""Multi-host replicas (Ray or vLLM's own multi-node): member facts, checks, units, rollout."""

from __future__ import annotations

from . import _allreduce as allreduce, _deploy as deploy, _preflight as preflight
from ._ray_render import render_member
from ._rollout import ReplicaRollout, unit_keys

__all__ = ["allreduce", "deploy", "preflight", "render_member", "ReplicaRollout", "unit_keys"]
