"""Finding the lines that hold any of a few words, in a log of up to a million lines, fast.

Why: calling a pattern per line per signal costs a Python call each, seconds on a big log.
Here the whole log is lowered once and each word is found with str.find (C speed), keeping
each word's next position, so the text is walked once per word whatever the number of hits.
Only the lines found are then matched against the signals' patterns."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import Iterator, Sequence

__all__ = ["LowerText"]


class LowerText:
    """The lines joined and lowered once, with where each line starts."""

    def __init__(self, lines: Sequence[str]):
        # lowered line by line, offsets from the lowered lines: some characters grow when
        # lowered ("İ" becomes two code points), so offsets of the original lines would drift
        lowered = [line.lower() for line in lines]
        self.text = "\n".join(lowered)
        self.starts = [0, *accumulate(len(line) + 1 for line in lowered)][: len(lines)]

    def lines_with(self, words: Sequence[str]) -> Iterator[int]:
        """The indexes of the lines that hold any of `words` (lower case), in order, once each."""
        nxt = {w: self.text.find(w) for w in words}
        pos = 0
        while True:
            found = [p for p in nxt.values() if p >= 0]
            if not found:
                return
            index = bisect_right(self.starts, min(found)) - 1
            yield index
            pos = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.text) + 1
            for w, p in nxt.items():
                if 0 <= p < pos:
                    nxt[w] = self.text.find(w, pos)
