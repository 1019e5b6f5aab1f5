"""Controller side of the pipelined chain: pieces flow controller -> host 1 -> host 2 -> ...

Why a chain: with waves (_sync.py) N hosts wait ceil(log2(N+1)) full copy times; in a chain
each host passes a piece's bytes on as they arrive (_relay.py), so every host's link carries
the model once in and once out, and all finish about one copy time after the controller
starts. _chain_hops.py says how hops are started, _chain_round.py runs one round.

A round is one chain (or two: see slow hosts) over the hosts still lacking the model. After
it the controller re-plans from the reports: whole hosts are done; a host whose session ended
without its report (killed, unreachable) is failed with one line and left out; hosts after
it saw their stream cut and go into the next chain, fed by the last whole host before them,
which sends only the pieces some of them lack; a host that received a piece failing its hash
goes first in the next chain (fed by the controller, no longer by the upstream that damaged
it); a host routed around as slow gets a chain of its own, beside the others', so it holds up
no one. Nothing is moved into place by a hop that is not whole (_relay.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from vfleet.roles.weights._chain_hops import (  # noqa: F401  (the chain's one import for callers)
    RELAY_SOURCE,
    Hop,
    HopResult,
    header,
    local_hop,
    peer_ssh,
    remote_relay_command,
    ssh_hop,
    whole_command,
)
from vfleet.roles.weights._chain_round import Event, SlowRule, run_chain  # noqa: F401
from vfleet.roles.weights._pieces import PieceManifest


@dataclass
class Outcome:
    """Every host's result; `chains`: the hosts of each chain in order, a feeding host first
    as "from <name>" when a whole host (not the controller) fed it; `notes`: one line per
    host routed around."""

    results: dict[str, HopResult]
    rounds: int
    elapsed_s: float
    chains: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> dict[str, str]:
        return {n: r.reason for n, r in self.results.items() if r.status != "whole"}


Chain = tuple["Hop | None", list[Hop]]


def plan(line: list[Hop], results: dict[str, HopResult]) -> list[Chain]:
    """The next round's chains, from the last round's hosts in order (`line`, feeders
    included): the hosts not yet whole and not failed, fed by the last whole host before the
    first of them (it holds every piece, and the controller's link stays free); after a bad
    piece, by the controller, with the hosts that received one first (no link of the last
    chain is trusted to feed them again). Hosts routed around as slow get their own chain,
    fed by another whole host where there is one."""

    def status(h: Hop) -> str:
        return results[h.name].status if h.name in results else "whole"  # a host that held it before

    todo = [h for h in line if status(h) not in ("whole", "failed")]
    slow = [h for h in todo if status(h) == "slow"]
    main = [h for h in todo if h not in slow]
    whole = [h for h in line if status(h) == "whole"]
    chains: list[Chain] = []
    if any(status(h) == "bad_piece" for h in main):
        chains.append(
            (None, [h for h in main if status(h) == "bad_piece"] + [h for h in main if status(h) != "bad_piece"])
        )
    elif main:
        before = [h for h in line[: line.index(main[0])] if status(h) == "whole"]
        chains.append((before[-1] if before else None, main))
    if slow:
        used = chains[0][0] if chains else None
        spare = [h for h in whole if h is not used] or whole
        chains.append((spare[-1] if spare else None, slow))
    return chains


def distribute(
    model_dir: Path | str,
    manifest: PieceManifest,
    hops: list[Hop],
    *,
    attempts: int = 3,
    bwlimit: float | None = None,
    on_event: Callable[[Event], None] | None = None,
    slow: SlowRule | None = SlowRule(),
    feeder: Hop | None = None,
) -> Outcome:
    """Rounds until every host is whole or failed, at most `attempts`; a host still lacking
    pieces after them is failed with the last reason it gave. A round's chains run at once.
    `feeder`: a host that already holds the copy feeds the first round, not the controller."""
    t0 = time.monotonic()
    results = {h.name: HopResult(h.name) for h in hops}
    out = Outcome(results, 0, 0.0)
    chains: list[Chain] = [(feeder, list(hops))]
    for _ in range(attempts):
        if not chains:
            break
        out.rounds += 1
        got: dict[str, HopResult] = {}

        def one(feeder: Hop | None, todo: list[Hop]) -> None:
            got.update(
                run_chain(model_dir, manifest, todo, feeder=feeder, bwlimit=bwlimit, on_event=on_event, slow=slow)
            )

        threads = []
        for fed, todo in chains:
            out.chains.append(([f"from {fed.name}"] if fed else []) + [h.name for h in todo])
            threads.append(threading.Thread(target=one, args=(fed, todo)))
            threads[-1].start()
        for t in threads:
            t.join()
        for name, r in got.items():
            r.rounds = results[name].rounds + 1
            r.written += results[name].written  # pieces written over all rounds
            if r.status == "slow":
                out.notes.append(r.reason)
            results[name] = r
        line = [h for fed, todo in chains for h in ([fed] if fed else []) + todo]
        chains = plan(list(dict.fromkeys(line)), results)
    for _, todo in chains:
        for h in todo:
            r = results[h.name]
            r.reason = f"not whole after {attempts} rounds: {r.reason or r.status}"
            r.status = "failed"
    out.elapsed_s = time.monotonic() - t0
    return out
