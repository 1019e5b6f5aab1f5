"""The relay every host of a weights chain runs: receive pieces, check, keep, pass on.

Self-contained (stdlib only, Python 3.8+): hosts run it with `python3 -c BOOT <len>`, the
relay's own source arriving first on stdin (BOOT below), so nothing is installed on a host
beforehand and every host runs exactly the controller's version. chain.py starts every
hop's relay at once over its own ssh session (its control stream: source, then header), so
a chain of N hosts starts in the time of one ssh session, not N.

After the header, the head hop reads the pieces on that same stdin; every other hop reads
them from a FIFO, `<dest>.vfleet-in`, into which the hop before it pipes its stream (`sink`:
ssh from host to host running `cat > FIFO`), so each piece crosses each link once.
    header:  b"VFR1" | u32 length | JSON | sha256 of the JSON (32 bytes)
    frames:  u32 file index | u32 piece index | u64 length | the piece's bytes
    end:     file index 0xFFFFFFFF (a stream without it was cut: upstream is gone)
The header holds the piece manifest (pieces.py), this hop (name, dest, on_whole), where its
input comes from (the control stream, the FIFO, or, for a whole host heading a re-planned
chain, its own copy: serve()), and the next hop's sink argv (none for the tail).

For each piece: sha256 against the manifest; a good one is forwarded to the next hop at once
(before it is written: the chain's speed is the network's, not the disk's), then written at
its offset unless the pieces log already lists it (a resumed transfer writes only what it
lacks), then appended to the log. A bad piece is reported and ends forwarding from there
(the hosts after see a cut stream); this host keeps checking what still comes. Only when
every piece is verified is `<dest>.vfleet-whole` made and the hop's on_whole command run
(sync.py's verify and move into .versions): nothing not whole is ever moved into place.

Reports are JSON lines prefixed "VFR " on stderr, which is the hop's own session with the
controller: a hop that dies says nothing more, and its session's end tells the controller.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
import struct
import subprocess
import sys
import threading
import time
from typing import IO, Any, Dict, Iterator, List, Optional, Set, Tuple

MAGIC = b"VFR1"
FRAME = struct.Struct(">IIQ")
END = 0xFFFFFFFF
PREFIX = "VFR "
BOOT = "import sys;exec(compile(sys.stdin.buffer.read(int(sys.argv[1])),'vfleet-relay','exec'))"
LOCK_WAIT_S = 10.0
_me = {"host": "?"}  # this hop's name, from the header: every line this relay writes names it


def emit(event: Dict[str, Any]) -> None:
    """One report line. A gone controller is no reason to stop keeping pieces, so a broken
    stderr is ignored."""
    line = PREFIX + json.dumps({"host": _me["host"], **event}, separators=(",", ":")) + "\n"
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (BrokenPipeError, OSError):
        pass


def read_exact(f: IO[bytes], n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def encode_header(header: Dict[str, Any]) -> bytes:
    """The header as it travels: length-prefixed JSON and its sha256, so a damaged one is
    refused before anything is staged."""
    body = json.dumps(header, separators=(",", ":")).encode()
    return MAGIC + struct.pack(">I", len(body)) + body + hashlib.sha256(body).digest()


def read_header(f: IO[bytes]) -> Dict[str, Any]:
    """The header, proven intact (a cut or damaged one raises ValueError)."""
    head = read_exact(f, 8)
    if len(head) < 8 or head[:4] != MAGIC:
        raise ValueError("stream does not start with a vfleet relay header")
    (n,) = struct.unpack(">I", head[4:])
    body, digest = read_exact(f, n), read_exact(f, 32)
    if len(body) < n or hashlib.sha256(body).digest() != digest:
        raise ValueError("relay header is cut or damaged")
    return json.loads(body)


class Downstream:
    """The pipe to the next hop's FIFO (its `sink` argv: ssh to that host, `cat` into it)."""

    def __init__(self, hop: Dict[str, Any]) -> None:
        self.name = hop["name"]
        self.proc = subprocess.Popen(hop["argv"], stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL)
        self.tail: List[str] = []
        self.reader = threading.Thread(target=self._keep_tail, daemon=True)
        self.reader.start()
        self.lost: Optional[str] = None

    def _keep_tail(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").strip()
            if line:
                self.tail = (self.tail + [line])[-3:]  # ssh's own words: the reason if it dies

    def send(self, data: bytes) -> bool:
        if self.lost is not None:
            return False
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError) as exc:
            self.lost = f"writing to it failed ({exc.__class__.__name__})"
            return False

    def close(self) -> None:
        """End its stream (EOF: without an end frame the next hop reads it as cut), wait for
        the sink, and report the link lost, with one line, when it did not end cleanly."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        rc = self.proc.wait()
        self.reader.join(timeout=10)
        if rc != 0 or self.lost is not None:
            why = self.lost or "the link ended"
            said = f": {self.tail[-1]}" if self.tail else ""
            emit({"event": "next_lost", "next": self.name, "rc": rc, "reason": f"{why}, exit {rc}{said}"})


def open_input(path: str, control: IO[bytes]) -> IO[bytes]:
    """The FIFO the previous hop writes into, opened for reading. The open blocks until a
    writer comes; should the controller end this hop's control stream first (the hop before
    died before connecting), a brief open-and-close by a watcher wakes it, and the empty
    read that follows reads as a cut stream."""
    try:
        if not stat.S_ISFIFO(os.lstat(path).st_mode):
            os.unlink(path)  # something else there: a FIFO it must be
    except FileNotFoundError:
        pass
    if not os.path.lexists(path):
        os.mkfifo(path, 0o600)  # an existing one is reused: a sink may already wait on it
    opened = threading.Event()

    def watch() -> None:
        # os.read, not the buffered reader: a thread parked in that one holds its lock and
        # would keep this relay from exiting until the controller closed the stream
        while os.read(control.fileno(), 65536):
            pass
        if not opened.is_set():
            os.close(os.open(path, os.O_RDWR))  # a writer comes and goes: the reader's open returns

    threading.Thread(target=watch, daemon=True).start()
    f = open(path, "rb")
    opened.set()
    emit({"event": "linked"})  # the hop before reaches this one: the controller may start
    return f


class Store:
    """The staging files of one destination and the log of the pieces verified there."""

    def __init__(self, dest: str, manifest: Dict[str, Any]) -> None:
        self.dest = dest
        self.piece_size = int(manifest["piece_size"])
        self.files = manifest["files"]
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

    def write(self, fi: int, pi: int, data: bytes) -> None:
        """The piece at its offset, then its log line: a relay killed in between leaves a
        piece that is written again, never one logged but not written."""
        fd = self._fd(fi)
        os.pwrite(fd, data, pi * self.piece_size)
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


def check_piece(manifest: Dict[str, Any], fi: int, pi: int, data: bytes) -> Optional[str]:
    """None when the piece is the one the manifest names, else why not (one line)."""
    files = manifest["files"]
    if fi >= len(files) or pi >= len(files[fi]["sha256"]):
        return f"piece {fi}/{pi} is not in the manifest"
    size, ps = files[fi]["size"], int(manifest["piece_size"])
    want_len = min(ps, size - pi * ps) if size else 0
    if len(data) != want_len:
        return f"piece {pi} of {files[fi]['path']}: {len(data)} bytes, expected {want_len}"
    got = hashlib.sha256(data).hexdigest()
    if got != files[fi]["sha256"][pi]:
        return f"piece {pi} of {files[fi]['path']}: sha256 {got[:12]}, manifest {files[fi]['sha256'][pi][:12]}"
    return None


def own_pieces(folder: str, manifest: Dict[str, Any]) -> Iterator[Tuple[int, int, bytes]]:
    """Every piece of a whole copy, read back from disk in order."""
    ps = int(manifest["piece_size"])
    for fi, f in enumerate(manifest["files"]):
        with open(os.path.join(folder, f["path"]), "rb") as fh:
            for pi in range(len(f["sha256"])):
                yield fi, pi, fh.read(ps)


def serve(header: Dict[str, Any], stdin: IO[bytes]) -> int:
    """Head a re-planned chain from this host's whole copy (the controller's link stays
    idle). Each piece is checked again as it is read: a copy damaged on disk since it was
    verified is reported and cut, never passed on. Starts on the controller's go (an end
    frame on the control stream, sent once every link is up)."""
    me, manifest, t0 = header["me"], header["manifest"], time.monotonic()
    down = Downstream(header["next"])
    read_exact(stdin, FRAME.size)
    sent, bad = 0, None
    try:
        for fi, pi, data in own_pieces(me["serve_from"], manifest):
            bad = check_piece(manifest, fi, pi, data)
            if bad or not down.send(FRAME.pack(fi, pi, len(data)) + data):
                break
            sent += 1
        else:
            down.send(FRAME.pack(END, 0, 0))
    except OSError as exc:
        bad = f"cannot read the copy in {me['serve_from']}: {exc}"
    if bad:
        emit({"event": "bad_piece", "reason": bad})
    down.close()
    emit({"event": "done", "ended": "served", "missing": 0, "written": 0, "skipped": 0, "served": sent,
          "elapsed_s": round(time.monotonic() - t0, 3), "whole": bad is None})
    return 0 if bad is None else 1


def relay(stdin: IO[bytes]) -> int:
    """Run one hop; 0 when this host ends with every piece verified."""
    try:
        header = read_header(stdin)
    except ValueError as exc:
        emit({"event": "error", "reason": str(exc)})
        return 2
    me, manifest = header["me"], header["manifest"]
    _me["host"] = me["name"]
    if header["input"] == "self":
        return serve(header, stdin)
    t0 = time.monotonic()
    try:
        store = Store(me["dest"], manifest)
    except (OSError, RuntimeError) as exc:
        emit({"event": "error", "reason": f"cannot stage into {me['dest']}: {exc}"})
        return 2
    down: Optional[Downstream] = None
    if header.get("next"):  # before waiting for our own input: every link connects at once
        try:
            down = Downstream(header["next"])
        except OSError as exc:  # this host cannot reach the next one: the chain is cut here
            emit({"event": "next_lost", "next": header["next"]["name"], "rc": None,
                  "reason": f"cannot start the link: {exc}"})
    try:
        data_in = stdin if header["input"] == "stdin" else open_input(me["dest"] + ".vfleet-in", stdin)
    except OSError as exc:
        emit({"event": "error", "reason": f"cannot make the input FIFO beside {me['dest']}: {exc}"})
        return 2
    counts = {"written": 0, "skipped": 0}
    bad: Optional[str] = None
    ended = "cut"
    while True:
        frame = read_exact(data_in, FRAME.size)
        if len(frame) < FRAME.size:
            break
        fi, pi, n = FRAME.unpack(frame)
        if fi == END:
            ended = "complete"
            break
        data = read_exact(data_in, n)
        if len(data) < n:
            break
        why = check_piece(manifest, fi, pi, data)
        if why:
            if bad is None:
                bad = why
                emit({"event": "bad_piece", "file": fi, "piece": pi, "reason": why})
                if down is not None:
                    down.close()  # the hosts after see a cut stream from here
                    down = None
            continue
        if down is not None:
            down.send(frame + data)
        if store.has(fi, pi):
            counts["skipped"] += 1
        else:
            store.write(fi, pi, data)
            counts["written"] += 1
    if down is not None:
        if ended == "complete":
            down.send(FRAME.pack(END, 0, 0))
        down.close()
    missing = store.missing()
    store.close()
    result: Dict[str, Any] = {"event": "done", "ended": ended, "missing": missing, **counts,
                              "elapsed_s": round(time.monotonic() - t0, 3), "whole": missing == 0}
    if missing == 0:
        open(store.whole_path, "w").close()
        if me.get("on_whole"):
            r = subprocess.run(["sh", "-c", me["on_whole"]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            result["on_whole_rc"] = r.returncode
            if r.returncode:
                result["whole"] = False
                said = r.stderr.decode(errors="replace").strip().splitlines()
                result["reason"] = f"whole, but its finishing command failed (exit {r.returncode})" + (
                    f": {said[-1]}" if said else "")
    emit(result)
    return 0 if result["whole"] else 1


def main() -> int:
    return relay(sys.stdin.buffer)


if __name__ == "__main__":
    sys.exit(main())
