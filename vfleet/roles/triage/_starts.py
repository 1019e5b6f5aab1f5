"""Where the last start of vLLM begins in a journal or log.

Why: a journal tail (or a pasted journal) of a unit that restarted holds several starts, each
with its own failure; the first fatal signal of the OLDEST start would decide (an out-of-memory
of an earlier start beating "address already in use" in the latest one). So the last start is
classified; only when it holds no known signal (a unit starting again after a crash, its new
start still loading: tests/unit/data/triage/port-in-use-1.log) does the start before it decide
(_classify.py). A start begins at systemd's "Started UNIT" line (printed bare under
`journalctl -o cat`, after "systemd[1]: " in a journal with prefixes) or at vLLM's banner
"vLLM API server version X", logged first by its API server
(https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/api_server.py).
Both belong to one start, so the banner marks starts only in a log with no systemd line (a
vLLM log, not a journal)."""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate
from typing import Sequence

__all__ = ["last_starts"]

_SYSTEMD = ("Started ", re.compile(r"^Started \S|systemd\[1\]: Started \S"))
_BANNER = ("vLLM API server version", re.compile(r"vLLM API server version \d"))


def _spans(
    lines: Sequence[str], text: str, offsets: list[int], count: int, marker: tuple[str, re.Pattern[str]]
) -> list[tuple[int, int]]:
    """Walks back from the end with str.rfind (C speed, whatever the number of lines);
    only the lines holding the marker's word are matched against its pattern."""
    word, pattern = marker
    spans: list[tuple[int, int]] = []
    end, pos = len(lines), len(text)
    while len(spans) < count:
        pos = text.rfind(word, 0, pos)
        if pos < 0:
            break
        i = bisect_right(offsets, pos) - 1
        if i > 0 and pattern.search(lines[i]):
            spans.append((i, end))
            end = i
        pos = offsets[i]
    if end > 0 and len(spans) < count:
        spans.append((0, end))
    return spans


def last_starts(lines: Sequence[str], count: int = 2) -> list[tuple[int, int]]:
    """(begin, end) of the last `count` starts, the last first; the lines before the first
    start line read count as a start (its beginning was cut). No start line: all the lines."""
    text = "\n".join(lines)
    offsets = [0, *accumulate(len(line) + 1 for line in lines)][: len(lines)]
    spans = _spans(lines, text, offsets, count, _SYSTEMD)
    return spans if len(spans) > 1 or not lines else _spans(lines, text, offsets, count, _BANNER)
