"""`vfleet render`: print or write what deploy would put on each host, without connecting. The
renderers (and jinja2 under them) are imported when it runs, not for every command's menu."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from invoke import task

from vfleet.engine.errors import VfleetError
from vfleet.engine.redact import current
from vfleet.cli.common import cli_errors, helptext, load, select
from vfleet.cli.options import TaskOptions


def _write(dest: Path, host: str, path: str, text: str, mode: str) -> Path:
    """DEST/<host>/<path on the host>, written atomically (never a half-written file)."""
    target = dest / host / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, int(mode, 8))
    os.replace(tmp, target)
    return target


@task(help=helptext("inventory", "limit", "set", host="Only this host",
                    dest="Write DEST/<host>/<path> instead of printing",
                    systemd_version="Render for this systemd version (RestartSteps= needs 254; default: omit)"),
      iterable=["set_"])
@cli_errors
def render(c, inventory=None, limit=None, set_=None, host=None, dest=None, systemd_version=None):
    """Show exactly what deploy would write on each host, without connecting.

    The vLLM unit, the env file with secrets masked, the nginx config. The NCCL environment is
    the inventory's only: preflight's topology decision needs the host."""
    from vfleet.roles.gateway.render import GatewayRenderError
    from vfleet.cli.render_files import render_host
    from vfleet.roles.service.render import RenderError

    opts = TaskOptions.of(locals())
    fleet = load(opts)
    hosts = select(fleet, opts.limit)
    if host is not None:
        if host not in fleet.inventory.hosts:
            raise VfleetError(f"--host {host}: no such host in {fleet.inventory.path}")
        hosts = [fleet.inventory.hosts[host]]
    for h in hosts:
        try:
            files = render_host(fleet, h.name, systemd_version=int(systemd_version) if systemd_version else None)
        except (RenderError, GatewayRenderError) as exc:
            raise VfleetError(f"host '{h.name}': {exc}") from None
        for f in files:
            text = current().text(f.text)   # also what --dest writes: a review copy, not the host's
            if dest:
                print(f"{_write(Path(dest), h.name, f.path, text, f.mode)}")
            else:
                print(f"# ===== {h.name}: {f.path} (mode {f.mode})\n{text}", end="" if text.endswith("\n") else "\n")
