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

LoRA adapters take the same path (payload.py): <model_dir>/lora/<name> is their live link,
.versions/lora-<name>-<id> their verified copies."""
from __future__ import annotations

import hashlib
import posixpath
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from vfleet.engine.changes import apply, directory_change
from vfleet.engine.errors import VfleetError
from vfleet.engine.pathrules import is_host_source
from vfleet.engine.facts import FileFact, LinkFact, gather
from vfleet.engine.owned_paths import deep_path, inside, owned_symlink_change, plain_operand
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed, Play
from vfleet.engine.transfer import TransferStats, rsync_push
from vfleet.config.hostconfig import HostConfig
from vfleet.roles.service.unit import RESTART
from vfleet.roles.weights import hub
from vfleet.roles.weights.manifest import MANIFEST_NAME, verify_command, write_manifest
from vfleet.roles.weights.payload import Payload, hub_export, model_payload
from vfleet.roles.weights.totals import WeightsTotals

q = shlex.quote
VERIFIED_MARK = ".vfleet-verified"
# ssh between hosts (peer pulls here, the chain's links in chain.py): no prompt, host keys
# checked, a vanished host ends its link within ~15 s
PEER_SSH = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]


@dataclass
class ModelSource:
    """Where the weights come from: a folder on the controller, host:path on a host, or a hub
    repository (`hub_commit`: the commit its revision resolved to; its folder is vfleet's
    export of links into the cache, hub.py, so the controller's push follows links)."""

    spec: str
    controller_dir: Path | None
    host: str | None
    host_path: str | None
    manifest_id: str
    hub_commit: str | None = None

    @property
    def pinned(self) -> str:
        """What a report names: the spec, and the commit a hub revision resolved to."""
        return f"{self.spec} (commit {self.hub_commit})" if self.hub_commit else self.spec


def copy_name(cfg: HostConfig, manifest_id: str) -> str:
    """The folder name of the model's verified copy under .versions (status reads it back
    from the model link to tell which copy a host serves)."""
    return _copy_name(model_payload(cfg), manifest_id)


def _copy_name(payload: Payload, manifest_id: str) -> str:
    return f"{payload.stem}-{manifest_id[:12]}"


def _paths(payload: Payload, manifest_id: str) -> tuple[str, str, str]:
    """(live link the service reads, verified copy, staging folder) of one copy. The copy and
    its staging folder are proven to stay inside model_dir's own .versions and .staging (they
    are removed and renamed), the link to be at least two levels deep (it is replaced)."""
    name = _copy_name(payload, manifest_id)
    versions, staging = posixpath.join(payload.root, ".versions"), posixpath.join(payload.root, ".staging")
    return (deep_path(payload.live, payload.live_variable),
            inside(versions, posixpath.join(versions, name), payload.live_variable),
            inside(staging, posixpath.join(staging, name), payload.live_variable))


def _switch_link(payload: Payload, live: str, version: str, current: str | None) -> list:
    """Point the live link at a verified copy; only a link vfleet made (into model_dir) is
    ever replaced: a model_path naming a system symlink such as /bin fails the host."""
    return owned_symlink_change(live, version, current, root=payload.root, what=payload.live_variable,
                                notify=RESTART)


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
        raise VfleetError(f"{payload.variable} is not set in the inventory; set it to a folder on the controller, "
                          "to HOST:/path on a host that has it, or to hf://ORG/NAME@REVISION")
    if hub.is_hub(spec):
        export = hub_export(spec, payload.revision, payload.variable)
        return ModelSource(spec, export.folder, None, None, _manifest_id(export.folder), hub_commit=export.commit)
    if is_host_source(spec):
        host, path = spec.split(":", 1)
        if not path.startswith("/"):
            raise VfleetError(f"{payload.variable} {spec}: the path after '{host}:' must be absolute "
                              f"(e.g. {host}:/srv/models/x)")
        return ModelSource(spec, None, host, path, manifest_id="")
    # absolute: a folder named like an option (`--rsh=...`) stays an operand for rsync and ls
    folder = Path(spec).expanduser().absolute()
    if not (folder / payload.required).is_file():
        raise VfleetError(f"{payload.variable} {spec}: no {payload.required} there; point it at the folder "
                          f"that holds {payload.required} and its *.safetensors")
    if not (folder / MANIFEST_NAME).is_file():
        write_manifest(folder)  # made once on the source, kept beside the weights
    return ModelSource(spec, folder, None, None, _manifest_id(folder))


def _manifest_id(folder: Path) -> str:
    """The id of a copy: the sha256 of its manifest."""
    return hashlib.sha256((folder / MANIFEST_NAME).read_bytes()).hexdigest()


def _resolve_host_source(play: Play, src: ModelSource) -> ModelSource:
    """For host:path sources, read (or make) the manifest on that host to get the copy's id."""
    if src.host not in play.contexts:
        raise VfleetError(f"model_source {src.spec}: host '{src.host}' is not among the selected hosts; "
                          f"add it to --limit or use a controller path")
    ctx = play.contexts[src.host]
    p = q(src.host_path or "")
    r = ctx.run(f"cd -- {p} && {{ [ -f {MANIFEST_NAME} ] || find . -type f ! -name {MANIFEST_NAME} ! -name '.vfleet-*' "
                f"| sed 's|^\\./||' | LC_ALL=C sort | xargs -d '\\n' sha256sum > {MANIFEST_NAME}; }} && sha256sum < {MANIFEST_NAME}")
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
    live, version, _ = _paths(payload, manifest_id)
    return gather(ctx, {"model_dir": FileFact(payload.root), "parent": FileFact(posixpath.dirname(live)),
                        "marker": FileFact(posixpath.join(version, VERIFIED_MARK)),
                        "link": LinkFact(live)})


def _finish_copy(ctx: HostContext, payload: Payload, manifest_id: str) -> None:
    """Verify the staged copy, hand it to the service user, move it into place, switch link."""
    live, version, staging = _paths(payload, manifest_id)
    user = ctx.config.vllm_user
    t0 = time.monotonic()
    r = ctx.run(verify_command(staging), timeout=3600)
    if not r.ok:
        raise HostFailed(f"weights in {staging} failed verification: {r.tail()}; re-run to resume the copy")
    ctx.record("verify", staging, Status.OK, "sha256 manifest and shard index match", elapsed_s=time.monotonic() - t0)
    ctx.must(finish_command(staging, version, user), what="move verified weights into place")
    switch_live_link(ctx, payload, manifest_id)


def copy_paths(payload: Payload, manifest_id: str) -> tuple[str, str, str]:
    """(live link, verified copy, staging folder) of one copy: what the chain (chain_step.py) uses."""
    return _paths(payload, manifest_id)


def switch_live_link(ctx: HostContext, payload: Payload, manifest_id: str) -> None:
    """Point the live link at the verified copy now in .versions (atomic rename)."""
    live, version, _ = _paths(payload, manifest_id)
    apply(ctx, _switch_link(payload, live, version, gather(ctx, {"link": LinkFact(live)})["link"]))


def finish_command(staging: str, version: str, user: str | None) -> str:
    """Hand the verified staging folder to the service user and rename it into .versions.
    Every path after `--`: none is read as an option."""
    owner = f"chown -R -- {q(user + ':')} {q(staging)} 2>/dev/null || true; " if user else ""
    return (f"set -e; {owner}chmod -R u=rwX,go=rX -- {q(staging)}; touch -- {q(staging + '/' + VERIFIED_MARK)}; "
            f"mkdir -p -- {q(posixpath.dirname(version))}; rm -rf -- {q(version)}; mv -T -- {q(staging)} {q(version)}")


def space_command(staging: str) -> str:
    """Bytes free on the filesystem that holds staging, then bytes already staged (a resume)."""
    return (f"mkdir -p -- {q(staging)} && df -P -B1 -- {q(staging)} | awk 'NR==2 {{print $4}}' && "
            f"du -sb -- {q(staging)} | cut -f1")


def space_shortfall(total: int, output: str) -> tuple[int, int, int] | None:
    """(bytes still to copy, bytes free, bytes staged) when they do not fit, else None."""
    nums = [int(x) for x in output.split() if x.isdigit()]
    if len(nums) < 2:
        return None
    free, staged = nums[0], nums[1]
    need = max(0, total - staged)
    return (need, free, staged) if need > free else None


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n < 2**30 else f"{n / 2**30:.2f} GiB"


def check_space(ctx: HostContext, staging: str, total: int) -> None:
    """Before any byte is sent: fail the host (its live copy untouched) when the copy cannot
    fit, saying how much it needs, rather than an rsync dying on ENOSPC half way."""
    short = space_shortfall(total, ctx.must(space_command(staging), what="free space for the weights").stdout)
    if short:
        need, free, staged = short
        raise HostFailed(f"not enough disk for the weights in {staging}: needs {_mib(need)} more "
                         f"({_mib(total)} in all, {_mib(staged)} already staged), {_mib(free)} free; "
                         f"free space there or set model_dir to a larger disk (the live copy is untouched)",
                         {"needed_bytes": need, "free_bytes": free, "total_bytes": total})


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
    host = f"[{address}]" if ":" in address else address   # rsync's form for an IPv6 literal
    remote = f"{user + '@' if user else ''}{host}:{src_path.rstrip('/')}/"
    bw = f"--bwlimit={int(cfg.weights_bwlimit)} " if cfg.weights_bwlimit else ""
    return (f"mkdir -p -- {q(staging)} && rsync -a --partial --delete --stats {bw}--exclude {VERIFIED_MARK} "
            f"-e {q(ssh + ' -p ' + str(int(port)))} -- {q(remote)} {q(staging + '/')}")


def _pull_from_peer(ctx: HostContext, peer: HostContext, payload_of: Callable[[HostConfig], Payload],
                    manifest_id: str, peer_path: str | None = None) -> None:
    """Run rsync on the new host, pulling from a host that holds a verified copy."""
    cfg: HostConfig = ctx.config
    _, version, staging = _paths(payload_of(cfg), manifest_id)
    src_path = peer_path or _paths(payload_of(peer.config), manifest_id)[1]
    t0 = time.monotonic()
    r = ctx.run(pull_command(cfg, staging, peer.host.user, peer.host.address, peer.host.port, src_path),
                timeout=24 * 3600)
    if not r.ok:
        raise HostFailed(f"rsync from {peer.name} failed: {r.tail()}; a re-run resumes the copy")
    stats = TransferStats.parse(r.stdout)
    ctx.record("copy", staging, Status.CHANGED, f"from {peer.name}: {stats.bytes_received} bytes",
               elapsed_s=time.monotonic() - t0, data={"source": peer.name, "bytes_received": stats.bytes_received})


def _push_from_controller(ctx: HostContext, payload: Payload, src: ModelSource, totals: WeightsTotals) -> None:
    cfg: HostConfig = ctx.config
    _, _, staging = _paths(payload, src.manifest_id)
    assert src.controller_dir is not None
    total = sum(f.stat().st_size for f in src.controller_dir.rglob("*") if f.is_file())
    ctx.run(f"mkdir -p -- {q(staging)}")
    t0 = time.monotonic()
    extra = ["--exclude", VERIFIED_MARK] + (["--copy-links"] if src.hub_commit else [])
    if cfg.weights_bwlimit:
        extra.append(f"--bwlimit={cfg.weights_bwlimit}")
    stats = rsync_push(ctx, str(src.controller_dir), staging, extra=extra,
                       on_progress=lambda done, pct: ctx.progress(done, total, payload.step))
    totals.controller_bytes_sent += stats.bytes_sent
    ctx.record("copy", staging, Status.CHANGED, f"from controller: {stats.bytes_sent} bytes sent",
               elapsed_s=time.monotonic() - t0, data={"source": "controller", "bytes_sent": stats.bytes_sent})


def assign_wave(missing: list[str], have: list[str], *, fanout: bool, controller: bool,
                source_host: str | None, raw_source: str | None) -> dict[str, str | None]:
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


def run(play: Play, hosts: list[str] | None = None,
        payload_of: Callable[[HostConfig], Payload] = model_payload, report: bool = True) -> WeightsTotals | None:
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
            raise HostFailed(f"{payload.variable} differs between hosts ({wanted} vs {payload.key}); "
                             f"deploy one model at a time")
        facts = host_facts(ctx, payload, src.manifest_id)
        live, version, _ = _paths(payload, src.manifest_id)
        # a top-level model_dir (/tmp, /root, /etc) would get its mode changed: never
        apply(ctx, directory_change(deep_path(payload.root, "model_dir"), facts["model_dir"], mode="0755"))
        if posixpath.dirname(live) != payload.root:   # an adapter's lora/ folder
            apply(ctx, directory_change(inside(payload.root, posixpath.dirname(live), payload.live_variable),
                                        facts["parent"], mode="0755"))
        state[ctx.name] = copy_state(version, facts["marker"], facts["link"])
        if state[ctx.name] == "live":
            ctx.record(step, live, Status.OK, f"verified copy {src.manifest_id[:12]} in place")
        elif state[ctx.name] == "verified":
            apply(ctx, _switch_link(payload, live, version, facts["link"]))

    play.run_step(f"{step}: check", probe, hosts=names)

    missing = [n for n in names if state.get(n) == "missing" and n in play.active]
    if not missing:
        return totals
    if play.options.check:
        def would(ctx: HostContext) -> None:
            ctx.record("copy", payload_of(ctx.config).live, Status.CHANGED,
                       f"would copy {src.pinned} (copy {src.manifest_id[:12]})")
        play.run_step(f"{step}: copy", would, hosts=missing)
        return totals

    have = [n for n in names if state.get(n) in ("live", "verified") and n in play.active]
    if first_config.weights_distribution == "chain":
        # imported here: the chain's modules import this one (PEER_SSH, finish_command)
        from vfleet.roles.weights.chain_step import copy_by_chain
        copy_by_chain(play, missing, payload_of, src, totals, holders=have)
        return totals
    fanout = first_config.weights_fanout
    total_bytes = (sum(f.stat().st_size for f in src.controller_dir.rglob("*") if f.is_file())
                   if src.controller_dir else None)  # a host:path source: its size is not known here
    # host:path source: that host feeds others from its own path (it holds no verified copy here)
    raw_source = src.host if src.host and src.host not in have else None
    while missing:
        totals.waves += 1
        assignments = assign_wave(missing, have, fanout=fanout, controller=src.controller_dir is not None,
                                  source_host=src.host, raw_source=raw_source)
        if not assignments:
            raise VfleetError("weights: no source available for the remaining hosts")
        for n in assignments:
            missing.remove(n)

        def copy(ctx: HostContext) -> None:
            source = assignments[ctx.name]
            payload = payload_of(ctx.config)
            if total_bytes is not None:
                check_space(ctx, _paths(payload, src.manifest_id)[2], total_bytes)
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
