"""mtail on a gateway host: Debian's package, running vfleet's program
(vfleet_gateway.mtail, package data) over the gateway's JSON access log, so Prometheus gets
per-tenant request counts and request times (job `gateway_usage`, _scrape.py).

Why mtail: Debian packages it; it tails a file (the access log the gateway writes anyway), so
no code of ours sits in the request path and a stopped mtail costs the gateway nothing; it
follows logrotate's renames by itself; and its program is a few lines tested here with the real
binary (`mtail --one_shot`). Why Debian's own unit (mtail.service): it already runs as the
`mtail` user (in group adm, which may read nginx's 0640 logs) with --progs /etc/mtail and reads
LOGS, HOST and PORT from /etc/default/mtail, the file vfleet writes; ExecCondition keeps it
idle while LOGS is empty, which is how the package leaves it.

The same shape as _exporter.py: `facts_for`, `plan` (the defaults file and the program, each
checked: the program by `mtail --compile_only` before it is kept), `configure`."""

from __future__ import annotations

import posixpath
from importlib import resources
from typing import Any, Mapping

from vfleet.config.access_log import ACCESS_LOG
from vfleet.config.hostconfig import HostConfig
from vfleet.engine.changes import Change, apply, command, file_change
from vfleet.engine.facts import CommandOk, Fact, FileFact, UnitFact, gather
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext
from vfleet.roles.monitoring._packaged import daemon_changes, refuse_masked

__all__ = [
    "PACKAGE",
    "DEFAULTS_FILE",
    "UNIT",
    "PROGRAM_NAME",
    "PROGRAM_PATH",
    "program_text",
    "facts_for",
    "defaults_text",
    "plan",
    "configure",
]

PACKAGE = "mtail"
DEFAULTS_FILE = "/etc/default/mtail"  # EnvironmentFile= of Debian's unit: LOGS, HOST, PORT, EXTRA_ARGS
UNIT = "mtail.service"
# Debian's nginx writes its logs 0640 www-data:adm; Debian's mtail runs as user mtail, which
# reads them as a member of adm (the group Debian gives log readers). Found on the lab: without
# it mtail logged "permission denied" every 250 ms and counted nothing.
LOG_READER, LOG_GROUP = "mtail", "adm"
PROGRAMS_DIR = "/etc/mtail"  # the unit's --progs
PROGRAM_NAME = "vfleet_gateway.mtail"
PROGRAM_PATH = posixpath.join(PROGRAMS_DIR, PROGRAM_NAME)
# --port 0: the check must not collide with the running mtail's listener
CHECK = f"mtail --compile_only --port 0 --logtostderr --progs {PROGRAMS_DIR}"


def program_text() -> str:
    return resources.files("vfleet.roles.monitoring").joinpath(PROGRAM_NAME).read_text()


def facts_for(*, diff: bool = False) -> dict[str, Fact]:
    return {
        "mtail": CommandOk(f"command -v {PACKAGE}"),
        "unit": UnitFact(UNIT),
        "defaults": FileFact(DEFAULTS_FILE, with_content=diff),
        "program": FileFact(PROGRAM_PATH, with_content=diff),
        "reads_logs": CommandOk(f"id -nG {LOG_READER} 2>/dev/null | grep -qw {LOG_GROUP}"),
    }


def defaults_text(cfg: HostConfig) -> str:
    """The access log to tail and the port to serve /metrics on (every address, as the nginx
    exporter: the monitoring host scrapes it)."""
    return (
        "# Managed by vfleet (vfleet/roles/monitoring/_mtail.py): local edits are overwritten.\n"
        f"LOGS={ACCESS_LOG}\n"
        f"PORT={cfg.monitoring.gateway_mtail_port}\n"
        "HOST=\n"  # mtail's own default (every address), not the unit's "::" (no IPv6 here? no bind)
        "EXTRA_ARGS=\n"
    )


def plan(cfg: HostConfig, facts: Mapping[str, Any]) -> list[Change]:
    """Changes that make this gateway run mtail with vfleet's program; [] when it does."""
    refuse_masked(UNIT, facts["unit"])
    args = file_change(
        DEFAULTS_FILE,
        defaults_text(cfg),
        facts["defaults"],
        mode="0644",
        owner="root",
        group="root",
        action="mtail args",
    )
    if not facts["reads_logs"]:  # a new group applies to a new process: restarted with the args
        args.append(
            command(
                "user", LOG_READER, f"joins {LOG_GROUP} (reads nginx's logs)", f"usermod -a -G {LOG_GROUP} {LOG_READER}"
            )
        )
    program = file_change(
        PROGRAM_PATH,
        program_text(),
        facts["program"],
        mode="0644",
        owner="root",
        group="root",
        action="mtail program",
        validate=CHECK,
    )
    return daemon_changes(
        PACKAGE,
        UNIT,
        facts["unit"],
        fresh=not facts["mtail"],
        args=args,
        config=program,
        restart_why="new install or LOGS/PORT",
    )


def configure(ctx: HostContext) -> None:
    """Step body for a gateway host of a monitored fleet."""
    changes = plan(ctx.config, gather(ctx, facts_for(diff=ctx.diff)))
    if not changes:
        ctx.record("mtail", PROGRAM_PATH, Status.OK)
    apply(ctx, changes)
