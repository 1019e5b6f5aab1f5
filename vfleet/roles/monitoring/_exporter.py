"""prometheus-nginx-exporter on a gateway host: Debian's package, configured through the
/etc/default file its unit reads ARGS from, started and enabled; restarted only when ARGS
change (the exporter has no reload).

Why here (`vfleet monitor --deploy`) and not in the gateway step: the exporter only matters
to a fleet that is monitored, and `vfleet monitor` is where the gateways' scrape targets
are written, so targets and exporters follow the inventory in one run; the gateway step
keeps to nginx (it renders the loopback stub_status server the exporter reads, which costs
nothing when nothing reads it).

In pyinfra's shape, like vfleet/roles/monitoring/_deploy.py: `facts_for` says what to read, `plan`
turns the settings and the facts into changes (or none), `configure` gathers, plans, applies."""

from __future__ import annotations

import shlex
from typing import Any, Mapping

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.changes import Change, apply, file_change
from vfleet.engine.facts import CommandOk, Fact, FileFact, UnitFact, gather
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed
from vfleet.roles.gateway import STATUS_PATH, GatewayRenderError, status_listen
from vfleet.roles.monitoring._packaged import daemon_changes, refuse_masked

__all__ = ["PACKAGE", "DEFAULTS_FILE", "UNIT", "RETRIES", "facts_for", "defaults_text", "plan", "configure"]

PACKAGE = "prometheus-nginx-exporter"
DEFAULTS_FILE = f"/etc/default/{PACKAGE}"  # EnvironmentFile= of Debian's unit: ARGS
UNIT = f"{PACKAGE}.service"
# The exporter exits at start when nginx does not answer (0.11: "Could not create Nginx
# Client"), and systemd's Restart=on-failure gives up after 5 quick failures: retry every
# 5 s instead (about 58 days), so an exporter started before nginx waits for it. Once it
# runs, nginx going away is reported as nginx_up 0, not an exit.
RETRIES = 1_000_000
RETRY_INTERVAL = "5s"


def facts_for(*, diff: bool = False) -> dict[str, Fact]:
    return {
        "exporter": CommandOk(f"command -v {PACKAGE}"),
        "unit": UnitFact(UNIT),
        "defaults": FileFact(DEFAULTS_FILE, with_content=diff),
    }


def defaults_text(cfg: HostConfig) -> str:
    """ARGS for this gateway: read stub_status on loopback, listen on the exporter port."""
    args = [
        f"-nginx.scrape-uri=http://{status_listen(cfg)}{STATUS_PATH}",
        f"-web.listen-address=:{cfg.monitoring.gateway_exporter_port}",
        f"-nginx.retries={RETRIES}",
        f"-nginx.retry-interval={RETRY_INTERVAL}",
    ]
    # the unit's $ARGS is split at whitespace, quotes inside it unread: each part is one plain word
    return (
        "# Managed by vfleet (vfleet/roles/monitoring/_exporter.py): local edits are overwritten.\n"
        f"ARGS={shlex.quote(' '.join(args))}\n"
    )


def plan(cfg: HostConfig, facts: Mapping[str, Any]) -> list[Change]:
    """Changes that make this gateway run the exporter with vfleet's ARGS; [] when it does."""
    refuse_masked(UNIT, facts["unit"])
    try:
        text = defaults_text(cfg)
    except GatewayRenderError as exc:
        raise HostFailed(str(exc)) from None
    args = file_change(
        DEFAULTS_FILE, text, facts["defaults"], mode="0644", owner="root", group="root", action="exporter args"
    )
    return daemon_changes(
        PACKAGE, UNIT, facts["unit"], fresh=not facts["exporter"], args=args, restart_why="new install or ARGS"
    )


def configure(ctx: HostContext) -> None:
    """Step body for a gateway host of a monitored fleet."""
    cfg: HostConfig = ctx.config
    changes = plan(cfg, gather(ctx, facts_for(diff=ctx.diff)))
    if not changes:
        ctx.record("exporter args", DEFAULTS_FILE, Status.OK)
    apply(ctx, changes)
