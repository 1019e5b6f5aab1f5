"""`vfleet monitor`: Prometheus scrape config, file_sd targets, alert rules and a Grafana
dashboard for the fleet (`--dest`), and Prometheus itself on the monitoring group plus
prometheus-nginx-exporter and mtail (per-tenant request metrics from the access log) on each
gateway and prometheus-node-exporter with vfleet's GPU
readings on each vLLM host (`--deploy`), kept in step with the inventory. The
monitoring role is imported when it runs."""

from __future__ import annotations

from pathlib import Path

from invoke import task

from vfleet.cli.common import cli_errors, finish, helptext, load, make_play, select
from vfleet.cli.options import TaskOptions
from vfleet.config.monitoring import MonitoringSettings
from vfleet.config.variables import GATEWAY_GROUP, MONITORING_GROUP, VLLM_GROUP
from vfleet.engine.errors import VfleetError

CHANGING = (
    "inventory",
    "limit",
    "set",
    "forks",
    "report",
    "check",
    "diff",
    "no_host_key_checking",
    "connect_timeout",
    "command_timeout",
    "verbose",
)


@task(
    help=helptext(
        *CHANGING,
        dest="Write prometheus.yml, targets/, rules/ and grafana/ into this folder",
        deploy=f"Install and configure Prometheus on the '{MONITORING_GROUP}' group and "
        f"prometheus-nginx-exporter and mtail on the '{GATEWAY_GROUP}' group, "
        f"prometheus-node-exporter with GPU readings on the '{VLLM_GROUP}' group "
        "(--limit picks among those hosts)",
    ),
    iterable=["set_"],
)
@cli_errors
def monitor(
    c,
    inventory=None,
    limit=None,
    set_=None,
    dest=None,
    deploy=False,
    forks=10,
    report=None,
    check=False,
    diff=False,
    no_host_key_checking=False,
    connect_timeout=None,
    command_timeout=None,
    verbose=False,
):
    """Monitoring of every vLLM host: scrape config, alert rules, a Grafana dashboard.

    The scrape config has file_sd targets, the alert rules the metric names of each host's vLLM
    version; --deploy runs Prometheus on the monitoring group (promtool-checked, reloaded only
    on change), the nginx exporter on each gateway and the GPU readings on each vLLM host."""
    from vfleet.roles.monitoring import (
        deploy as monitoring_deploy,
        exporter,
        gpu_exporter,
        monitoring_files,
        mtail,
        write_tree,
    )

    opts = TaskOptions.of(locals())
    if not dest and not deploy:
        raise VfleetError(
            "nothing to do: give --dest DIR (write the files) and/or --deploy "
            f"(Prometheus on the '{MONITORING_GROUP}' group)"
        )
    fleet = load(opts)
    vllm = fleet.configs_of(fleet.vllm_hosts)
    if not vllm:
        raise VfleetError(f"{fleet.inventory.path}: no host in group '{VLLM_GROUP}': nothing to monitor")
    gateways = fleet.configs_of(fleet.gateways)
    if dest:
        # the fleet-wide values, wherever the inventory set them (vfleet/config/monitoring.py)
        settings = fleet.monitoring or MonitoringSettings.defaults()
        for path in write_tree(Path(dest), monitoring_files(vllm, settings, gateways)):
            print(path)
    if deploy:
        monitors = [h.name for h in select(fleet, opts.limit, MONITORING_GROUP)]
        if not monitors:
            raise VfleetError(
                f"--deploy: no host of group '{MONITORING_GROUP}' in {fleet.inventory.path}"
                + (f" matches --limit {opts.limit}" if opts.limit else "")
            )
        exporters = [h.name for h in select(fleet, opts.limit, GATEWAY_GROUP)]
        gpu_hosts = [h.name for h in select(fleet, opts.limit, VLLM_GROUP)]
        hosts = [h for h in select(fleet, opts.limit) if h.name in {*monitors, *exporters, *gpu_hosts}]
        play = make_play("monitor", fleet, hosts, opts)
        # exporters first: a new target is answered by the time Prometheus reads it
        play.run_step("gateway exporter", exporter.configure, hosts=exporters)
        play.run_step("gateway mtail", mtail.configure, hosts=exporters)
        play.run_step("gpu exporter", gpu_exporter.configure, hosts=gpu_hosts)
        play.run_step("monitoring", lambda ctx: monitoring_deploy.configure(ctx, vllm, gateways), hosts=monitors)
        finish(play, opts)
