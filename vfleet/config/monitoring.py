"""The monitoring values of one host, as HostConfig carries them (`cfg.monitoring`).

The defaults are the schema's (vfleet/config/variables.py, merged into the host's vars by the loader);
only what no operator sets (the rate window, "any preemption") is a constant here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["Thresholds", "MonitoringSettings"]


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
    preemptions_max: int = 0         # any preemption in the window: the KV cache is too small
    window: str = "5m"               # rate/increase/deriv window


@dataclass(frozen=True)
class MonitoringSettings:
    port: int
    scrape_interval: str
    thresholds: Thresholds
    gateway_status_port: int     # nginx stub_status, on 127.0.0.1 only (a gateway host's value)
    gateway_exporter_port: int   # prometheus-nginx-exporter on a gateway host

    @classmethod
    def from_vars(cls, v: Mapping[str, Any]) -> "MonitoringSettings":
        """From a host's merged vars (or the schema's defaults)."""
        th = Thresholds(kv_cache_usage_max=float(v["monitoring_kv_cache_usage_max"]),
                        kv_cache_for=v["monitoring_kv_cache_for"],
                        waiting_max=int(v["monitoring_waiting_max"]),
                        ttft_p95_seconds=float(v["monitoring_ttft_p95_seconds"]),
                        stuck_for=v["monitoring_stuck_for"], down_for=v["monitoring_down_for"])
        return cls(port=int(v["monitoring_port"]), scrape_interval=v["monitoring_scrape_interval"],
                   thresholds=th, gateway_status_port=int(v["monitoring_gateway_status_port"]),
                   gateway_exporter_port=int(v["monitoring_gateway_exporter_port"]))

    @classmethod
    def defaults(cls) -> "MonitoringSettings":
        """The schema's defaults: a fleet without a monitoring host still gets files."""
        from vfleet.config.variables import SCHEMA

        return cls.from_vars(SCHEMA.defaults())
