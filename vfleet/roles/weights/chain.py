"""Controller side of the pipelined chain: pieces flow controller -> host 1 -> host 2 -> ...

Why a chain: with waves (sync.py) N hosts wait ceil(log2(N+1)) full copy times; in a chain
each host forwards a piece as soon as it has checked it, so every host's link carries the
model once in and once out, and all finish about one copy time (plus one piece time per
hop) after the controller starts.

Why every relay is started by the controller, at once: a relay that starts the next one
(`ssh h1 'relay | ssh h2 relay ...'`) makes a chain of N hosts wait N ssh sessions one after
the other before the last host gets a byte (measured: 0.14 s to 0.5 s a hop, 9 s to 30 s at
64 hosts, longer than the copy). Here the controller opens one session per host, all in
parallel: each carries the relay's source and header in, and its reports out (so a dead
host is told by its own session ending, not guessed from its neighbours). The pieces do
not pass through the controller: host i pipes them into host i+1's FIFO over ssh from host
to host (sync.py's peer options), so each link carries each byte once.

A round is one chain over the hosts still lacking the model. After it the controller
re-plans from the reports: whole hosts are done; a host whose session ended without its
report (killed, unreachable) is failed with one line and left out; hosts after it saw their
stream cut and go into the next chain, where each writes only the pieces its log lacks; a
host that received a piece failing its hash goes first in the next chain (fed by the
controller, no longer by the upstream that damaged it). Nothing is moved into place by a hop
that is not whole (relay.py).
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from vfleet.engine.owned_paths import plain_operand
from vfleet.roles.weights import relay
from vfleet.roles.weights.manifest import verify_command
from vfleet.roles.weights.pieces import PieceManifest, read_pieces
from vfleet.roles.weights.sync import PEER_SSH, finish_command

RELAY_SOURCE = Path(relay.__file__).read_bytes()
SINK_WAIT_S = 30.0
Event = dict[str, Any]


@dataclass(frozen=True)
class Hop:
    """One destination: where its relay stages the files, how the controller starts that
    relay, and how the host before it reaches it (`peer`: an argv prefix that runs a shell
    command there; empty: a local shell, for tests)."""

    name: str
    dest: str
    from_controller: tuple[str, ...]
    peer: tuple[str, ...] = ()
    on_whole: str | None = None
    serve_from: str | None = None  # where its copy lives once whole (on_whole moves it); dest if None

    @property
    def fifo(self) -> str:
        return self.dest + ".vfleet-in"

    def sink(self) -> tuple[str, ...]:
        """What the host before runs to pipe its stream into this hop's FIFO: it waits for
        the relay to make the FIFO (a plain `cat >` before would make a regular file), at
        most SINK_WAIT_S: a hop that never starts must not hold the one before forever."""
        f = shlex.quote(self.fifo)
        cmd = (f"n=0; while [ ! -p {f} ]; do n=$((n+1)); if [ $n -gt {int(SINK_WAIT_S / 0.02)} ]; then "
               f"echo 'no relay reading {self.name}' >&2; exit 1; fi; sleep 0.02; done; exec cat > {f}")
        return (*self.peer, cmd) if self.peer else ("sh", "-c", cmd)


@dataclass
class HopResult:
    """status: whole | partial (resumable) | bad_piece | failed | unreached."""

    name: str
    status: str = "unreached"
    reason: str = ""
    written: int = 0
    skipped: int = 0
    missing: int | None = None
    elapsed_s: float | None = None
    rounds: int = 0


@dataclass
class Outcome:
    """Every host's result; `chains`: the hosts of each round in order, a feeding host
    first as "from <name>" when a whole host (not the controller) fed that round."""

    results: dict[str, HopResult]
    rounds: int
    elapsed_s: float
    chains: list[list[str]] = field(default_factory=list)

    @property
    def failed(self) -> dict[str, str]:
        return {n: r.reason for n, r in self.results.items() if r.status != "whole"}


def remote_relay_command(python: str = "python3") -> str:
    """What a host runs: the bootstrap that reads the relay's source from the stream."""
    return f"{python} -c {shlex.quote(relay.BOOT)} {len(RELAY_SOURCE)}"


def local_hop(name: str, dest: str, python: str = sys.executable, on_whole: str | None = None) -> Hop:
    """A hop run as a local process: the tests' chains, without ssh."""
    return Hop(name, dest, (python, "-c", relay.BOOT, str(len(RELAY_SOURCE))), (), on_whole)


