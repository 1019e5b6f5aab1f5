"""The monitoring variables of one host, typed once (the schema in roles/variables.py has
already checked them and merged the defaults into the host's vars).

Why not HostConfig: these values only matter on the monitoring group and to the rules; a
small view of their own keeps HostConfig about serving. The lead may fold them in later."""
from __future__ import annotations

from dataclasses import dataclass

from fleet.inventory import Host

__all__ = ["Thresholds", "MonitoringSettings"]


@dataclass(frozen=True)
class Thresholds:
    """Where each alert fires. Defaults are the schema's; see README 'Monitoring'."""

    kv_cache_usage_max: float = 0.95
    kv_cache_for: str = "5m"
    waiting_max: int = 10
    waiting_for: str = "5m"
    preemptions_max: int = 0         # any preemption in the window: the KV cache is too small
    ttft_p95_seconds: float = 2.0
    ttft_for: str = "5m"
    stuck_for: str = "2m"
    down_for: str = "1m"
    window: str = "5m"               # rate/increase/deriv window


@dataclass(frozen=True)
class MonitoringSettings:
    port: int = 9090
    scrape_interval: str = "15s"
    thresholds: Thresholds = Thresholds()

    @classmethod
    def from_host(cls, host: Host | None) -> "MonitoringSettings":
        """A monitoring host's settings (None: the schema's defaults)."""
        if host is None:
            return cls()
        v = host.vars
        th = Thresholds(kv_cache_usage_max=float(v["monitoring_kv_cache_usage_max"]),
                        kv_cache_for=v["monitoring_kv_cache_for"],
                        waiting_max=int(v["monitoring_waiting_max"]),
                        ttft_p95_seconds=float(v["monitoring_ttft_p95_seconds"]),
                        stuck_for=v["monitoring_stuck_for"], down_for=v["monitoring_down_for"])
        return cls(port=int(v["monitoring_port"]), scrape_interval=v["monitoring_scrape_interval"],
                   thresholds=th)
