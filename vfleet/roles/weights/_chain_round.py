"""One round of a weights chain: start every relay, feed the pieces some hop lacks, watch
for a slow hop and route around it, collect every hop's result (_chain.py plans rounds).

Why the controller waits for every hop's `have` before feeding: a resumed chain (a re-plan
after a lost host, a deploy run again after an interrupted one) sends only the pieces some
hop of it still lacks, not the whole model again; each hop writes only what its log lacks.

Why routing around is done here, during the round: every hop of a chain runs at the rate of
its slowest (_chain_watch.py), so one slow host holds up the whole fleet until it is taken
out. The hop before it is told to drop its link (`cut`), the slow hop and the hops after it
to report and exit (`stop`): the hops before it finish at full speed, those after it resume
in the next round fed by a whole host, and the slow one gets a chain of its own.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from vfleet.roles.weights import _relay_wire as wire
from vfleet.roles.weights._chain_hops import RELAY_SOURCE, SINK_WAIT_S, Hop, HopResult, header
from vfleet.roles.weights._chain_watch import Watch
from vfleet.roles.weights._pieces import PieceManifest, read_pieces
from vfleet.roles.weights._relay import PROGRESS_S

STOP_GRACE_S = 5.0
PACE_SLICE = 64 << 10
Event = dict[str, Any]


@dataclass(frozen=True)
class SlowRule:
    """When a hop counts as slow (_chain_watch.py): below `share` of the reference rate for
    `window_s` while the hop before waits on it."""

    window_s: float = 10.0
    share: float = 0.5


class _Session:
    """The controller's session with one hop: relay source and header in, control lines
    after, reports out."""

    def __init__(self, hop: Hop, head: bytes, on_event: Callable[[Event], None]) -> None:
        self.hop, self.on_event, self.tail = hop, on_event, ""
        self.proc = subprocess.Popen(
            list(hop.from_controller), stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.send(RELAY_SOURCE + head)  # a session already gone shows when it ends without a report

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").strip()
            if line.startswith(wire.PREFIX):
                try:
                    self.on_event(dict(json.loads(line[len(wire.PREFIX) :]), host=self.hop.name))
                    continue
                except ValueError:
                    pass
            if line:
                self.tail = line  # ssh's or python's last word: the reason when no report comes
        self.on_event({"event": "ended", "host": self.hop.name})  # wakes run_chain's waits

    def send(self, data: bytes) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def close(self) -> None:
        """End the control stream."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def finish(self, stopped_at: Callable[[], float | None]) -> int:
        """Its exit status. A hop told to stop (`stopped_at`: when) that has not ended
        STOP_GRACE_S later cannot (a stopped process, a hung host): its session is ended."""
        while True:
            try:
                rc = self.proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                at = stopped_at()
                if at is not None and time.monotonic() - at > STOP_GRACE_S:
                    self.proc.kill()
        self.reader.join(timeout=10)
        return rc


