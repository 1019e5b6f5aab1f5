"""What `vfleet monitor` produces, as data: the files (relative paths), from the inventory's
vLLM hosts, its gateways and the monitoring settings; and writing them into a folder atomically.

Why one function for --dest and --deploy: the files reviewed (and validated by promtool in
the tests) are byte for byte the ones deployed."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from vfleet.config.hostconfig import HostConfig
from vfleet.config.monitoring import MonitoringSettings
from vfleet.roles.monitoring._dashboard import dashboard_json
from vfleet.roles.monitoring._metrics import fleet_metric_names
from vfleet.roles.monitoring._rules import rules_yaml
from vfleet.roles.monitoring._scrape import (
    CONFIG_FILE,
    GATEWAY_TARGETS_FILE,
    GATEWAY_USAGE_TARGETS_FILE,
    GPU_TARGETS_FILE,
    RULES_FILE,
    TARGETS_FILE,
    config_yaml,
    gateway_target_groups,
    gateway_usage_target_groups,
    gpu_target_groups,
    target_groups,
    targets_json,
)

__all__ = ["DASHBOARD_FILE", "MonitoringFile", "monitoring_files", "write_tree"]

DASHBOARD_FILE = "grafana/vllm-dashboard.json"


@dataclass(frozen=True)
class MonitoringFile:
    path: str  # relative to the Prometheus config folder (or --dest)
    text: str
    deployed: bool  # False: only written to --dest (no Grafana on the monitoring host)


def monitoring_files(
    vllm_hosts: Iterable[HostConfig], settings: MonitoringSettings, gateways: Iterable[HostConfig] = ()
) -> list[MonitoringFile]:
    """Targets first, config last: the order a host must take them in (the config names the
    others, and promtool checks them through it). A fleet without gateways gets an empty
    gateway targets file (and gateway-usage targets file): the config names them either way."""
    hosts, gateways = list(vllm_hosts), list(gateways)
    names = fleet_metric_names(c.vllm_version for c in hosts)
    limits = {c.name: c.max_num_seqs for c in hosts if c.max_num_seqs}  # the verdict alerts compare per host
    return [
        MonitoringFile(TARGETS_FILE, targets_json(target_groups(hosts)), True),
        MonitoringFile(GATEWAY_TARGETS_FILE, targets_json(gateway_target_groups(gateways)), True),
        MonitoringFile(GATEWAY_USAGE_TARGETS_FILE, targets_json(gateway_usage_target_groups(gateways)), True),
        MonitoringFile(GPU_TARGETS_FILE, targets_json(gpu_target_groups(hosts)), True),
        MonitoringFile(RULES_FILE, rules_yaml(names, settings.thresholds, limits), True),
        MonitoringFile(CONFIG_FILE, config_yaml(settings), True),
        MonitoringFile(DASHBOARD_FILE, dashboard_json(names, settings.thresholds.window), False),
    ]


def write_tree(dest: Path, files: Iterable[MonitoringFile]) -> list[Path]:
    """Each file to a temp name in its folder, then renamed over: a reader (or a Prometheus
    pointed at DEST) never sees a half-written file."""
    out = []
    for f in files:
        target = Path(dest) / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(f.text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
        out.append(target)
    return out
