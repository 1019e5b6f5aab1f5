"""vLLM install: a pinned vLLM in a versioned venv per host, switched by the `current` link."""

from __future__ import annotations

from . import _venv as venv
from ._venv import MARKER

__all__ = ["MARKER", "venv"]
