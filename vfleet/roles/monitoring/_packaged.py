"""The changes that keep one Debian-packaged daemon running the way vfleet configures it:
Prometheus on the monitoring host (vfleet/roles/monitoring/_deploy.py) and prometheus-nginx-exporter
on a gateway (vfleet/roles/monitoring/_exporter.py) differ in their files, not in this.

Why a restart on a fresh install: the package's postinst starts the daemon at once with the
package's own ARGS (Prometheus on 0.0.0.0:9090, the exporter reading 127.0.0.1:8080), before
vfleet's /etc/default file exists; an ARGS change needs one too (a listen address is not
reloadable). Only config files (Prometheus's) are picked up by a reload."""

from __future__ import annotations

from typing import Sequence

from vfleet.engine.changes import Change, command, service_changes
from vfleet.engine.facts import UnitState
from vfleet.engine.runner import HostFailed

INSTALL = "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends {package}"


def refuse_masked(unit: str, state: UnitState) -> None:
    """A masked unit is the operator's decision: say so, never unmask it behind their back."""
    if state.enabled == "masked":
        raise HostFailed(f"{unit} is masked on this host; `systemctl unmask {unit}` if it should run here")


def daemon_changes(
    package: str,
    unit: str,
    state: UnitState,
    *,
    fresh: bool,
    args: Sequence[Change],
    config: Sequence[Change] = (),
    restart_why: str,
) -> list[Change]:
    """The install (when `fresh`), the ARGS file's and config files' changes (already planned),
    the unit enabled and started, then one restart (fresh install or new ARGS) or one reload
    (config only) of a daemon that was running; [] when nothing differs."""
    changes: list[Change] = []
    if fresh:
        changes.append(command("package", package, "install", INSTALL.format(package=package), timeout=900))
    changes += [*args, *config]
    changes += service_changes(unit, state, enabled=True, started=None if fresh else True)
    running = not fresh and state.active == "active"
    if fresh or (running and args):
        changes.append(command("service", unit, f"restarted ({restart_why})", f"systemctl restart {unit}"))
    elif running and config:
        changes.append(command("service", unit, "reloaded (SIGHUP)", f"systemctl reload {unit}"))
    return changes
