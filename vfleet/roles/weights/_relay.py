"""The relay every host of a weights chain runs: receive pieces, check, keep, pass on.

Self-contained (stdlib only, Python 3.8+): hosts run it with `python3 -c BOOT <len>`, the
relay's own source arriving first on stdin (chain.RELAY_SOURCE: _relay_wire.py,
_relay_store.py and this file, in that order), so nothing is installed on a host beforehand
and every host runs exactly the controller's version. _chain.py starts every hop's relay at
once over its own ssh session (its control stream: source, header, then control lines).

Every hop reads its pieces from a FIFO, `<dest>.vfleet-in`, into which the hop before it
(the controller, for the head) pipes its stream (`sink`: ssh running `cat > FIFO`), so each
piece crosses each link once and every hop's control stream stays free for `cut` and
`stop` (_relay_wire.py). A whole host heading a re-planned chain feeds it from its own copy
(serve()), the pieces the controller's go names.

Cut-through: a piece's bytes pass on to the next hop as they arrive, all but the last read,
which waits for the piece's sha256 (hashed as it comes, once): a hop holds a piece for the
time of one read, not of a whole piece, so a chain of N hosts adds N reads, not N pieces, to
one copy's time; and a damaged piece is never passed on whole (the next hop sees a stream cut
inside it). A good piece is written at its offset unless the pieces log already lists it,
then logged. A bad piece is reported and ends forwarding from there; this host keeps checking
what still comes. Only when every piece is verified is `<dest>.vfleet-whole` made and the
hop's on_whole command run (_sync.py's verify and move into .versions).

Reports (stderr, the hop's own session): `have` (a bitmap of the pieces its log holds, once
at start: the controller sends only pieces some hop lacks), `linked`, `progress` each
PROGRESS_S (bytes in, seconds blocked sending on: how the controller tells a slow hop),
`bad_piece`, `next_lost`, `done`.
"""

import hashlib
import os
import stat
import subprocess
import sys
import threading
import time
from typing import IO, Any, Dict, Iterator, List, Optional, Tuple

if __name__ != "__main__":  # in the package; on a host the bundle defined these above
    from vfleet.roles.weights._relay_store import Store, check_digest, piece_length
    from vfleet.roles.weights._relay_wire import END, FRAME, _me, emit, in_bitmap, piece_index, read_exact, read_header

BOOT = "import sys;exec(compile(sys.stdin.buffer.read(int(sys.argv[1])),'vfleet-relay','exec'))"
PROGRESS_S = 1.0


