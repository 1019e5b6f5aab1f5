"""Which of the units vfleet would write a host already has, and whether vfleet wrote them.

Why: vfleet writes /etc/systemd/system/<service_name>.service (and <service_name>-ray.service
on a Ray replica's members). /etc/systemd/system comes first in systemd's search path, so a
service_name equal to a distribution unit (`ssh`, `nginx`) would shadow it: the next restart
runs vLLM in place of sshd and the host is lost. So before the first change on a host, each
unit vfleet would write is looked up in every system unit folder; it may exist only as a
regular file in /etc/systemd/system that carries vfleet's header (UNIT_MARKER, the first
line of templates/vllm.service.j2 and ray-node.service.j2). Anything else (a distribution
unit, an alias symlink such as sshd.service, a mask to /dev/null, a generated unit) refuses
that service_name, in preflight (check `service.unit`) and in deploy and service (the host
fails before anything on it changes).

The folders are systemd's system unit search path as `systemd-analyze unit-paths` prints it
on Debian 12 (systemd.unit(5), "System Unit Search Path"; /lib/systemd/system on hosts
without merged /usr).
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from vfleet.config.hostconfig import UNIT_DIR, HostConfig
from vfleet.engine.fact_protocol import Output
from vfleet.engine.facts import gather
from vfleet.engine.runner import HostContext, HostFailed

__all__ = ["UNIT_MARKER", "UNIT_SEARCH_PATH", "UnitFiles", "owned_units", "foreign_files", "refusal", "guard"]

q = shlex.quote
UNIT_MARKER = "# Managed by vfleet ("
UNIT_SEARCH_PATH = (
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/run/systemd/generator.early",
    UNIT_DIR,
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/run/systemd/system.attached",
    "/run/systemd/generator",
    "/usr/local/lib/systemd/system",
    "/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/run/systemd/generator.late",
)
# How far into a file the header is looked for (templates put it on the first line).
MARKER_LINES = 5


def owned_units(cfg: HostConfig) -> tuple[str, ...]:
    """The units vfleet writes on this host: the vLLM unit, and a Ray replica member's node."""
    ray = cfg.replica.name is not None and cfg.replica.backend == "ray"
    return (cfg.unit, cfg.ray_unit) if ray else (cfg.unit,)


@dataclass(frozen=True)
class UnitFiles:
    """Every file named like one of `units` in the unit search path: its kind (file, link,
    other) and whether its first lines carry UNIT_MARKER. Parsed into
    {unit: [{"path", "kind", "vfleet"}]} (an empty list: the host has no such unit); None when
    the command failed. A preflight fact and a deploy fact alike (OutputFact)."""

    name: ClassVar[str] = "unit_files"
    key: ClassVar[str] = "unit_files"
    snapshot_file: ClassVar[str | None] = None
    timeout_s: ClassVar[int | None] = None
    units: tuple[str, ...]

    def command(self) -> str:
        paths = " ".join(q(posixpath.join(d, u)) for u in self.units for d in UNIT_SEARCH_PATH)
        return (
            f"for p in {paths}; do\n"
            '  if [ -L "$p" ]; then k=link; elif [ -f "$p" ]; then k=file; '
            'elif [ -e "$p" ]; then k=other; else continue; fi\n'
            f'  m=no; head -n {MARKER_LINES} -- "$p" 2>/dev/null | grep -qF -- {q(UNIT_MARKER)} && m=yes\n'
            '  printf \'%s %s %s\\n\' "$k" "$m" "$p"\n'
            "done; true"
        )

    def parse(self, output: str) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {u: [] for u in self.units}
        for line in output.splitlines():
            kind, _, rest = line.partition(" ")
            mark, _, path = rest.partition(" ")
            unit = posixpath.basename(path)
            if kind in ("file", "link", "other") and mark in ("yes", "no") and unit in found:
                found[unit].append({"path": path, "kind": kind, "vfleet": mark == "yes"})
        return found

    def process_output(self, out: Output | None) -> dict[str, list[dict[str, Any]]] | None:
        return None if out is None or out.rc != 0 else self.parse(out.stdout)


def foreign_files(found: Mapping[str, list[Mapping[str, Any]]] | None, unit: str) -> list[str]:
    """Paths of `unit` on the host that vfleet did not write: anywhere but UNIT_DIR, or there
    as a link, a non-file, or a file without UNIT_MARKER."""
    out = []
    for f in (found or {}).get(unit) or []:
        ours = posixpath.dirname(f["path"]) == UNIT_DIR and f["kind"] == "file" and f["vfleet"]
        if not ours:
            out.append(str(f["path"]))
    return out


def refusal(cfg: HostConfig, found: Mapping[str, list[Mapping[str, Any]]] | None) -> str | None:
    """One line refusing the host's service_name when a unit vfleet would write is already
    the host's own; None when every such unit is missing or vfleet's."""
    for unit in owned_units(cfg):
        theirs = foreign_files(found, unit)
        if theirs:
            return (
                f"service_name {cfg.service_name}: the host already has {theirs[0]}, which vfleet did not "
                f"write; a vfleet unit named {unit} would shadow it: choose another service_name"
            )
    return None


def guard(ctx: HostContext) -> None:
    """Step body: fail the host, before anything on it changes, when its service_name would
    shadow a unit it already has."""
    cfg: HostConfig = ctx.config
    found = gather(ctx, {"unit_files": UnitFiles(owned_units(cfg))})["unit_files"]
    if found is None:
        raise HostFailed("could not list the host's unit files (the unit search path); see the report")
    why = refusal(cfg, found)
    if why:
        raise HostFailed(why)
