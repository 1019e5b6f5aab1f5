"""One verified copy of a payload on a host: where it lives (<model_dir>/.versions/<stem>-<id>,
staged in .staging), how a staged folder becomes it, the live link's switch, the free-space check
before a byte is sent, and how hosts reach each other.

Why a module of its own: the waves (_sync.py) and the chain (_chain_step.py, _chain_hops.py) both make
copies and must make them the same way; each imports this, and _sync.py picks one of the two, so
neither imports the other's caller."""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from pathlib import Path

from vfleet.engine.changes import apply
from vfleet.engine.facts import LinkFact, gather
from vfleet.engine.owned_paths import deep_path, inside, owned_symlink_change
from vfleet.engine.runner import HostContext, HostFailed
from vfleet.roles.model_source import Payload
from vfleet.roles.service import RESTART

__all__ = [
    "VERIFIED_MARK",
    "PEER_SSH",
    "ModelSource",
    "copy_dir_name",
    "copy_paths",
    "switch_change",
    "switch_live_link",
    "finish_command",
    "space_command",
    "space_shortfall",
    "check_space",
]

q = shlex.quote
VERIFIED_MARK = ".vfleet-verified"
# ssh between hosts (_sync.py's peer pulls, the chain's links in _chain_hops.py): no prompt, host keys
# checked, a vanished host ends its link within ~15 s
PEER_SSH = [
    "ssh",
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=yes",
    "-o",
    "ServerAliveInterval=5",
    "-o",
    "ServerAliveCountMax=3",
]


@dataclass
class ModelSource:
    """Where the weights come from: a folder on the controller, host:path on a host, or a hub
    repository (`hub_commit`: the commit its revision resolved to; its folder is vfleet's
    export of links into the cache, _hub.py, so the controller's push follows links)."""

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


def copy_dir_name(payload: Payload, manifest_id: str) -> str:
    return f"{payload.stem}-{manifest_id[:12]}"


def copy_paths(payload: Payload, manifest_id: str) -> tuple[str, str, str]:
    """(live link the service reads, verified copy, staging folder) of one copy. The copy and
    its staging folder are proven to stay inside model_dir's own .versions and .staging (they
    are removed and renamed), the link to be at least two levels deep (it is replaced)."""
    name = copy_dir_name(payload, manifest_id)
    versions, staging = posixpath.join(payload.root, ".versions"), posixpath.join(payload.root, ".staging")
    return (
        deep_path(payload.live, payload.live_variable),
        inside(versions, posixpath.join(versions, name), payload.live_variable),
        inside(staging, posixpath.join(staging, name), payload.live_variable),
    )


def switch_change(payload: Payload, live: str, version: str, current: str | None) -> list:
    """Point the live link at a verified copy; only a link vfleet made (into model_dir) is
    ever replaced: a model_path naming a system symlink such as /bin fails the host."""
    return owned_symlink_change(live, version, current, root=payload.root, what=payload.live_variable, notify=RESTART)


def switch_live_link(ctx: HostContext, payload: Payload, manifest_id: str) -> None:
    """Point the live link at the verified copy now in .versions (atomic rename)."""
    live, version, _ = copy_paths(payload, manifest_id)
    apply(ctx, switch_change(payload, live, version, gather(ctx, {"link": LinkFact(live)})["link"]))


def finish_command(staging: str, version: str, user: str | None) -> str:
    """Hand the verified staging folder to the service user and rename it into .versions.
    Every path after `--`: none is read as an option."""
    owner = f"chown -R -- {q(user + ':')} {q(staging)} 2>/dev/null || true; " if user else ""
    return (
        f"set -e; {owner}chmod -R u=rwX,go=rX -- {q(staging)}; touch -- {q(staging + '/' + VERIFIED_MARK)}; "
        f"mkdir -p -- {q(posixpath.dirname(version))}; rm -rf -- {q(version)}; mv -T -- {q(staging)} {q(version)}"
    )


def space_command(staging: str) -> str:
    """Bytes free on the filesystem that holds staging, then bytes already staged (a resume)."""
    return (
        f"mkdir -p -- {q(staging)} && df -P -B1 -- {q(staging)} | awk 'NR==2 {{print $4}}' && "
        f"du -sb -- {q(staging)} | cut -f1"
    )


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
        raise HostFailed(
            f"not enough disk for the weights in {staging}: needs {_mib(need)} more "
            f"({_mib(total)} in all, {_mib(staged)} already staged), {_mib(free)} free; "
            f"free space there or set model_dir to a larger disk (the live copy is untouched)",
            {"needed_bytes": need, "free_bytes": free, "total_bytes": total},
        )
