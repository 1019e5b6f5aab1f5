"""Weights: put a verified copy of the model on every host's local disk.

Layout on a host (model_dir defaults to /srv/models):
    <model_dir>/<model_name>                       symlink the service reads (--model)
    <model_dir>/.versions/<model_name>-<id>/       verified copies, id = sha256 of the manifest
    <model_dir>/.staging/<model_name>-<id>/        where rsync writes; never read by the service
A copy is rsynced into staging (resumable: a killed transfer keeps what it had), verified with
`sha256sum -c MANIFEST.sha256` and the safetensors index, moved into .versions and only then
the symlink is switched (atomic rename), so the service never sees a half-copied model.

Fan-out: hosts that already hold a verified copy become sources for the next ones (each
source feeds one new host per wave, the controller feeds one), so the controller sends each
file O(1) times however large the fleet is.

LoRA adapters take the same path (_payload.py): <model_dir>/lora/<name> is their live link,
.versions/lora-<name>-<id> their verified copies."""

from __future__ import annotations

import posixpath
import shlex
import time
from pathlib import Path
from typing import Any, Callable

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.changes import apply, directory_change
from vfleet.engine.errors import VfleetError
from vfleet.engine.facts import FileFact, LinkFact, gather
from vfleet.engine.owned_paths import deep_path, inside, plain_operand
from vfleet.engine.pathrules import is_host_source
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed, Play
from vfleet.engine.transfer import TransferStats, rsync_push
from vfleet.roles.model_source import (
    MANIFEST_NAME,
    Payload,
    hub,
    hub_export,
    manifest_id,
    model_payload,
    verify_command,
    write_manifest,
)
from vfleet.roles.weights._chain_step import copy_by_chain
from vfleet.roles.weights._copies import (
    PEER_SSH,
    VERIFIED_MARK,
    ModelSource,
    check_space,
    copy_dir_name,
    copy_paths,
    finish_command,
    switch_change,
    switch_live_link,
)
from vfleet.roles.weights._totals import WeightsTotals

q = shlex.quote


def copy_name(cfg: HostConfig, manifest_id: str) -> str:
    """The folder name of the model's verified copy under .versions (status reads it back
    from the model link to tell which copy a host serves)."""
    return copy_dir_name(model_payload(cfg), manifest_id)


def source_key(cfg: HostConfig) -> str:
    """The weights a host asks for, as one string (Payload.key): `hf://X` with model_revision
    v1 and `hf://X@v1` are the same weights."""
    return model_payload(cfg).key


def controller_folder(cfg: HostConfig) -> Path | None:
    """The controller's folder of cfg's model_source (Payload.controller_folder)."""
    return model_payload(cfg).controller_folder()


def resolve_source(cfg: HostConfig) -> ModelSource:
    _require_model_name(cfg)
    return resolve_payload(model_payload(cfg))


def _require_model_name(cfg: HostConfig) -> None:
    if not cfg.model_name:
        raise VfleetError("model_name is not set in the inventory; set it to the served model name")


def resolve_payload(payload: Payload) -> ModelSource:
    """Where a payload's files come from, with the id (manifest hash) of the copy they make."""
    spec = payload.source
    if not spec:
        raise VfleetError(
            f"{payload.variable} is not set in the inventory; set it to a folder on the controller, "
            "to HOST:/path on a host that has it, or to hf://ORG/NAME@REVISION"
        )
    if hub.is_hub(spec):
        export = hub_export(spec, payload.revision, payload.variable)
        return ModelSource(spec, export.folder, None, None, manifest_id(export.folder), hub_commit=export.commit)
    if is_host_source(spec):
        host, path = spec.split(":", 1)
        if not path.startswith("/"):
            raise VfleetError(
                f"{payload.variable} {spec}: the path after '{host}:' must be absolute (e.g. {host}:/srv/models/x)"
            )
        return ModelSource(spec, None, host, path, manifest_id="")
    # absolute: a folder named like an option (`--rsh=...`) stays an operand for rsync and ls
    folder = Path(spec).expanduser().absolute()
    if not (folder / payload.required).is_file():
        raise VfleetError(
            f"{payload.variable} {spec}: no {payload.required} there; point it at the folder "
            f"that holds {payload.required} and its *.safetensors"
        )
    if not (folder / MANIFEST_NAME).is_file():
        write_manifest(folder)  # made once on the source, kept beside the weights
    return ModelSource(spec, folder, None, None, manifest_id(folder))


