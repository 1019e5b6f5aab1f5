"""The hops of a weights chain: where each relay stages, how the controller starts it, how
the host before reaches it, and the header each relay is started with (_chain.py plans the
rounds, _chain_round.py runs one).

Why every relay is started by the controller, at once: a relay that starts the next one
(`ssh h1 'relay | ssh h2 relay ...'`) makes a chain of N hosts wait N ssh sessions one after
the other before the last host gets a byte (measured: 0.14 s to 0.5 s a hop, 9 s to 30 s at
64 hosts, longer than the copy). Here the controller opens one session per host, all in
parallel: each carries the relay's source and header in, control lines after, and its
reports out (a dead host is told by its own session ending, not guessed from its
neighbours). The pieces do not pass through the controller's sessions: the controller pipes
them into the head's FIFO, host i into host i+1's, over ssh (_sync.py's peer options).
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vfleet.engine.owned_paths import plain_operand
from vfleet.roles.model_source import verify_command
from vfleet.roles.weights import _relay as relay, _relay_store as relay_store, _relay_wire as relay_wire
from vfleet.roles.weights._copies import PEER_SSH, finish_command
from vfleet.roles.weights._pieces import PieceManifest

# what a host runs: the wire format, the store, the relay, as one source (their package
# imports are skipped there: they run as __main__)
RELAY_SOURCE = b"\n".join(Path(m.__file__).read_bytes() for m in (relay_wire, relay_store, relay))
SINK_WAIT_S = 30.0


@dataclass(frozen=True)
class Hop:
    """One destination: where its relay stages the files, how the controller starts that
    relay, how the host before it reaches it (`peer`: an argv prefix that runs a shell
    command there; empty: a local shell, for tests) and how the controller does
    (`controller_peer`, to feed it when it heads a chain)."""

    name: str
    dest: str
    from_controller: tuple[str, ...]
    peer: tuple[str, ...] = ()
    on_whole: str | None = None
    serve_from: str | None = None  # where its copy lives once whole (on_whole moves it); dest if None
    controller_peer: tuple[str, ...] = ()
    become: bool = False  # its relay runs under sudo: so must the sink that writes its FIFO

    @property
    def fifo(self) -> str:
        return self.dest + ".vfleet-in"

    def _sink_command(self) -> str:
        f = shlex.quote(self.fifo)
        cmd = (
            f"n=0; while [ ! -p {f} ]; do n=$((n+1)); if [ $n -gt {int(SINK_WAIT_S / 0.02)} ]; then "
            f"echo 'no relay reading {shlex.quote(self.name)}' >&2; exit 1; fi; sleep 0.02; done; exec cat > {f}"
        )
        return f"sudo -n sh -c {shlex.quote(cmd)}" if self.become else cmd

    def sink(self) -> tuple[str, ...]:
        """What the host before runs to pipe its stream into this hop's FIFO: it waits for
        the relay to make the FIFO (a plain `cat >` before would make a regular file), at
        most SINK_WAIT_S: a hop that never starts must not hold the one before forever."""
        return (*self.peer, self._sink_command()) if self.peer else ("sh", "-c", self._sink_command())

    def sink_from_controller(self) -> tuple[str, ...]:
        """The same, run by the controller, when this hop heads a chain it feeds."""
        cmd = self._sink_command()
        return (*self.controller_peer, cmd) if self.controller_peer else ("sh", "-c", cmd)


@dataclass
class HopResult:
    """status: whole | partial (resumable) | slow (routed around, resumable) | bad_piece |
    failed | unreached."""

    name: str
    status: str = "unreached"
    reason: str = ""
    written: int = 0
    skipped: int = 0
    missing: int | None = None
    elapsed_s: float | None = None
    rounds: int = 0


def remote_relay_command(python: str = "python3") -> str:
    """What a host runs: the bootstrap that reads the relay's source from the stream."""
    return f"{python} -c {shlex.quote(relay.BOOT)} {len(RELAY_SOURCE)}"


def local_hop(name: str, dest: str, python: str = sys.executable, on_whole: str | None = None) -> Hop:
    """A hop run as a local process: the tests' chains, without ssh."""
    return Hop(name, dest, (python, "-c", relay.BOOT, str(len(RELAY_SOURCE))), (), on_whole)


def ssh_hop(
    name: str,
    dest: str,
    *,
    address: str,
    user: str | None,
    port: int,
    controller_ssh: list[str],
    peer_ssh: list[str] = PEER_SSH,
    become: bool = False,
    on_whole: str | None = None,
    serve_from: str | None = None,
) -> Hop:
    """A hop reached over ssh, with the controller's connection options from the controller
    and the peer options (_sync.py's, with weights_peer_ssh_key) from the host before it. The
    user and address are proven not to start with '-' (ssh takes no `--` before its host)."""
    plain_operand(address, "ansible_host")
    target = f"{plain_operand(user, 'ansible_user')}@{address}" if user else address
    at = ["-p", str(int(port)), target]
    sudo = "sudo -n " if become else ""
    return Hop(
        name,
        dest,
        tuple(controller_ssh + at + [sudo + remote_relay_command()]),
        tuple(peer_ssh + at),
        on_whole,
        serve_from,
        tuple(controller_ssh + at),
        become,
    )


def peer_ssh(key: str | None) -> list[str]:
    return PEER_SSH + (["-i", key] if key else [])


def whole_command(staging: str, version: str, user: str | None) -> str:
    """What a hop runs once every piece is verified: _sync.py's verify (sha256sum -c and the
    shard index) and, only if it passes, its move into .versions. Subshells keep the move
    from running after a failed verify (finish_command starts with `set -e`); the relay's log,
    mark, FIFO and lock beside the staging folder go once the copy is in place."""
    marks = " ".join(
        shlex.quote(staging + m) for m in (".vfleet-pieces", ".vfleet-whole", ".vfleet-in", ".vfleet-lock")
    )
    return f"( {verify_command(staging)} ) && ( {finish_command(staging, version, user)} ) && rm -f -- {marks}"


def header(manifest: PieceManifest, hops: list[Hop], i: int, fed: bool = False) -> dict[str, Any]:
    """Hop i's header: the manifest, itself, its input, and the sink into the next hop.
    `fed`: hops[0] is a whole host that feeds the chain from its own copy."""
    h = hops[i]
    nxt = {"name": hops[i + 1].name, "argv": list(hops[i + 1].sink())} if i + 1 < len(hops) else None
    me = {
        "name": h.name,
        "dest": h.dest,
        "serve_from": h.serve_from or h.dest,
        **({"on_whole": h.on_whole} if h.on_whole else {}),
    }
    return {
        "id": manifest.id,
        "manifest": manifest.as_json(),
        "me": me,
        "next": nxt,
        "input": "self" if fed and i == 0 else "fifo",
    }
