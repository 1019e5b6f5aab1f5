"""vLLM install: a pinned vLLM in a versioned venv per host, switched by the `current` link."""
from __future__ import annotations

from ._venv import MARKER
from . import _venv as venv

__all__ = ["MARKER", "venv"]
