"""`vfleet usage`: the gateways' JSON access logs read over SSH for a time window and summarised
per tenant and model. window (the --since/--until flags), logread (the fact that reads one
gateway's log and its rotated copies, bounded), summary (lines to rows), collect (every
gateway in one play)."""

from __future__ import annotations

from ._collect import read_logs
from ._summary import summarise
from ._table import notes, usage_table
from ._window import window

__all__ = ["notes", "read_logs", "summarise", "usage_table", "window"]
