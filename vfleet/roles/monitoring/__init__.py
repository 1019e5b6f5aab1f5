"""Monitoring of the fleet: Prometheus scrape config with file_sd targets for every vLLM host,
alert rules with the metric names of the installed vLLM version, a Grafana dashboard, and the
plan that keeps Prometheus on the `monitoring` group in step with the inventory.

One module per job: metrics (names per version), settings (the monitoring variables),
scrape (prometheus.yml + targets), rules (alerts), dashboard (Grafana JSON), files (what
`vfleet monitor --dest` writes), deploy (facts, plan, apply on a monitoring host), exporter
(the nginx exporter on a gateway), gpu_exporter (node_exporter and the GPU producer on a vLLM
host), gpu_textfile (the producer itself, copied to the host), gpu_rules (the GPU alerts)."""

from __future__ import annotations

from . import _deploy as deploy, _exporter as exporter, _gpu_exporter as gpu_exporter, _mtail as mtail
from ._files import monitoring_files, write_tree

__all__ = ["deploy", "exporter", "gpu_exporter", "monitoring_files", "mtail", "write_tree"]