def _resolve_host_source(play: Play, src: ModelSource) -> ModelSource:
    """For host:path sources, read (or make) the manifest on that host to get the copy's id."""
    if src.host not in play.contexts:
        raise VfleetError(
            f"model_source {src.spec}: host '{src.host}' is not among the selected hosts; "
            f"add it to --limit or use a controller path"
        )
    ctx = play.contexts[src.host]
    p = q(src.host_path or "")
    r = ctx.run(
        f"cd -- {p} && {{ [ -f {MANIFEST_NAME} ] || find . -type f ! -name {MANIFEST_NAME} ! -name '.vfleet-*' "
        f"| sed 's|^\\./||' | LC_ALL=C sort | xargs -d '\\n' sha256sum > {MANIFEST_NAME}; }} && sha256sum < {MANIFEST_NAME}"
    )
    if not r.ok:
        raise VfleetError(f"model_source {src.spec}: cannot read or make the manifest there: {r.tail()}")
    src.manifest_id = r.stdout.split()[0]
    return src


def copy_state(version: str, marker: Any, link: str | None) -> str:
    """'live' (linked and verified), 'verified' (copy present, not linked), or 'missing'."""
    if marker.kind != "file":
        return "missing"
    return "live" if link == version else "verified"


def host_facts(ctx: HostContext, payload: Payload, manifest_id: str) -> dict[str, Any]:
    live, version, _ = copy_paths(payload, manifest_id)
    return gather(
        ctx,
        {
            "model_dir": FileFact(payload.root),
            "parent": FileFact(posixpath.dirname(live)),
            "marker": FileFact(posixpath.join(version, VERIFIED_MARK)),
            "link": LinkFact(live),
        },
    )


def _finish_copy(ctx: HostContext, payload: Payload, manifest_id: str) -> None:
    """Verify the staged copy, hand it to the service user, move it into place, switch link."""
    live, version, staging = copy_paths(payload, manifest_id)
    user = ctx.config.vllm_user
    t0 = time.monotonic()
    r = ctx.run(verify_command(staging), timeout=3600)
    if not r.ok:
        raise HostFailed(f"weights in {staging} failed verification: {r.tail()}; re-run to resume the copy")
    ctx.record("verify", staging, Status.OK, "sha256 manifest and shard index match", elapsed_s=time.monotonic() - t0)
    ctx.must(finish_command(staging, version, user), what="move verified weights into place")
    switch_live_link(ctx, payload, manifest_id)


def pull_command(cfg: HostConfig, staging: str, user: str | None, address: str, port: int, src_path: str) -> str:
    """rsync run on the new host, pulling src_path from a peer: the operands after `--`, the
    peer's user and address proven not to start with '-' (ssh, which rsync runs with them,
    takes no `--` before its host), the source path absolute."""
    plain_operand(address, "peer address")
    if user:
        plain_operand(user, "peer user")
    if not src_path.startswith("/"):
        raise HostFailed(f"weights source path {src_path!r} on the peer is not absolute")
    key = cfg.weights_peer_ssh_key
    ssh = shlex.join(PEER_SSH) + (f" -i {q(key)}" if key else "")
    host = f"[{address}]" if ":" in address else address  # rsync's form for an IPv6 literal
    remote = f"{user + '@' if user else ''}{host}:{src_path.rstrip('/')}/"
    bw = f"--bwlimit={int(cfg.weights_bwlimit)} " if cfg.weights_bwlimit else ""
    return (
        f"mkdir -p -- {q(staging)} && rsync -a --partial --delete --stats {bw}--exclude {VERIFIED_MARK} "
        f"-e {q(ssh + ' -p ' + str(int(port)))} -- {q(remote)} {q(staging + '/')}"
    )


