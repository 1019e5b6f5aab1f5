"""`vfleet render`: print or write what deploy would put on each host, without connecting. The
renderers (and jinja2 under them) are imported when it runs, not for every command's menu."""

from __future__ import annotations

from dataclasses import replace

from invoke import task

from vfleet.cli.common import cli_errors, helptext, load, select
from vfleet.cli.options import TaskOptions
from vfleet.engine.errors import VfleetError
from vfleet.engine.redact import current


@task(
    help=helptext(
        "inventory",
        "limit",
        "set",
        host="Only this host",
        dest="Write DEST/<host>/<path> instead of printing",
        systemd_version="Render for this systemd version (RestartSteps= needs 254; default: omit)",
    ),
    iterable=["set_"],
)
@cli_errors
def render(c, inventory=None, limit=None, set_=None, host=None, dest=None, systemd_version=None):
    """Show exactly what deploy would write on each host, without connecting.

    The vLLM unit, the env file with secrets masked, the nginx config. The NCCL environment is
    the inventory's only: preflight's topology decision needs the host."""
    from vfleet.cli.render_files import render_host, write_rendered
    from vfleet.roles.gateway import GatewayRenderError
    from vfleet.roles.service import RenderError

    opts = TaskOptions.of(locals())
    fleet = load(opts)
    hosts = select(fleet, opts.limit)
    if host is not None:
        if host not in fleet.inventory.hosts:
            raise VfleetError(f"--host {host}: no such host in {fleet.inventory.path}")
        hosts = [fleet.inventory.hosts[host]]
    rendered = {}
    for h in hosts:  # every host rendered (and, with --dest, every target proven) before any output
        try:
            files = render_host(fleet, h.name, systemd_version=int(systemd_version) if systemd_version else None)
        except (RenderError, GatewayRenderError) as exc:
            raise VfleetError(f"host '{h.name}': {exc}") from None
        # what is printed or written is a review copy, not the host's: secrets masked by value too
        rendered[h.name] = [replace(f, text=current().text(f.text)) for f in files]
    if dest:
        for path in write_rendered(dest, rendered):
            print(path)
        return
    for name, files in rendered.items():
        for f in files:
            print(f"# ===== {name}: {f.path} (mode {f.mode})\n{f.text}", end="" if f.text.endswith("\n") else "\n")
