"""Where vfleet keeps what it derives on the controller and can always derive again:
$XDG_CACHE_HOME/vfleet/<name> (default ~/.cache/vfleet/<name>), as the XDG base directory
spec says for non-essential data. Deleting it costs time, never correctness.
"""

from __future__ import annotations

import os
from pathlib import Path


def controller_cache(name: str) -> Path:
    """The folder of one kind of cached data (not created here: the writer creates it)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vfleet" / name
