"""The access log lines of one gateway within a time window, as a fact (a command plus a
parser, pyinfra's shape), read in one round trip.

The command lists the current file and its rotated copies (Debian's logrotate for nginx:
`.1` plain, `.2.gz` ... compressed, delaycompress), keeps only those whose mtime reaches into
the window (a file last written before `since` holds nothing after it), reads them oldest
first (zcat for .gz), keeps the lines whose `msec` lies in the window (awk, on the host: only
the window crosses the network; a line without `msec` is passed on, for the parser to count
as skipped), and stops after MAX_BYTES + 1 bytes (head -c): a log of a busy month cannot
flood the controller, and one byte more than the bound says that the bound was hit.

Exit status 3: the log folder or a file cannot be read (the SSH user lacks the rights: nginx
writes it 0640 www-data:adm); 4: there is no access log (no gateway deployed there, or not
yet one request)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from vfleet.config.access_log import ACCESS_LOG
from vfleet.config.quoting import shell_quote as q
from vfleet.engine.fact_protocol import Output

__all__ = ["MAX_BYTES", "NO_LOG", "NOT_READABLE", "LogLines", "AccessLogLines"]

MAX_BYTES = 32 * 2**20  # ~100 000 requests at ~300 bytes a line
READ_TIMEOUT_S = 120  # zcat of a few large rotated files
NO_LOG = "no such file: no gateway deployed there, or not one request since"
NOT_READABLE = "permission denied (nginx writes it 0640 www-data:adm: connect as root, become, or join group adm)"


@dataclass(frozen=True)
class LogLines:
    """What a gateway's log held within the window: complete lines, whether the byte bound cut
    the read short, and why nothing could be read (None when it could)."""

    lines: tuple[str, ...] = ()
    truncated: bool = False
    error: str | None = None


@dataclass(frozen=True)
class AccessLogLines:
    """The lines of `path` (and its rotated copies) with since <= msec <= until (epoch seconds)."""

    since: float
    until: float
    path: str = ACCESS_LOG
    max_bytes: int = MAX_BYTES
    timeout_s: int | None = READ_TIMEOUT_S

    def command(self) -> str:
        folder, base = posixpath.split(self.path)
        files = f"{q(base)} {q(base)}.[0-9]*"
        return (
            f"cd {q(folder)} 2>/dev/null || {{ echo {q(f'cannot enter {folder}')} >&2; exit 3; }}\n"
            f"[ -e {q(base)} ] || {{ echo {q(NO_LOG)} >&2; exit 4; }}\n"
            f"for f in {files}; do\n"
            f'  [ ! -f "$f" ] || [ -r "$f" ] || {{ echo "cannot read $PWD/$f: {NOT_READABLE}" >&2; exit 3; }}\n'
            "done\n"
            f'for f in {files}; do [ -f "$f" ] && echo "$(stat -c %Y -- "$f") $f"; done'
            f" | awk -v s={int(self.since)} -v n={len(base) + 2} '$1 >= s {{ print substr($2, n) + 0, $2 }}'"
            " | sort -k1,1nr | cut -d' ' -f2-"
            ' | while read -r f; do case "$f" in *.gz) zcat -- "$f" ;; *) cat -- "$f" ;; esac; done'
            f" | awk -v s={self.since:.3f} -v u={self.until:.3f} "
            '\'{ i = index($0, "\\"msec\\":"); if (!i) { print; next } '
            "m = substr($0, i + 7) + 0; if (m >= s && m <= u) print }'"
            f" | head -c {self.max_bytes + 1}"
        )

    def process_output(self, out: Output | None) -> LogLines:
        if out is None:
            return LogLines(error="no answer")
        if out.rc != 0:
            said = out.stderr.strip().splitlines()
            return LogLines(error=said[-1] if said else f"reading the log failed (exit {out.rc})")
        data = out.stdout
        truncated = len(data.encode()) > self.max_bytes
        lines = data.split("\n")
        if truncated:
            lines.pop()  # the line the bound cut in two
        return LogLines(tuple(line for line in lines if line), truncated)