def _pull_from_peer(
    ctx: HostContext,
    peer: HostContext,
    payload_of: Callable[[HostConfig], Payload],
    manifest_id: str,
    peer_path: str | None = None,
) -> None:
    """Run rsync on the new host, pulling from a host that holds a verified copy."""
    cfg: HostConfig = ctx.config
    _, version, staging = copy_paths(payload_of(cfg), manifest_id)
    src_path = peer_path or copy_paths(payload_of(peer.config), manifest_id)[1]
    t0 = time.monotonic()
    r = ctx.run(
        pull_command(cfg, staging, peer.host.user, peer.host.address, peer.host.port, src_path), timeout=24 * 3600
    )
    if not r.ok:
        raise HostFailed(f"rsync from {peer.name} failed: {r.tail()}; a re-run resumes the copy")
    stats = TransferStats.parse(r.stdout)
    ctx.record(
        "copy",
        staging,
        Status.CHANGED,
        f"from {peer.name}: {stats.bytes_received} bytes",
        elapsed_s=time.monotonic() - t0,
        data={"source": peer.name, "bytes_received": stats.bytes_received},
    )


def _push_from_controller(ctx: HostContext, payload: Payload, src: ModelSource, totals: WeightsTotals) -> None:
    cfg: HostConfig = ctx.config
    _, _, staging = copy_paths(payload, src.manifest_id)
    assert src.controller_dir is not None
    total = sum(f.stat().st_size for f in src.controller_dir.rglob("*") if f.is_file())
    ctx.run(f"mkdir -p -- {q(staging)}")
    t0 = time.monotonic()
    extra = ["--exclude", VERIFIED_MARK] + (["--copy-links"] if src.hub_commit else [])
    if cfg.weights_bwlimit:
        extra.append(f"--bwlimit={cfg.weights_bwlimit}")
    stats = rsync_push(
        ctx,
        str(src.controller_dir),
        staging,
        extra=extra,
        on_progress=lambda done, pct: ctx.progress(done, total, payload.step),
    )
    totals.controller_bytes_sent += stats.bytes_sent
    ctx.record(
        "copy",
        staging,
        Status.CHANGED,
        f"from controller: {stats.bytes_sent} bytes sent",
        elapsed_s=time.monotonic() - t0,
        data={"source": "controller", "bytes_sent": stats.bytes_sent},
    )


def assign_wave(
    missing: list[str],
    have: list[str],
    *,
    fanout: bool,
    controller: bool,
    source_host: str | None,
    raw_source: str | None,
) -> dict[str, str | None]:
    """One wave of copies: new host -> the host it pulls from (None: the controller pushes).
    With fan-out every host holding a copy feeds one new host per wave and the controller
    feeds one only while no host holds a copy, so it sends each file once; without, the
    controller (or the host:path source) feeds them all at once."""
    assignments: dict[str, str | None] = {}
    peers = list(have) if fanout else []
    if raw_source:
        peers.append(raw_source)
    controller_slots = (0 if peers else 1) if fanout else len(missing)
    for n in missing:
        if peers:
            assignments[n] = peers.pop(0)
        elif controller and controller_slots > 0:
            assignments[n] = None
            controller_slots -= 1
        elif source_host and not fanout:
            assignments[n] = source_host
    return assignments


