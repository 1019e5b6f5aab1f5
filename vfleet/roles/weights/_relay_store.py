"""Where a weights relay keeps its pieces: the staging files of one destination and the log
of the pieces verified there (_relay.py receives them; _relay_wire.py is the wire format).

Self-contained (stdlib only, Python 3.8+, no `from __future__`): chain.RELAY_SOURCE ships it
to every host between _relay_wire.py and _relay.py.
"""

import fcntl
import os
import time
from typing import Any, Dict, List, Optional, Set, Tuple

if __name__ != "__main__":  # in the package; on a host the bundle defined these above
    from vfleet.roles.weights._relay_wire import bitmap, piece_index

LOCK_WAIT_S = 10.0


def piece_length(manifest: Dict[str, Any], fi: int, pi: int) -> Optional[int]:
    """How long piece pi of file fi is, or None when the manifest has no such piece."""
    files = manifest["files"]
    if fi >= len(files) or pi >= len(files[fi]["sha256"]):
        return None
    size, ps = files[fi]["size"], int(manifest["piece_size"])
    return min(ps, size - pi * ps) if size else 0


def check_digest(manifest: Dict[str, Any], fi: int, pi: int, got: str) -> Optional[str]:
    """None when `got` is the piece's sha256 in the manifest, else why not (one line)."""
    f = manifest["files"][fi]
    if got != f["sha256"][pi]:
        return f"piece {pi} of {f['path']}: sha256 {got[:12]}, manifest {f['sha256'][pi][:12]}"
    return None


class Store:
    """The staging files of one destination and the log of the pieces verified there."""

    def __init__(self, dest: str, manifest: Dict[str, Any]) -> None:
        self.dest = dest
        self.piece_size = int(manifest["piece_size"])
        self.files: List[Dict[str, Any]] = manifest["files"]
        self.first = piece_index(self.files)
        self.log_path = dest + ".vfleet-pieces"
        self.whole_path = dest + ".vfleet-whole"
        os.makedirs(dest, exist_ok=True)
        self._lock = open(dest + ".vfleet-lock", "w")
        self._take_lock()
        if os.path.exists(self.whole_path):
            os.unlink(self.whole_path)  # whole again only once this run has proven it
        self.verified = self._read_log()
        self.fds: Dict[int, int] = {}
        self.log = open(self.log_path, "a")

    def _take_lock(self) -> None:
        """One relay per destination: two controllers (or a relay whose controller died,
        still draining its input) must not write the same staging files."""
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.dest} is held by another relay for {LOCK_WAIT_S:.0f} s")
                time.sleep(0.05)

    def _read_log(self) -> Set[Tuple[str, int, str]]:
        """(path, piece index, sha256) already verified and written; a torn last line (a
        relay killed while appending) is ignored, so that piece is simply written again."""
        seen: Set[Tuple[str, int, str]] = set()
        if not os.path.exists(self.log_path):
            return seen
        with open(self.log_path) as f:
            for line in f:
                parts = line.rstrip("\n").split(" ", 2)
                if len(parts) == 3 and line.endswith("\n") and parts[0].isdigit() and len(parts[1]) == 64:
                    seen.add((parts[2], int(parts[0]), parts[1]))
        return seen

    def has(self, fi: int, pi: int) -> bool:
        f = self.files[fi]
        return (f["path"], pi, f["sha256"][pi]) in self.verified

    def held(self) -> bytes:
        """The bitmap of pieces verified here (what the controller plans a resumed chain by)."""
        count = self.first[-1] + len(self.files[-1]["sha256"]) if self.files else 0
        return bitmap(
            count,
            (
                self.first[fi] + pi
                for fi, f in enumerate(self.files)
                for pi in range(len(f["sha256"]))
                if self.has(fi, pi)
            ),
        )

    def _fd(self, fi: int) -> int:
        if fi not in self.fds:
            f = self.files[fi]
            path = os.path.join(self.dest, f["path"])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(fd).st_size != f["size"]:
                os.ftruncate(fd, f["size"])
            self.fds[fi] = fd
        return self.fds[fi]

    def write(self, fi: int, pi: int, data: Any) -> None:
        """The piece at its offset, then its log line: a relay killed in between leaves a
        piece that is written again, never one logged but not written."""
        fd = self._fd(fi)
        off, view = pi * self.piece_size, memoryview(data)
        while view:
            view = view[os.pwrite(fd, view, off) :]
            off = pi * self.piece_size + len(data) - len(view)
        f = self.files[fi]
        self.log.write(f"{pi} {f['sha256'][pi]} {f['path']}\n")
        self.log.flush()
        self.verified.add((f["path"], pi, f["sha256"][pi]))

    def missing(self) -> int:
        return sum(1 for fi, f in enumerate(self.files) for pi in range(len(f["sha256"])) if not self.has(fi, pi))

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.log.close()