class _Feed:
    """The controller's stream into the head's FIFO: paced, its blocked time measured."""

    def __init__(self, head: Hop) -> None:
        self.proc = subprocess.Popen(
            list(head.sink_from_controller()),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        self.blocked_s, self.since, self.cut = 0.0, None, threading.Event()

    def blocked(self) -> float:
        since = self.since
        return self.blocked_s + (time.monotonic() - since if since is not None else 0.0)

    def send(self, data: bytes | memoryview) -> bool:
        if self.cut.is_set():
            return False
        t0 = self.since = time.monotonic()
        try:
            assert self.proc.stdin is not None
            view = memoryview(data)
            while view:
                view = view[self.proc.stdin.write(view) or 0 :]
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False
        finally:
            self.since = None
            self.blocked_s += time.monotonic() - t0

    def stop(self) -> None:
        """Routed around the head: end the stream now (a blocked send returns)."""
        self.cut.set()
        self.proc.kill()

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        self.proc.wait()


def _feed_pieces(feed: _Feed, pieces: Iterator[tuple[int, int, bytes]], bwlimit: float | None) -> bool:
    """Every piece into the feed, paced to `bwlimit` bytes/s in PACE_SLICE slices (a 4 MiB
    piece sent at once would go at the link's full rate, then leave it idle; measured on 64
    hosts, 10 ms slices of 6 KiB cost more CPU per byte than they saved a hop); False when
    the feed was lost or cut."""
    t0, sent, step = time.monotonic(), 0, PACE_SLICE
    for fi, pi, data in pieces:
        if not feed.send(wire.FRAME.pack(fi, pi, len(data))):
            return False
        view = memoryview(data)
        for off in range(0, max(1, len(view)), step):
            if not feed.send(view[off : off + step]):
                return False
            sent += len(view[off : off + step])
            if bwlimit and (ahead := sent / bwlimit - (time.monotonic() - t0)) > 0:
                time.sleep(ahead)
    return True


def _bytes_of(manifest: PieceManifest, want: bytes) -> int:
    """The bytes of the pieces a bitmap names."""
    total, k, ps = 0, 0, manifest.piece_size
    for f in manifest.files:
        for pi in range(len(f.sha256)):
            if wire.in_bitmap(want, k):
                total += min(ps, f.size - pi * ps)
            k += 1
    return total


def needed(manifest: PieceManifest, have: dict[str, bytes], hops: list[Hop]) -> bytes:
    """The bitmap of pieces some hop lacks (a hop that never said what it holds lacks all)."""
    count = manifest.piece_count
    full, need = (1 << count) - 1, 0
    for h in hops:
        need |= full & ~int.from_bytes(have.get(h.name, b""), "little")
    return need.to_bytes((count + 7) // 8, "little")


def run_chain(
    model_dir: Path | str,
    manifest: PieceManifest,
    hops: list[Hop],
    *,
    feeder: Hop | None = None,
    bwlimit: float | None = None,
    on_event: Callable[[Event], None] | None = None,
    slow: SlowRule | None = SlowRule(),
) -> dict[str, HopResult]:
    """One chain over `hops` in order: start every relay, feed the pieces some hop lacks
    into the first (from the controller, or from `feeder`, a whole host), route around a
    slow hop (`slow`; None: never), collect the reports. `bwlimit` (bytes/s) paces the
    controller's feed, as weights_bwlimit paces rsync."""
    results = {h.name: HopResult(h.name) for h in hops}
    line = ([feeder] if feeder else []) + hops
    linked: set[str] = set()
    have: dict[str, bytes] = {}
    routed: list[str] = []
    routed_at: dict[str, float] = {}
    lock = threading.Condition()
    watch = (
        Watch([h.name for h in hops], feeder.name if feeder else "controller", slow.window_s, slow.share, bwlimit)
        if slow and len(hops) > 1
        else None
    )

    def collect(event: Event) -> None:
        with lock:
            lock.notify_all()  # a link up, or a session ended: the waits below look again
            kind, name = event.get("event"), event["host"]
            if kind == "progress" and watch:
                watch.report(name, time.monotonic(), int(event["in"]), float(event["wait_out"]))
            r = results.get(name)
            if r is None:  # the feeder: its fate shows in the hops it feeds
                pass
            elif kind == "have":
                have[name] = bytes.fromhex(event["bits"])
            elif kind == "linked":
                linked.add(name)
            elif kind == "done":
                r.written, r.skipped, r.missing = event["written"], event["skipped"], event["missing"]
                r.elapsed_s = event["elapsed_s"]
                if event["whole"]:
                    r.status, r.reason = "whole", ""
                elif r.status not in ("bad_piece", "slow"):
                    r.status = "partial"
                    r.reason = str(
                        event.get("reason")
                        or (
                            f"stopped: the chain was cut before {routed[0]}"
                            if event["ended"] == "stopped" and routed
                            else f"stream {event['ended']}, {event['missing']} pieces missing"
                        )
                    )
            elif kind == "bad_piece":
                r.status, r.reason = "bad_piece", event["reason"]
            elif kind == "error":
                r.status, r.reason = "failed", event["reason"]
        if on_event:
            on_event(event)

    sessions = [
        _Session(h, wire.encode_header(header(manifest, line, i, fed=feeder is not None)), collect)
        for i, h in enumerate(line)
    ]
    feed = None if feeder else _Feed(hops[0])
    # Feed only once every link is up and every hop said what it holds: pieces sent earlier
    # pile up before the first link still connecting, and a chain of equal links never
    # drains that backlog. A session that ends meanwhile stops the wait: the round goes on
    # and the re-plan deals with it.
    with lock:
        lock.wait_for(
            lambda: linked >= set(results) or any(s.proc.poll() is not None for s in sessions), timeout=SINK_WAIT_S
        )
        want = needed(manifest, have, hops)

    def route(name: str, why: str) -> None:
        """Take the slow hop out: the one before drops its link, it and those after stop."""
        k = [h.name for h in line].index(name)
        routed.append(name)
        for h in line[k:]:
            routed_at[h.name] = time.monotonic()
        results[name].status, results[name].reason = "slow", why
        if k == 0 and feed:
            feed.stop()
        elif k > 0:
            sessions[k - 1].send(b"cut\n")
        for s in sessions[k:]:
            s.send(b"stop\n")
        if on_event:
            on_event({"event": "routed", "host": name, "reason": why})

    done = threading.Event()

    def monitor() -> None:
        while watch and not done.wait(PROGRESS_S):
            with lock:
                if feed:
                    watch.report("controller", time.monotonic(), 0, feed.blocked())
                verdict = watch.judge(time.monotonic(), set(routed))
            if verdict:
                route(verdict.hop, verdict.line)

    if watch:
        watch.started = time.monotonic()
        threading.Thread(target=monitor, daemon=True).start()
    if on_event:
        on_event(
            {
                "event": "feeding",
                "host": feeder.name if feeder else "controller",
                "pieces": bin(int.from_bytes(want, "little")).count("1"),
                "bytes": _bytes_of(manifest, want),
            }
        )
    if feed:
        if _feed_pieces(feed, read_pieces(model_dir, manifest, want), bwlimit):
            feed.send(wire.FRAME.pack(wire.END, 0, 0))
        feed.close()
    else:
        sessions[0].send(wire.go_frame(want))
    # in chain order: once a hop has ended (the controller's feed, for the head), the next
    # one's control stream is closed, which wakes it should its upstream have died before
    # ever connecting (relay.open_input)
    if feed:
        sessions[0].close()
    for s, nxt in zip(sessions, sessions[1:] + [None]):
        rc = s.finish(lambda: routed_at.get(s.hop.name))
        if nxt is not None:
            nxt.close()
        r = results.get(s.hop.name, HopResult(s.hop.name, "whole"))
        if r.status == "unreached":
            r.status, r.reason = (
                "failed",
                f"lost mid-chain: session ended (exit {rc}) without a report" + (f": {s.tail}" if s.tail else ""),
            )
    done.set()
    return results
