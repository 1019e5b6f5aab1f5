"""What every benchmark script does at the end: print its JSON and, with --out, keep it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(result: dict[str, Any], out: Path | None) -> int:
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        out.write_text(text + "\n")
    return 0
