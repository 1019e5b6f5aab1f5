"""The deploy's weights copy by chain (weights_distribution: chain), in place of _sync.py's waves.

Why a step of its own: the waves copy host by host (each a step of its own), the chain copies
to every host at once from the controller, so it runs between two per-host steps: one that
checks each host's free space and makes its hop, one that takes each host's result (a host
that is not whole fails with the chain's one line for it, and a re-run resumes from the
pieces it verified). Each hop's relay verifies the whole copy as the waves do (_sync.py's
`sha256sum -c` and shard index) and only then moves it into .versions (chain.whole_command);
this step then switches the live link, as the waves do. A host that already holds the copy
feeds the chain instead of the controller.
"""

from __future__ import annotations

import time
from typing import Callable

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed, Play
from vfleet.engine.transfer import ssh_command
from vfleet.roles.model_source import Payload
from vfleet.roles.weights import _chain as chain
from vfleet.roles.weights._copies import ModelSource, check_space, copy_paths, switch_live_link
from vfleet.roles.weights._piece_cache import piece_manifest_for
from vfleet.roles.weights._totals import WeightsTotals


def hop_for(ctx: HostContext, payload: Payload, manifest_id: str, *, holder: bool = False) -> chain.Hop:
    """The host as a hop: its relay stages into the copy's staging folder and, once whole,
    verifies and moves it into .versions; a `holder` (it has the copy) serves from there."""
    cfg: HostConfig = ctx.config
    _, version, staging = copy_paths(payload, manifest_id)
    on_whole = None if holder else chain.whole_command(staging, version, cfg.vllm_user)
    s = ctx.settings()
    if ctx.host.connection == "local":
        sudo = ("sudo", "-n") if s.become else ()
        hop = chain.local_hop(ctx.name, staging, python="python3", on_whole=on_whole)
        return chain.Hop(hop.name, hop.dest, sudo + hop.from_controller, (), on_whole, version, (), s.become)
    return chain.ssh_hop(
        ctx.name,
        staging,
        address=s.address,
        user=s.user,
        port=s.port,
        controller_ssh=ssh_command(ctx),
        peer_ssh=chain.peer_ssh(cfg.weights_peer_ssh_key),
        become=s.become,
        on_whole=on_whole,
        serve_from=version,
    )


def copy_by_chain(
    play: Play,
    names: list[str],
    payload_of: Callable[[HostConfig], Payload],
    src: ModelSource,
    totals: WeightsTotals,
    holders: list[str],
) -> None:
    """Copy the model to `names` by chain; `holders`: hosts that already hold it."""
    if src.controller_dir is None:  # config/cross_checks.py refuses HOST:/path with the chain
        raise HostFailed(f"weights_distribution chain needs model_source on the controller, not {src.spec}")
    step = payload_of(play.contexts[names[0]].config).step
    t0 = time.monotonic()
    manifest, kept = piece_manifest_for(src.controller_dir, src.manifest_id)
    play.print(
        f"{step}: {manifest.piece_count} pieces of {manifest.total_bytes} B, "
        + (
            "their hashes kept from an earlier deploy"
            if kept
            else f"hashed in {time.monotonic() - t0:.1f}s (kept for the next deploy)"
        ),
        markup=False,
    )

    def prepare(ctx: HostContext) -> chain.Hop:
        payload = payload_of(ctx.config)
        check_space(ctx, copy_paths(payload, src.manifest_id)[2], manifest.total_bytes)
        return hop_for(ctx, payload, src.manifest_id)

    ready = play.run_step(f"{step}: chain hops", prepare, hosts=names)
    hops = [ready[n] for n in names if n in ready]
    if not hops:
        return
    feeder = next(
        (
            hop_for(play.contexts[n], payload_of(play.contexts[n].config), src.manifest_id, holder=True)
            for n in holders
            if n in play.active
        ),
        None,
    )
    bwlimit = play.contexts[names[0]].config.weights_bwlimit
    fed: list[int] = []

    def seen(event: chain.Event) -> None:
        if event.get("event") == "feeding" and event.get("host") == "controller":
            fed.append(int(event.get("bytes", 0)))

    out = chain.distribute(
        src.controller_dir, manifest, hops, bwlimit=bwlimit * 1024 if bwlimit else None, on_event=seen, feeder=feeder
    )
    for note in out.notes:
        play.print(f"{step}: {note}")
    totals.controller_bytes_sent += sum(fed)
    totals.chain_rounds += out.rounds

    def finish(ctx: HostContext) -> None:
        r = out.results[ctx.name]
        staging = copy_paths(payload_of(ctx.config), src.manifest_id)[2]
        if r.status != "whole":
            raise HostFailed(f"weights chain: {r.reason}; a re-run resumes from the pieces this host verified")
        ctx.record(
            "copy",
            staging,
            Status.CHANGED,
            f"by chain: {r.written} of {manifest.piece_count} pieces written, verified, moved into place",
            elapsed_s=time.monotonic() - t0,
            data={"source": "chain", "rounds": r.rounds, "pieces_written": r.written},
        )
        switch_live_link(ctx, payload_of(ctx.config), src.manifest_id)
        totals.copies += 1

    play.run_step(f"{step}: copy (chain)", finish, hosts=[h.name for h in hops])
