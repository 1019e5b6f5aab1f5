"""Build the torch.compile cache once, on the first batch of a rollout, and copy it to the later
hosts of the same key before they restart (inventory: compile_cache_share; docs/compile-cache.md).

Why: every host compiles the same graphs at start (on the H200, torch.compile took 15-22 s of a
90-100 s cold start; a host given the first one's cache loads them in 4-5 s). Only after the first
batch serves, and, with --gate, after the eval gate found its answers unchanged (the rollout stops
before this when the canary regressed), is its cache vouched for: that is when it is packed.

Steps, each on many hosts at once: read each host's facts and compute its key on the controller
(_key.py); pack on each first-batch host the entries its start compiled (_stored.py, _files.py),
one per key; on each later host, drop a cache it keeps under a key that no longer holds, then
copy and install the packed cache of an equal key, or say in one line which field differs and
that it compiles its own. Nothing here fails a host: a cache that cannot be shared means only
a slower start, so every problem is a line, never a failed host.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from vfleet.config.quoting import shell_quote as q
from vfleet.engine.errors import VfleetError
from vfleet.engine.facts import gather
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, Play
from vfleet.roles.compile_cache._copy import Relay
from vfleet.roles.compile_cache._facts import facts_for, model_identity
from vfleet.roles.compile_cache._files import CacheFiles, drop_command, install_command, pack_command
from vfleet.roles.compile_cache._key import CacheKey, difference, drop_line, host_key, skip_line
from vfleet.roles.compile_cache._stored import StoredCache, choose_entries

__all__ = ["CacheShare", "Packed", "sharing"]

ACTION = "compile cache"


@dataclass(frozen=True)
class Packed:
    """A cache packed on its source host: what a host of an equal key installs."""

    source: str
    key: CacheKey
    entries: tuple[str, ...]
    export: str
    size: int


class CacheShare:
    """The `cache` of vfleet/roles/rollout/_rolling.py's Rollout: share(first batch, later hosts)."""

    def __init__(self, play: Play) -> None:
        self.play = play
        self.hosts: dict[str, tuple[CacheKey, dict[str, Any]]] = {}
        self.packed: dict[str, Packed] = {}
        self.lines: list[str] = []
        self._lock = threading.Lock()

    @staticmethod
    def wanted(play: Play, hosts: list[str]) -> bool:
        return any(play.contexts[h].config.compile_cache_share for h in hosts if h in play.contexts)

    def share(self, sources: list[str], targets: list[str]) -> list[str]:
        """Pack on `sources` (first-batch hosts that serve and passed), copy onto `targets`
        before they restart; the one-line reasons of the hosts left to compile their own."""
        opted = [h for h in sources + targets if self.play.contexts[h].config.compile_cache_share]
        sources, targets = [h for h in sources if h in opted], [h for h in targets if h in opted]
        if not sources or not targets or self.play.options.check:
            return []
        self.play.run_step("compile cache: keys", self._read, hosts=sources + targets)
        self.play.run_step("compile cache: pack the first batch's", self._pack, hosts=sources)
        relay = Relay()
        try:
            self.play.run_step(
                "compile cache: copy before the restart", lambda ctx: self._copy(ctx, relay), hosts=targets
            )
        finally:
            relay.close()
        for line in self.lines:
            self.play.print(line, markup=False, soft_wrap=True)
        return list(self.lines)

    def _say(self, ctx: HostContext, status: Status, line: str) -> None:
        ctx.record(ACTION, ctx.config.vllm_cache_root, status, line)
        with self._lock:
            self.lines.append(line)

    # -- steps -------------------------------------------------------------------------------
    def _read(self, ctx: HostContext) -> None:
        cfg = ctx.config
        try:
            facts = gather(ctx, facts_for(cfg))
            key = host_key(cfg, gpu_model=facts["gpu"], model=model_identity(cfg, facts.get("model")))
        except VfleetError as exc:
            self._say(ctx, Status.SKIPPED, f"{ctx.name}: no compile-cache key ({exc}): {ctx.name} compiles its own")
            return
        with self._lock:
            self.hosts[ctx.name] = (key, facts)

    def _pack(self, ctx: HostContext) -> None:
        if ctx.name not in self.hosts:
            return
        key, facts = self.hosts[ctx.name]
        with self._lock:
            if key.digest in self.packed:
                return  # another canary of the same key packs it
        chosen, why = choose_entries(facts["entries"], facts["started"], facts["stored"], key)
        if not chosen:
            self._say(ctx, Status.OK, f"{ctx.name}: compile cache not packed: {why}")
            return
        files = CacheFiles.of(ctx.config)
        r = ctx.run(
            pack_command(files, key.digest, chosen),
            stdin=StoredCache(key, tuple(chosen), ctx.name).to_json(),
            timeout=1800,
        )
        size = r.stdout.split()[-1] if r.ok and r.stdout.split() else ""
        if not size.isdigit():
            self._say(ctx, Status.OK, f"{ctx.name}: compile cache not packed: {r.tail()}")
            return
        with self._lock:
            self.packed.setdefault(
                key.digest, Packed(ctx.name, key, tuple(chosen), files.export(key.digest), int(size))
            )
        ctx.record(
            ACTION,
            files.export(key.digest),
            Status.CHANGED,
            f"packed {len(chosen)} entries, {int(size) / 2**20:.1f} MiB ({why})",
        )

    def _copy(self, ctx: HostContext, relay: Relay) -> None:
        if ctx.name not in self.hosts:
            return
        key, facts = self.hosts[ctx.name]
        files = CacheFiles.of(ctx.config)
        stored: StoredCache | None = facts["stored"]
        have = {e.name for e in facts["entries"]}
        if stored is not None:
            differs = difference(stored.key, key)
            if differs is None and set(stored.entries) <= have:
                ctx.record(ACTION, files.root, Status.OK, "already holds the compile cache of its key")
                return
            if differs is not None:
                ctx.run(drop_command(files, list(stored.entries)))
                self._say(ctx, Status.CHANGED, drop_line(ctx.name, *differs))
        match = next((p for p in self.packed.values() if difference(p.key, key) is None), None)
        if match is None:
            self._skip(ctx, key)
            return
        staging = files.staging(key.digest)
        try:
            moved = relay.copy(ctx, self.play.contexts[match.source], match.export, staging)
            out = ctx.must(
                install_command(files, key.digest, list(match.entries), ctx.config.vllm_user, ctx.config.vllm_group),
                what="install the compile cache",
                timeout=1800,
            )
        except VfleetError as exc:
            ctx.run(f"rm -rf -- {q(staging)}")
            self._say(
                ctx,
                Status.OK,
                f"{ctx.name}: compile cache of {match.source} not installed ({exc}): {ctx.name} compiles its own",
            )
            return
        installed = out.stdout.count("installed ")
        ctx.record(
            ACTION,
            files.root,
            Status.CHANGED,
            f"compile cache of {match.source} installed before the restart: {installed} of "
            f"{len(match.entries)} entries new, {moved} bytes moved",
        )

    def _skip(self, ctx: HostContext, key: CacheKey) -> None:
        """No packed cache of an equal key: name the field against the nearest one (same model)."""
        packed = sorted(self.packed.values(), key=lambda p: (p.key.model != key.model, p.source))
        if not packed:
            self._say(
                ctx,
                Status.SKIPPED,
                f"{ctx.name}: no compile cache was packed in the first batch: {ctx.name} compiles its own",
            )
            return
        nearest = packed[0]
        field, detail = difference(nearest.key, key, have_is=nearest.source, want_is=f"on {ctx.name}") or ("", "")
        self._say(ctx, Status.SKIPPED, skip_line(ctx.name, nearest.source, field, detail))


def sharing(play: Play, hosts: list[str]) -> CacheShare | None:
    """The run's CacheShare when any of these hosts sets compile_cache_share, else None."""
    return CacheShare(play) if CacheShare.wanted(play, hosts) else None