def ssh_hop(name: str, dest: str, *, address: str, user: str | None, port: int, controller_ssh: list[str],
            peer_ssh: list[str] = PEER_SSH, become: bool = False, on_whole: str | None = None) -> Hop:
    """A hop reached over ssh, with the controller's connection options from the controller
    and the peer options (sync.py's, with weights_peer_ssh_key) from the host before it. The
    user and address are proven not to start with '-' (ssh takes no `--` before its host)."""
    plain_operand(address, "ansible_host")
    target = f"{plain_operand(user, 'ansible_user')}@{address}" if user else address
    at = ["-p", str(int(port)), target]
    return Hop(name, dest, tuple(controller_ssh + at + [("sudo -n " if become else "") + remote_relay_command()]),
               tuple(peer_ssh + at), on_whole)


def peer_ssh(key: str | None) -> list[str]:
    return PEER_SSH + (["-i", key] if key else [])


def whole_command(staging: str, version: str, user: str | None) -> str:
    """What a hop runs once every piece is verified: sync.py's verify (sha256sum -c and the
    shard index) and, only if it passes, its move into .versions. Subshells keep the move
    from running after a failed verify (finish_command starts with `set -e`)."""
    return f"( {verify_command(staging)} ) && ( {finish_command(staging, version, user)} )"


def header(manifest: PieceManifest, hops: list[Hop], i: int, fed: bool = False) -> dict[str, Any]:
    """Hop i's header: the manifest, itself, its input, and the sink into the next hop.
    `fed`: hops[0] is a whole host that feeds the chain from its own copy."""
    h = hops[i]
    nxt = {"name": hops[i + 1].name, "argv": list(hops[i + 1].sink())} if i + 1 < len(hops) else None
    me = {"name": h.name, "dest": h.dest, "serve_from": h.serve_from or h.dest,
          **({"on_whole": h.on_whole} if h.on_whole else {})}
    return {"id": manifest.id, "manifest": manifest.as_json(), "me": me, "next": nxt,
            "input": "fifo" if i else "self" if fed else "stdin"}


