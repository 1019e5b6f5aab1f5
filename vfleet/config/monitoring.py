"""The monitoring values of one host, as HostConfig carries them (`cfg.monitoring`), and the
fleet-wide ones every host must agree on.

The defaults are the schema's (vfleet/config/variables.py, merged into the host's vars by the loader);
only what no operator sets (the rate window, "any preemption") is a constant here.

Why fleet-wide: the fleet has one scrape config and one rule file (vfleet/roles/monitoring/),
so the scrape interval, the alert thresholds and Prometheus's port have one value for the
fleet. They used to be read from the first monitoring host only, so a value set on a model
group or on another host was silently dropped. Now each is collected from every host where
the inventory set it (HostConfig.set_in_inventory): one value is used everywhere, two values
are an inventory error naming both hosts. The gateway's three ports stay per host: each gateway
listens on its own (vfleet/roles/monitoring/_exporter.py, scrape.py), so a value may differ from
gateway to gateway, but one set only where no gateway reads it is an error too."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Protocol

__all__ = ["Thresholds", "MonitoringSettings", "FLEET_WIDE", "GATEWAY_LISTENERS", "fleet_settings"]


@dataclass(frozen=True)
class Thresholds:
    """Where each alert fires (see docs/monitoring.md)."""

    kv_cache_usage_max: float
    kv_cache_for: str
    waiting_max: int
    ttft_p95_seconds: float
    stuck_for: str
    down_for: str
    waiting_for: str = "5m"
    ttft_for: str = "5m"
    preemptions_max: int = 0  # any preemption in the window: the KV cache is too small
    window: str = "5m"  # rate/increase/deriv window


@dataclass(frozen=True)
class MonitoringSettings:
    port: int
    scrape_interval: str
    thresholds: Thresholds
    gateway_status_port: int  # nginx stub_status, on 127.0.0.1 only (a gateway host's value)
    gateway_exporter_port: int  # prometheus-nginx-exporter on a gateway host
    gateway_mtail_port: int  # mtail over the gateway's access log (vfleet/roles/monitoring/_mtail.py)

    @classmethod
    def from_vars(cls, v: Mapping[str, Any]) -> "MonitoringSettings":
        """From a host's merged vars (or the schema's defaults)."""
        th = Thresholds(
            kv_cache_usage_max=float(v["monitoring_kv_cache_usage_max"]),
            kv_cache_for=v["monitoring_kv_cache_for"],
            waiting_max=int(v["monitoring_waiting_max"]),
            ttft_p95_seconds=float(v["monitoring_ttft_p95_seconds"]),
            stuck_for=v["monitoring_stuck_for"],
            down_for=v["monitoring_down_for"],
        )
        return cls(
            port=int(v["monitoring_port"]),
            scrape_interval=v["monitoring_scrape_interval"],
            thresholds=th,
            gateway_status_port=int(v["monitoring_gateway_status_port"]),
            gateway_exporter_port=int(v["monitoring_gateway_exporter_port"]),
            gateway_mtail_port=int(v["monitoring_gateway_mtail_port"]),
        )

    @classmethod
    def defaults(cls) -> "MonitoringSettings":
        """The schema's defaults: a fleet without a monitoring host still gets files."""
        from vfleet.config.variables import SCHEMA

        return cls.from_vars(SCHEMA.defaults())


# The fleet-wide variables and where each lives in MonitoringSettings.
FLEET_WIDE: dict[str, Callable[[MonitoringSettings], Any]] = {
    "monitoring_port": lambda m: m.port,
    "monitoring_scrape_interval": lambda m: m.scrape_interval,
    "monitoring_kv_cache_usage_max": lambda m: m.thresholds.kv_cache_usage_max,
    "monitoring_kv_cache_for": lambda m: m.thresholds.kv_cache_for,
    "monitoring_waiting_max": lambda m: m.thresholds.waiting_max,
    "monitoring_ttft_p95_seconds": lambda m: m.thresholds.ttft_p95_seconds,
    "monitoring_stuck_for": lambda m: m.thresholds.stuck_for,
    "monitoring_down_for": lambda m: m.thresholds.down_for,
}
# Ports each gateway listens on itself: per host, read only on the gateways.
GATEWAY_LISTENERS = (
    "monitoring_gateway_status_port",
    "monitoring_gateway_exporter_port",
    "monitoring_gateway_mtail_port",
)
# Where a value is set, as the loader records it ("inv.yaml: line 4: group 'all'", "--set").
_EVERY_HOST = re.compile(r"(group 'all'$|^--set$)")


class _Config(Protocol):
    """What fleet_settings reads of a host (a HostConfig, which imports this module)."""

    name: str
    groups: tuple[str, ...]
    monitoring: MonitoringSettings
    set_in_inventory: frozenset[str]


def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def fleet_settings(
    configs: Iterable[_Config], sources: Mapping[str, Mapping[str, str]], *, path: str, gateway_group: str
) -> tuple[MonitoringSettings | None, list[str]]:
    """The fleet's MonitoringSettings (the fleet-wide values; the ports of the gateways are each
    gateway's) and the problems: a fleet-wide variable set to two values, a gateway port set
    only where no gateway reads it. `configs`: every host's HostConfig; `sources`: host -> var
    -> where it was set. None when there is no host."""
    cfgs = list(configs)
    if not cfgs:
        return None, []
    problems: list[str] = []
    agreed = cfgs[0].monitoring
    for var, get in FLEET_WIDE.items():
        said = [(c.name, get(c.monitoring)) for c in cfgs if var in c.set_in_inventory]
        other = next(((n, v) for n, v in said if v != said[0][1]), None)
        if other is not None:
            problems.append(
                f"{path}: {var} is fleet-wide: {said[0][0]} says {_show(said[0][1])}, {other[0]} says "
                f"{_show(other[1])}; set it once in all.vars or the monitoring group"
            )
        elif said:
            agreed = _with(agreed, var, said[0][1])
    problems += _unread_gateway_ports(cfgs, sources, gateway_group)
    return agreed, problems


def _with(m: MonitoringSettings, var: str, value: Any) -> MonitoringSettings:
    """`m` with one fleet-wide variable changed."""
    if var == "monitoring_port":
        return dataclasses.replace(m, port=value)
    if var == "monitoring_scrape_interval":
        return dataclasses.replace(m, scrape_interval=value)
    field = var.removeprefix("monitoring_")
    return dataclasses.replace(m, thresholds=dataclasses.replace(m.thresholds, **{field: value}))


def _unread_gateway_ports(
    cfgs: list[_Config], sources: Mapping[str, Mapping[str, str]], gateway_group: str
) -> list[str]:
    """A gateway port set by a group or host that holds no gateway: nothing reads it there."""
    out: list[str] = []
    for var in GATEWAY_LISTENERS:
        read = {sources.get(c.name, {}).get(var) for c in cfgs if gateway_group in c.groups}
        for c in cfgs:
            src = sources.get(c.name, {}).get(var, "default")
            if var in c.set_in_inventory and src not in read and not _EVERY_HOST.search(src):
                out.append(
                    f"{src}: {var} is set where no host of group '{gateway_group}' reads it ({c.name}); "
                    f"set it on the gateways (it is the port each gateway listens on)"
                )
                read.add(src)  # one line per place it was set
    return out
