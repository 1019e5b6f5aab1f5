"""Errors a user can act on. The CLI prints each as one line (no traceback) and exits 2;
anything else escaping is a bug in vfleet."""

from __future__ import annotations


class VfleetError(Exception):
    """A mistake in input or environment, worded for the operator: what, where, and the fix."""


class InventoryError(VfleetError):
    """An inventory that does not load or validate. Holds every problem found, one line each,
    so the operator fixes them all in one pass; nothing connects to a host while it stands."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))