class _Session:
    """The controller's session with one hop: relay source and header in, reports out."""

    def __init__(self, hop: Hop, head: bytes, on_event: Callable[[Event], None]) -> None:
        self.hop, self.on_event, self.tail = hop, on_event, ""
        self.proc = subprocess.Popen(list(hop.from_controller), stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.send(RELAY_SOURCE + head)  # a session already gone shows when it ends without a report

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").strip()
            if line.startswith(relay.PREFIX):
                try:
                    self.on_event(dict(json.loads(line[len(relay.PREFIX):]), host=self.hop.name))
                    continue
                except ValueError:
                    pass
            if line:
                self.tail = line  # ssh's or python's last word: the reason when no report comes
        self.on_event({"event": "ended", "host": self.hop.name})  # wakes run_chain's wait for links

    def send(self, data: bytes) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def close(self) -> None:
        """End the control stream (for the head, the pieces too)."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def finish(self) -> int:
        rc = self.proc.wait()
        self.reader.join(timeout=10)
        return rc


def run_chain(model_dir: Path | str, manifest: PieceManifest, hops: list[Hop], *, feeder: Hop | None = None,
              bwlimit: float | None = None, on_event: Callable[[Event], None] | None = None) -> dict[str, HopResult]:
    """One chain over `hops` in order: start every relay, feed every piece into the first
    (from the controller, or from `feeder`, a whole host), collect the reports. `bwlimit`
    (bytes/s) paces the controller's feed, as weights_bwlimit paces rsync."""
    results = {h.name: HopResult(h.name) for h in hops}
    line = ([feeder] if feeder else []) + hops
    linked: set[str] = set()
    lock = threading.Condition()

    def collect(event: Event) -> None:
        with lock:
            lock.notify_all()  # a link up, or a session ended: the wait below looks again
            if event["host"] not in results:  # the feeder: its fate shows in the hops it feeds
                if on_event:
                    on_event(event)
                return
            r, kind = results[event["host"]], event.get("event")
            if kind == "linked":
                linked.add(r.name)
            elif kind == "done":
                r.written, r.skipped, r.missing = event["written"], event["skipped"], event["missing"]
                r.elapsed_s = event["elapsed_s"]
                if event["whole"]:
                    r.status, r.reason = "whole", ""
                elif r.status != "bad_piece":
                    r.status = "partial"
                    r.reason = str(event.get("reason") or f"stream {event['ended']}, {event['missing']} pieces missing")
            elif kind == "bad_piece":
                r.status, r.reason = "bad_piece", event["reason"]
            elif kind == "error":
                r.status, r.reason = "failed", event["reason"]
        if on_event:
            on_event(event)

    sessions = [_Session(h, relay.encode_header(header(manifest, line, i, fed=feeder is not None)), collect)
                for i, h in enumerate(line)]
    # Feed only once every link is up: pieces sent earlier pile up before the first link
    # still connecting, and a chain of equal links never drains that backlog (measured:
    # 0.2 s more per hop). A session that ends meanwhile stops the wait: the round goes on
    # and the re-plan deals with it.
    with lock:
        lock.wait_for(lambda: linked >= {h.name for h in line[1:]} or any(s.proc.poll() is not None for s in sessions),
                      timeout=SINK_WAIT_S)
    t0, sent = time.monotonic(), 0
    for fi, pi, data in [] if feeder else read_pieces(model_dir, manifest):
        if not sessions[0].send(relay.FRAME.pack(fi, pi, len(data)) + data):
            break
        sent += len(data)
        if bwlimit and (ahead := sent / bwlimit - (time.monotonic() - t0)) > 0:
            time.sleep(ahead)
    else:
        sessions[0].send(relay.FRAME.pack(relay.END, 0, 0))  # for a feeder, its go
    sessions[0].close()
    # in chain order: once a hop has ended, the next one's control stream is closed, which
    # wakes it should its upstream have died before ever connecting (relay.open_input)
    for s, nxt in zip(sessions, sessions[1:] + [None]):
        rc = s.finish()
        if nxt is not None:
            nxt.close()
        r = results.get(s.hop.name, HopResult(s.hop.name, "whole"))
        if r.status == "unreached":
            r.status, r.reason = "failed", f"lost mid-chain: session ended (exit {rc}) without a report" + (
                f": {s.tail}" if s.tail else "")
    return results


def plan(line: list[Hop], results: dict[str, HopResult]) -> tuple[Hop | None, list[Hop]]:
    """The next chain, from the last one (`line`, its feeder first if it had one): the hosts
    not yet whole and not failed, fed by the last whole host before the first of them (it
    holds every piece, and the controller's link stays free); after a bad piece, by the
    controller, with the hosts that received one first (no link of the last chain is
    trusted to feed them again)."""
    todo = [h for h in line if results[h.name].status not in ("whole", "failed")]
    if any(results[h.name].status == "bad_piece" for h in todo):
        return None, [h for h in todo if results[h.name].status == "bad_piece"] + \
            [h for h in todo if results[h.name].status != "bad_piece"]
    before = line[:line.index(todo[0])] if todo else []
    whole = [h for h in before if results[h.name].status == "whole"]
    return (whole[-1] if whole else None), todo


def distribute(model_dir: Path | str, manifest: PieceManifest, hops: list[Hop], *, attempts: int = 3,
               bwlimit: float | None = None, on_event: Callable[[Event], None] | None = None) -> Outcome:
    """Chains until every host is whole or failed, at most `attempts` rounds; a host still
    lacking pieces after them is failed with the last reason it gave."""
    t0 = time.monotonic()
    results = {h.name: HopResult(h.name) for h in hops}
    chains: list[list[str]] = []
    feeder: Hop | None = None
    todo = list(hops)
    for _ in range(attempts):
        if not todo:
            break
        chains.append(([f"from {feeder.name}"] if feeder else []) + [h.name for h in todo])
        for name, r in run_chain(model_dir, manifest, todo, feeder=feeder, bwlimit=bwlimit,
                                 on_event=on_event).items():
            r.rounds = results[name].rounds + 1
            r.written += results[name].written  # pieces written over all rounds
            results[name] = r
        feeder, todo = plan(([feeder] if feeder else []) + todo, results)
    for h in todo:
        r = results[h.name]
        r.reason = f"not whole after {attempts} rounds: {r.reason or r.status}"
        r.status = "failed"
    return Outcome(results, len(chains), time.monotonic() - t0, chains)