class Downstream:
    """The pipe to the next hop's FIFO (its `sink` argv: ssh to that host, `cat` into it)."""

    def __init__(self, hop: Dict[str, Any]) -> None:
        self.name = hop["name"]
        self.proc = subprocess.Popen(
            hop["argv"], stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, bufsize=0
        )
        self.fd = self.proc.stdin.fileno() if self.proc.stdin else -1
        self.tail: List[str] = []
        self.reader = threading.Thread(target=self._keep_tail, daemon=True)
        self.reader.start()
        self.lost: Optional[str] = None
        self.blocked_s = 0.0  # time spent waiting for the next hop to take bytes
        self.since: Optional[float] = None  # when the send now blocked began

    def blocked(self) -> float:
        """Seconds spent sending so far, a send still blocked included (a stopped next hop)."""
        since = self.since
        return self.blocked_s + (time.monotonic() - since if since is not None else 0.0)

    def _keep_tail(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").strip()
            if line:
                self.tail = (self.tail + [line])[-3:]  # ssh's own words: the reason if it dies

    def send(self, data: Any) -> bool:
        """All of `data` (bytes or a memoryview: no copy) into the link."""
        if self.lost is not None:
            return False
        view = memoryview(data)
        t0 = self.since = time.monotonic()
        try:
            while view:
                view = view[os.write(self.fd, view) :]
            return True
        except (BrokenPipeError, OSError) as exc:
            if self.lost is None:
                self.lost = f"writing to it failed ({exc.__class__.__name__})"
            return False
        finally:
            self.since = None
            self.blocked_s += time.monotonic() - t0

    def cut(self) -> None:
        """The controller routes around the next hop: end the link now (a blocked send returns)."""
        self.lost = "cut by the controller (routed around)"
        if self.proc.poll() is None:
            self.proc.kill()

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


class Hop:
    """This hop's running state, shared with the control and progress threads."""

    def __init__(self, down: Optional[Downstream]) -> None:
        self.down = down
        self.counts = {"written": 0, "skipped": 0}
        self.bytes_in = 0
        self.t0 = time.monotonic()
        self.running = True

    def send(self, data: Any) -> None:
        if self.down is not None:
            self.down.send(data)

    def drop_down(self) -> None:
        if self.down is not None:
            self.down.close()  # the hosts after see a cut stream from here
            self.down = None

    def command(self, line: str) -> None:
        """A control line from the controller (_relay_wire.py)."""
        if line == "cut" and self.down is not None:
            self.down.cut()
        elif line == "stop":
            emit(
                {
                    "event": "done",
                    "ended": "stopped",
                    "missing": None,
                    **self.counts,
                    "elapsed_s": round(time.monotonic() - self.t0, 3),
                    "whole": False,
                }
            )
            os._exit(1)  # pieces logged so far stay verified; a torn log line is ignored on resume

    def watch(self, control: IO[bytes], on_eof: Any = None) -> None:
        """Read control lines until the controller ends the stream."""

        def run() -> None:
            buf = b""
            while True:
                try:
                    chunk = control.read1(4096)  # type: ignore[attr-defined]
                except (OSError, ValueError):
                    chunk = b""
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self.command(line.decode(errors="replace").strip())
            if on_eof is not None:
                on_eof()

        threading.Thread(target=run, daemon=True).start()

    def report_progress(self) -> None:
        def run() -> None:
            while self.running:
                time.sleep(PROGRESS_S)
                if self.running:
                    emit(
                        {
                            "event": "progress",
                            "in": self.bytes_in,
                            "wait_out": round(self.down.blocked(), 3) if self.down else 0.0,
                        }
                    )

        threading.Thread(target=run, daemon=True).start()


def open_input(path: str, control: IO[bytes], hop: Hop) -> IO[bytes]:
    """The FIFO the previous hop writes into, opened for reading. The open blocks until a
    writer comes; should the controller end this hop's control stream first (the hop before
    died before connecting), a brief open-and-close wakes it, and the empty read that follows
    reads as a cut stream."""
    try:
        if not stat.S_ISFIFO(os.lstat(path).st_mode):
            os.unlink(path)  # something else there: a FIFO it must be
    except FileNotFoundError:
        pass
    if not os.path.lexists(path):
        os.mkfifo(path, 0o600)  # an existing one is reused: a sink may already wait on it
    opened = threading.Event()

    def wake() -> None:
        if not opened.is_set():
            os.close(os.open(path, os.O_RDWR))  # a writer comes and goes: the reader's open returns

    hop.watch(control, wake)
    f = open(path, "rb")
    opened.set()
    emit({"event": "linked"})  # the hop before reaches this one: the controller may start
    return f


def receive(hop: Hop, data_in: IO[bytes], manifest: Dict[str, Any], store: Store) -> Tuple[str, Optional[str]]:
    """Pieces until the end frame ("complete") or a cut stream ("cut"); the first bad piece's
    reason, if any."""
    buf = memoryview(bytearray(max(1, int(manifest["piece_size"]))))
    bad: Optional[str] = None
    while True:
        frame = read_exact(data_in, FRAME.size)
        if len(frame) < FRAME.size:
            return "cut", bad
        fi, pi, n = FRAME.unpack(frame)
        if fi == END:
            return "complete", bad
        want = piece_length(manifest, fi, pi)
        if want is None or n != want:  # a stream past a frame it does not know cannot be followed
            why = f"frame {fi}/{pi} of {n} bytes does not match the manifest ({want} expected)"
            emit({"event": "bad_piece", "file": fi, "piece": pi, "reason": why})
            hop.drop_down()
            return "cut", bad or why
        h, got, passed = hashlib.sha256(), 0, 0
        while got < n:
            k = data_in.readinto1(buf[got:n])  # type: ignore[attr-defined]
            if not k:
                return "cut", bad
            h.update(buf[got : got + k])
            got += k
            hop.bytes_in += k
            if got < n and bad is None:  # cut-through: all but the piece's last read pass on now
                if not passed:
                    hop.send(frame)
                hop.send(buf[passed:got])
                passed = got
        why = check_digest(manifest, fi, pi, h.hexdigest())
        if why:
            if bad is None:
                bad = why
                emit({"event": "bad_piece", "file": fi, "piece": pi, "reason": why})
                hop.drop_down()  # the next hop sees a stream cut inside this piece
            continue
        if not passed:
            hop.send(frame)
        hop.send(buf[passed:n])
        if store.has(fi, pi):
            hop.counts["skipped"] += 1
        else:
            store.write(fi, pi, buf[:n])
            hop.counts["written"] += 1


def own_pieces(folder: str, manifest: Dict[str, Any], want: bytes) -> Iterator[Tuple[int, int, bytes]]:
    """The pieces of a whole copy that `want` names, read back from disk in order."""
    ps, first = int(manifest["piece_size"]), piece_index(manifest["files"])
    for fi, f in enumerate(manifest["files"]):
        if not any(in_bitmap(want, first[fi] + pi) for pi in range(len(f["sha256"]))):
            continue
        with open(os.path.join(folder, f["path"]), "rb") as fh:
            for pi in range(len(f["sha256"])):
                if in_bitmap(want, first[fi] + pi):
                    fh.seek(pi * ps)
                    yield fi, pi, fh.read(ps)


def serve(header: Dict[str, Any], stdin: IO[bytes]) -> int:
    """Head a re-planned chain from this host's whole copy (the controller's link stays
    idle). Each piece is checked again as it is read: a copy damaged on disk since it was
    verified is reported and cut, never passed on. Starts on the controller's go, which
    names the pieces to send (those some hop of the chain lacks)."""
    me, manifest, t0 = header["me"], header["manifest"], time.monotonic()
    hop = Hop(Downstream(header["next"]))
    go = read_exact(stdin, FRAME.size)
    want = read_exact(stdin, FRAME.unpack(go)[2]) if len(go) == FRAME.size else b""
    sent, bad = 0, None if len(go) == FRAME.size else "the controller ended the stream before its go"
    hop.watch(stdin)
    hop.report_progress()
    try:
        for fi, pi, data in [] if bad else own_pieces(me["serve_from"], manifest, want):
            bad = (
                check_digest(manifest, fi, pi, hashlib.sha256(data).hexdigest())
                if len(data) == piece_length(manifest, fi, pi)
                else f"piece {pi} of {manifest['files'][fi]['path']} is short on disk"
            )
            if bad or not hop.down or not hop.down.send(FRAME.pack(fi, pi, len(data))) or not hop.down.send(data):
                break
            sent += 1
        else:
            hop.send(FRAME.pack(END, 0, 0))
    except OSError as exc:
        bad = f"cannot read the copy in {me['serve_from']}: {exc}"
    if bad:
        emit({"event": "bad_piece", "reason": bad})
    hop.drop_down()
    emit(
        {
            "event": "done",
            "ended": "served",
            "missing": 0,
            "written": 0,
            "skipped": 0,
            "served": sent,
            "elapsed_s": round(time.monotonic() - t0, 3),
            "whole": bad is None,
        }
    )
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
    try:
        store = Store(me["dest"], manifest)
    except (OSError, RuntimeError) as exc:
        emit({"event": "error", "reason": f"cannot stage into {me['dest']}: {exc}"})
        return 2
    emit({"event": "have", "bits": store.held().hex()})
    down: Optional[Downstream] = None
    if header.get("next"):  # before waiting for our own input: every link connects at once
        try:
            down = Downstream(header["next"])
        except OSError as exc:  # this host cannot reach the next one: the chain is cut here
            emit(
                {
                    "event": "next_lost",
                    "next": header["next"]["name"],
                    "rc": None,
                    "reason": f"cannot start the link: {exc}",
                }
            )
    hop = Hop(down)
    try:
        data_in = stdin if header["input"] == "stdin" else open_input(me["dest"] + ".vfleet-in", stdin, hop)
    except OSError as exc:
        emit({"event": "error", "reason": f"cannot make the input FIFO beside {me['dest']}: {exc}"})
        return 2
    hop.report_progress()
    ended, bad = receive(hop, data_in, manifest, store)
    hop.running = False
    if hop.down is not None:
        if ended == "complete":
            hop.send(FRAME.pack(END, 0, 0))
        hop.drop_down()
    missing = store.missing()
    store.close()
    result: Dict[str, Any] = {
        "event": "done",
        "ended": ended,
        "missing": missing,
        **hop.counts,
        "elapsed_s": round(time.monotonic() - hop.t0, 3),
        "whole": missing == 0,
    }
    if missing == 0:
        open(store.whole_path, "w").close()
        if me.get("on_whole"):
            r = subprocess.run(["sh", "-c", me["on_whole"]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            result["on_whole_rc"] = r.returncode
            if r.returncode:
                result["whole"] = False
                said = r.stderr.decode(errors="replace").strip().splitlines()
                result["reason"] = f"whole, but its finishing command failed (exit {r.returncode})" + (
                    f": {said[-1]}" if said else ""
                )
    emit(result)
    return 0 if result["whole"] else 1


def main() -> None:
    """os._exit, not a return: the control thread may be parked in stdin's buffered reader,
    which would hold interpreter shutdown until the controller closed the stream."""
    rc = relay(sys.stdin.buffer)
    os._exit(rc)


if __name__ == "__main__":
    main()
