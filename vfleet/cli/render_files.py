"""What a deploy would write on each host, rendered without connecting (like `helm template`).

Why: operators review the exact unit, env file and nginx config before a deploy, and tests
and reviewers read them the same way. The renderers are the ones deploy uses; only what
cannot be known without the host is left to its default: the NCCL decision of preflight
(only the inventory's nccl_env is rendered) and RestartSteps= (given systemd_version).
Secrets are masked: the file shows that a key is set, never what it is.

`render --dest DIR` writes DIR/<host>/<path on the host>. Every target is proven to stay
inside DIR/<host> (the host name one plain folder name, the path a clean absolute one, and the
joined path, symlinks already in DIR resolved, still inside) before the first file is written;
each file is written atomically (a temporary file renamed into place), so a refusal or a crash
leaves no half-written file."""

from __future__ import annotations

import dataclasses
import os
import posixpath
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vfleet.config.fleet import Fleet
from vfleet.config.hostconfig import HostConfig
from vfleet.config.variables import GATEWAY_GROUP, VLLM_GROUP
from vfleet.config.vllm_facts import flag_available
from vfleet.engine.errors import VfleetError
from vfleet.roles.gateway import Backend, render_files
from vfleet.roles.replica import render_member
from vfleet.roles.service import render_service

__all__ = ["RenderedFile", "render_host", "MASK", "dest_targets", "write_rendered"]

MASK = "********"


@dataclass(frozen=True)
class RenderedFile:
    path: str  # where deploy puts it on the host
    mode: str
    text: str


def masked(cfg: HostConfig) -> HostConfig:
    """The config with every secret replaced by MASK (also vllm_env values named like one)."""
    from vfleet.config.variables import SCHEMA
    from vfleet.engine.inventory import masked_vars

    env = masked_vars(dict(cfg.vllm_env), schema=SCHEMA)
    env = {k: (MASK if v == "***" else v) for k, v in env.items()}
    return dataclasses.replace(
        cfg,
        api_key=MASK if cfg.api_key else None,
        hf_token=MASK if cfg.hf_token else None,
        vllm_env=env,
        gateway_tenants=tuple(dataclasses.replace(t, key=MASK) for t in cfg.gateway_tenants),
    )


def render_host(fleet: Fleet, host: str, *, systemd_version: int | None = None) -> list[RenderedFile]:
    """Files deploy would write on this host (a vLLM host, a gateway, or both)."""
    out: list[RenderedFile] = []
    cfg = fleet.config(host)
    replica = fleet.replica_of(host)
    if (
        replica is not None
    ):  # a multi-host replica's member: Ray units, the head's vLLM (vfleet/roles/replica/_ray_render.py)
        cfg.require_serving()
        out += [
            RenderedFile(f.path, f.mode, f.text)
            for f in render_member(
                replica,
                masked(cfg),
                masked(fleet.config(replica.head)),
                flag_available,
                systemd_version=systemd_version,
            )
        ]
    elif VLLM_GROUP in cfg.groups:
        cfg.require_serving()
        r = render_service(masked(cfg), flag_available, systemd_version=systemd_version)
        out += [RenderedFile(r.unit_path, "0644", r.unit_text), RenderedFile(r.env_path, "0600", r.env_text)]
    if GATEWAY_GROUP in cfg.groups:
        backends = [Backend.of(fleet.config(h)) for h in fleet.serving_hosts]
        files = render_files(backends, masked(cfg))
        out += [
            RenderedFile(f.path, f.mode, MASK + "\n" if f.secret and f.relative.endswith(".key") else f.content)
            for f in files.all
        ]
    return out


def _target(root: Path, host: str, path: str) -> Path:
    """Where DEST/<host>/<path> lands, proven inside DEST/<host> (module doc); VfleetError
    naming the host and the path otherwise."""
    where = f"render --dest {root}: host '{host}' file {path!r}"
    if host in ("", ".", "..") or "/" in host or "\0" in host:
        raise VfleetError(f"render --dest {root}: host name '{host}' is not a plain folder name; rename the host")
    if not path.startswith("/") or posixpath.normpath(path) != path or "\0" in path or path == "/":
        raise VfleetError(f"{where} is not a clean absolute path (no '..', '.', '//'): fix the variable that names it")
    folder = (root / host).resolve()
    target = (folder / path.lstrip("/")).resolve()
    if not folder.is_relative_to(root) or not target.is_relative_to(folder) or target == folder:
        raise VfleetError(
            f"{where} would land outside {root / host} (through a symlink in {root}): nothing was written"
        )
    return target


def dest_targets(dest: str | os.PathLike, files: dict[str, list[RenderedFile]]) -> list[tuple[Path, RenderedFile]]:
    """Every (target, file) of a render --dest, all proven before any is written."""
    root = Path(dest).resolve()
    return [(_target(root, host, f.path), f) for host, fs in files.items() for f in fs]


def _write_atomic(target: Path, text: str, mode: str) -> None:
    """A temporary file beside the target, renamed over it: the target is old or new, never half."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, int(mode, 8))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_rendered(dest: str | os.PathLike, files: dict[str, list[RenderedFile]]) -> list[Path]:
    """Write each host's files under DEST/<host>/ (module doc); returns the paths written."""
    targets = dest_targets(dest, files)
    for target, f in targets:
        _write_atomic(target, f.text, f.mode)
    return [t for t, _ in targets]
