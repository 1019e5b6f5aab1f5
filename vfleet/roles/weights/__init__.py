"""Model weights: a manifest of the controller's folder, copied to hosts in waves, checked,
switched atomically by a link."""

from __future__ import annotations

from . import _sync as sync
from ._sync import controller_folder, copy_name, pull_command
from ._totals import AdapterTotals, DraftTotals, WeightsBySource

__all__ = ["AdapterTotals", "controller_folder", "copy_name", "DraftTotals", "pull_command", "sync", "WeightsBySource"]
