"""Prometheus on a `monitoring` host: Debian's package, vfleet's config, targets and rules
under /etc/prometheus, each checked by promtool before it is kept (a rejected file is put
back at once, so the running Prometheus never loads it), and a reload only on change.

In pyinfra's shape, like vfleet/roles/gateway/_nginx.py: `facts_for` says what to read, `plan` turns the
wanted files and the facts into changes (or none: a second run changes nothing), and
`configure` gathers, plans and applies. Targets follow the inventory: every run rewrites
targets/vllm.json and targets/gateway.json from it, and an unchanged fleet is an unchanged file."""

from __future__ import annotations

import posixpath
from typing import Any, Iterable, Mapping, Sequence

from vfleet.config.hostconfig import HostConfig
from vfleet.config.monitoring import MonitoringSettings
from vfleet.engine.changes import Change, apply, file_change
from vfleet.engine.facts import CommandOk, Fact, FileFact, UnitFact, gather
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext
from vfleet.roles.monitoring._files import MonitoringFile, monitoring_files
from vfleet.roles.monitoring._packaged import daemon_changes, refuse_masked
from vfleet.roles.monitoring._scrape import CONFIG_FILE, RULES_FILE

__all__ = ["PROMETHEUS_DIR", "DEFAULTS_FILE", "UNIT", "facts_for", "defaults_text", "plan", "configure"]

PROMETHEUS_DIR = "/etc/prometheus"
DEFAULTS_FILE = "/etc/default/prometheus"  # Debian's unit reads ARGS from it
UNIT = "prometheus.service"
CONFIG_PATH = posixpath.join(PROMETHEUS_DIR, CONFIG_FILE)


def _path(f: MonitoringFile) -> str:
    return posixpath.join(PROMETHEUS_DIR, f.path)


def _validate(f: MonitoringFile) -> str:
    """Rules on their own; the config with everything it names; targets through the config
    already there (none yet: the config, written next, checks them)."""
    if f.path == RULES_FILE:
        return f"promtool check rules {_path(f)}"
    if f.path == CONFIG_FILE:
        return f"promtool check config {CONFIG_PATH}"
    return f"[ ! -f {CONFIG_PATH} ] || promtool check config {CONFIG_PATH}"


def facts_for(files: Iterable[MonitoringFile], *, diff: bool = False) -> dict[str, Fact]:
    facts: dict[str, Fact] = {
        "prometheus": CommandOk("command -v prometheus"),
        "promtool": CommandOk("command -v promtool"),
        "unit": UnitFact(UNIT),
        "defaults": FileFact(DEFAULTS_FILE, with_content=diff),
    }
    facts.update({f.path: FileFact(_path(f), with_content=diff) for f in files if f.deployed})
    return facts


def defaults_text(settings: MonitoringSettings) -> str:
    return (
        "# Managed by vfleet (vfleet/roles/monitoring/_deploy.py): local edits are overwritten.\n"
        f'ARGS="--web.listen-address=:{settings.port}"\n'
    )


def plan(settings: MonitoringSettings, files: Sequence[MonitoringFile], facts: Mapping[str, Any]) -> list[Change]:
    """Changes that make this host run Prometheus with `files`; [] when it already does."""
    refuse_masked(UNIT, facts["unit"])
    args = file_change(
        DEFAULTS_FILE,
        defaults_text(settings),
        facts["defaults"],
        mode="0644",
        owner="root",
        group="root",
        action="prometheus args",
    )
    written: list[Change] = []
    for f in files:
        if f.deployed:
            written += file_change(
                _path(f),
                f.text,
                facts[f.path],
                mode="0644",
                owner="root",
                group="root",
                action="prometheus config",
                validate=_validate(f),
            )
    return daemon_changes(
        "prometheus",
        UNIT,
        facts["unit"],
        fresh=not (facts["prometheus"] and facts["promtool"]),
        args=args,
        config=written,
        restart_why="new install or listen address",
    )


def configure(ctx: HostContext, vllm_hosts: Sequence[HostConfig], gateways: Sequence[HostConfig] = ()) -> None:
    """Step body for a monitoring host: this host's settings, the fleet's targets."""
    settings: MonitoringSettings = ctx.config.monitoring
    files = monitoring_files(vllm_hosts, settings, gateways)
    facts = gather(ctx, facts_for(files, diff=ctx.diff))
    changes = plan(settings, files, facts)
    if not changes:
        ctx.record("prometheus config", PROMETHEUS_DIR, Status.OK)
    apply(ctx, changes)
