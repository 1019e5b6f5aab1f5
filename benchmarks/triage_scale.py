"""How long the triage classifier takes on big or hostile logs (the figure the unit tests no
longer time: a wall-clock bound there fails on a loaded box without saying anything about the
code): a million lines with the out-of-memory line at the end, a million lines in 1000 starts,
and 200 lines crafted to make a regex backtrack.

    python benchmarks/triage_scale.py [--lines 1000000] [--out benchmarks/results/triage_scale.json]

Prints the result as JSON (seconds per case); nothing here is a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import emit  # noqa: E402
from vfleet.roles.triage._classify import classify_lines  # noqa: E402

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.20 GiB is free."
FILLER = "INFO 08-20 03:09:59 [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s"
STARTED = "Started vllm.service - vLLM OpenAI-compatible server."


def timed(lines: list[str]) -> dict[str, object]:
    t0 = time.perf_counter()
    verdict = classify_lines(lines)
    return {"lines": len(lines), "class": verdict.cls.id, "seconds": round(time.perf_counter() - t0, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000, help="lines of the big logs (default a million)")
    ap.add_argument("--out", type=Path, help="also write the JSON result here")
    args = ap.parse_args()
    per_start = max(1, args.lines // 1000)
    cases = {
        "one_start": [FILLER] * args.lines + [OOM],
        "1000_starts": ([STARTED] + [FILLER] * (per_start - 1)) * 1000 + [OOM],
        "crafted": ["chat template" + " " * 5000 + "appears path-like"] * 200 + [OOM],
    }
    results = {name: timed(lines) for name, lines in cases.items()}
    return emit({"benchmark": "triage_scale", "cases": results, "python": sys.version.split()[0]}, args.out)


if __name__ == "__main__":
    sys.exit(main())
