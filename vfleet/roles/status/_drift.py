"""Drift: what `vfleet deploy --check` would change on a vLLM host, from what the status round
trip already brought back, without a second one.

The cheapest honest method: the host returns sha256 of its unit file and of its environment
file (NCCL_ lines left out), its systemd version, and where its venv and model links point;
here the same renderers deploy uses (vfleet/roles/service/_render.py) render the wanted files
for that systemd version and their hashes are compared, the links with the inventory's venv
and, where the controller holds the model folder and its manifest, the weights' copy.

What it does not cover (docs/status.md): the NCCL_ variables of the environment file (deploy
takes them from preflight's topology, which status does not gather), the service user, a
venv's contents (only which one is linked), a model given as HOST:/path (its manifest is on
that host), the Ray units of a multi-host replica, and the gateways' nginx config."""

from __future__ import annotations

import functools
import hashlib
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.config.vllm_facts import flag_available
from vfleet.engine.errors import VfleetError
from vfleet.engine.pathrules import is_host_source
from vfleet.roles.model_source import MANIFEST_NAME, hub, manifest_id
from vfleet.roles.service import RenderError, render_env, render_unit
from vfleet.roles.status._parsers import FileHashes
from vfleet.roles.weights import copy_name

__all__ = ["Drift", "Wanted", "wanted", "drift", "without_nccl", "controller_manifest_id"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def without_nccl(env_text: str) -> str:
    """The environment file as the probe hashes it (`grep -v ^NCCL_`)."""
    return "".join(line for line in env_text.splitlines(keepends=True) if not line.startswith("NCCL_"))


@functools.lru_cache(maxsize=64)
def controller_manifest_id(source: str) -> str | None:
    """The manifest id (sha256 of MANIFEST.sha256) of a model folder on the controller, as
    the weights role names its copies; None when there is no manifest there (the weights
    role makes one on its next run) or the source is on a host. Cached for one round of
    status (hosts share a source); build_round clears it so --watch sees a new copy."""
    path = Path(source).expanduser() / MANIFEST_NAME
    try:
        return manifest_id(path.parent) if path.is_file() else None
    except OSError:
        return None


def _wanted_manifest(cfg: HostConfig) -> tuple[str | None, str]:
    """(the manifest id the host's copy should have, or None and why not). A hub source is
    read from the cache only (`vfleet status` never downloads, hub.never_download) and only
    through an export deploy already made: status hashes nothing."""
    source = cfg.model_source
    if hub.is_hub(source):
        try:
            export = hub.find_export(hub.parse(str(source), cfg.model_revision))
        except VfleetError as e:
            return None, str(e)
        if export is None:
            return None, (
                f"{source} is not exported on this controller yet; `vfleet weights --check` resolves and verifies it"
            )
        return controller_manifest_id(str(export.folder)), ""
    manifest = controller_manifest_id(source) if _on_controller(source) else None
    return manifest, "no manifest on the controller to compare with"


def _on_controller(source: str | None) -> bool:
    """A model_source that names a folder here, not HOST:/path (the weights role's reading)."""
    return bool(source) and not is_host_source(source)


@dataclass(frozen=True)
class Wanted:
    """The hashes deploy would write for one systemd version, or why they cannot be made."""

    unit_sha: str | None
    env_sha: str | None
    error: str | None = None


def wanted(cfg: HostConfig, systemd_version: int | None) -> Wanted:
    """The unit and environment file deploy would write, hashed (never shown: the
    environment holds the API key)."""
    try:
        unit = render_unit(cfg, flag_available, systemd_version=systemd_version)
        env = render_env(cfg)
    except (RenderError, VfleetError) as exc:
        return Wanted(None, None, f"cannot render: {exc}")
    return Wanted(_sha(unit), _sha(without_nccl(env)))


@dataclass(frozen=True)
class Drift:
    """What differs (`changed`), and what could not be compared (`unknown`, with why)."""

    changed: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """What differs, else `none` (`none*` when part could not be compared: the JSON says which)."""
        if self.changed:
            return ",".join(self.changed)
        return "none*" if self.unknown else "none"

    def to_dict(self) -> dict[str, Any]:
        return {"changed": list(self.changed), "unknown": list(self.unknown)}


def _file(name: str, host_sha: str, want: str | None, changed: list[str], unknown: list[str]) -> None:
    if want is None:
        return
    if host_sha == "unreadable":
        unknown.append(f"{name}: not readable by the connecting user")
    elif host_sha != want:  # 'missing' too
        changed.append(name)


def drift(
    cfg: HostConfig, want: Wanted, hashes: FileHashes | None, enabled: str | None, venv: str | None, weights: str | None
) -> Drift:
    """Compare the host's answers with what deploy wants (module doc)."""
    changed: list[str] = []
    unknown: list[str] = []
    if want.error:
        unknown.append(want.error)
    if cfg.replica.name is not None:
        unknown.append("unit, env: a replica member's units (Ray) are not compared")
    elif hashes is None:
        unknown.append("files: no answer")
    else:
        _file("unit", hashes.unit, want.unit_sha, changed, unknown)
        _file("env", hashes.env, want.env_sha, changed, unknown)
    if enabled not in (None, "", "enabled"):
        changed.append("enabled")
    if cfg.vllm_version and posixpath.basename((venv or "").rstrip("/")) != posixpath.basename(cfg.venv_path):
        changed.append("venv")
    manifest, why = _wanted_manifest(cfg)
    if manifest is None:
        unknown.append(f"weights: {why}")
    elif posixpath.basename((weights or "").rstrip("/")) != copy_name(cfg, manifest):
        changed.append("weights")
    return Drift(tuple(changed), tuple(unknown))
