"""Reading a saved log for `vfleet triage --log FILE`, bounded.

Why bounded: the file comes from anywhere (a paste, a support bundle, a journal export) and may
be huge; a start failure is at its end. Only the last MAX_BYTES are read and classified. The
line numbers stay the file's when the part before is at most MAX_COUNT_BYTES: its newlines are
counted in bounded binary chunks, not kept. Past that, counting would take time in the file's
size, so the lines are numbered from the first one read and the note says so. A file that is not a
regular file, cannot be read, or holds NUL bytes (binary: a core dump, a compressed journal) is
refused with one line naming it and what to do."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from vfleet.engine.errors import VfleetError

__all__ = ["MAX_BYTES", "MAX_COUNT_BYTES", "LogText", "read_log"]

MAX_BYTES = 8 * 1024 * 1024
MAX_COUNT_BYTES = 256 * 1024 * 1024  # newlines counted before the tail: well under a second
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class LogText:
    lines: list[str]
    first_line: int  # the file's number of lines[0] (1 when the part before was not counted)
    note: str  # what was left unread, if anything


def _lines_before(f, offset: int, max_count: int) -> tuple[int | None, bool]:
    """How many newlines the file has before `offset` (None when that is over `max_count`
    bytes: not counted), and whether `offset` starts a line."""
    if offset > max_count:
        f.seek(offset - 1)
        return None, f.read(1) == b"\n"
    count, left, last = 0, offset, b"\n"
    while left > 0:
        chunk = f.read(min(_CHUNK, left))
        if not chunk:
            break
        count += chunk.count(b"\n")
        left -= len(chunk)
        last = chunk[-1:]
    return count, last == b"\n"


def read_log(path: str | Path, max_bytes: int = MAX_BYTES, max_count: int = MAX_COUNT_BYTES) -> LogText:
    """The last `max_bytes` of the file as lines (undecodable bytes replaced)."""
    p = Path(path)
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):  # checked before open(): a FIFO would block it
            raise VfleetError(f"{p}: not a regular file; save the log to a file and pass that")
        with open(p, "rb") as f:
            st = os.fstat(f.fileno())
            start = max(0, st.st_size - max_bytes)
            skipped, at_line_start = _lines_before(f, start, max_count)
            f.seek(start)
            data = f.read(max_bytes)
    except FileNotFoundError:
        raise VfleetError(f"{p}: no such file; pass the path of a saved journal or vLLM log") from None
    except OSError as exc:
        raise VfleetError(f"{p}: cannot be read ({exc.strerror or exc}); check its permissions") from None
    if b"\0" in data:
        raise VfleetError(
            f"{p}: binary (holds NUL bytes), not a text log; export it as text first "
            "(journalctl -u UNIT --no-pager -o cat > FILE)"
        )
    # split on newlines only (str.splitlines also splits on form feeds...: the numbers would drift)
    lines = [ln.rstrip("\r") for ln in data.decode("utf-8", "replace").split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    first, note = (skipped or 0) + 1, ""
    if start:
        if not at_line_start and lines:  # the first line read is the end of a cut one
            lines, first = lines[1:], first + (skipped is not None)
        note = f"read the last {max_bytes // _CHUNK} MiB of {st.st_size / _CHUNK:.0f} MiB"
        if skipped is None:
            note += "; lines numbered from the first line read (the part before was not counted)"
    return LogText(lines, first, note)