def run(
    play: Play,
    hosts: list[str] | None = None,
    payload_of: Callable[[HostConfig], Payload] = model_payload,
    report: bool = True,
) -> WeightsTotals | None:
    """The weights step (or one adapter's: `payload_of`) on every active host (or `hosts`):
    returns accounting for the report (None: no host left to copy to); `report`: also note it
    as the report's "weights" section (an adapter's caller reports it under its own name)."""
    names = [n for n in (hosts or play.active) if n in play.active]
    if not names:
        return None
    first_config: HostConfig = play.contexts[names[0]].config
    _require_model_name(first_config)
    first = payload_of(first_config)
    src, step = resolve_payload(first), first.step
    if src.host:
        src = _resolve_host_source(play, src)
    totals = WeightsTotals(hub_commit=src.hub_commit)
    if report:
        play.note(totals)  # in the report even when nothing needed copying
    state: dict[str, str] = {}
    wanted = first.key

    def probe(ctx: HostContext) -> None:
        payload = payload_of(ctx.config)
        if payload.key != wanted:
            raise HostFailed(
                f"{payload.variable} differs between hosts ({wanted} vs {payload.key}); deploy one model at a time"
            )
        facts = host_facts(ctx, payload, src.manifest_id)
        live, version, _ = copy_paths(payload, src.manifest_id)
        # a top-level model_dir (/tmp, /root, /etc) would get its mode changed: never
        apply(ctx, directory_change(deep_path(payload.root, "model_dir"), facts["model_dir"], mode="0755"))
        if posixpath.dirname(live) != payload.root:  # an adapter's lora/ folder
            apply(
                ctx,
                directory_change(
                    inside(payload.root, posixpath.dirname(live), payload.live_variable), facts["parent"], mode="0755"
                ),
            )
        state[ctx.name] = copy_state(version, facts["marker"], facts["link"])
        if state[ctx.name] == "live":
            ctx.record(step, live, Status.OK, f"verified copy {src.manifest_id[:12]} in place")
        elif state[ctx.name] == "verified":
            apply(ctx, switch_change(payload, live, version, facts["link"]))

    play.run_step(f"{step}: check", probe, hosts=names)

    missing = [n for n in names if state.get(n) == "missing" and n in play.active]
    if not missing:
        return totals
    if play.options.check:

        def would(ctx: HostContext) -> None:
            ctx.record(
                "copy",
                payload_of(ctx.config).live,
                Status.CHANGED,
                f"would copy {src.pinned} (copy {src.manifest_id[:12]})",
            )

        play.run_step(f"{step}: copy", would, hosts=missing)
        return totals

    have = [n for n in names if state.get(n) in ("live", "verified") and n in play.active]
    if first_config.weights_distribution == "chain":
        copy_by_chain(play, missing, payload_of, src, totals, holders=have)
        return totals
    fanout = first_config.weights_fanout
    total_bytes = (
        sum(f.stat().st_size for f in src.controller_dir.rglob("*") if f.is_file()) if src.controller_dir else None
    )  # a host:path source: its size is not known here
    # host:path source: that host feeds others from its own path (it holds no verified copy here)
    raw_source = src.host if src.host and src.host not in have else None
    while missing:
        totals.waves += 1
        assignments = assign_wave(
            missing,
            have,
            fanout=fanout,
            controller=src.controller_dir is not None,
            source_host=src.host,
            raw_source=raw_source,
        )
        if not assignments:
            raise VfleetError("weights: no source available for the remaining hosts")
        for n in assignments:
            missing.remove(n)

        def copy(ctx: HostContext) -> None:
            source = assignments[ctx.name]
            payload = payload_of(ctx.config)
            if total_bytes is not None:
                check_space(ctx, copy_paths(payload, src.manifest_id)[2], total_bytes)
            if source is None:
                _push_from_controller(ctx, payload, src, totals)
            elif source == src.host and source not in have:
                _pull_from_peer(ctx, play.contexts[source], payload_of, src.manifest_id, peer_path=src.host_path)
            else:
                _pull_from_peer(ctx, play.contexts[source], payload_of, src.manifest_id)
            _finish_copy(ctx, payload, src.manifest_id)
            totals.copies += 1

        have.extend(play.run_step(f"{step}: copy (wave {totals.waves})", copy, hosts=list(assignments)))
    return totals
