"""prometheus.yml and the file_sd targets of the vLLM hosts and of the gateways.

Why file_sd: Prometheus re-reads a targets file on change without a reload, so keeping the
targets in step with the inventory is one atomic file write; the scrape config itself only
changes with the monitoring settings. Paths are relative to prometheus.yml (Prometheus and
promtool resolve them against the config's folder), so the layout `--dest` writes is the
one deployed under /etc/prometheus and what the tests validate is what runs.

The gateways are scraped through prometheus-nginx-exporter on each gateway host (job
`gateway`), which reads nginx's stub_status on that host's loopback (vfleet/roles/gateway/_render.py):
nginx itself exposes no Prometheus text, and its public listener answers /metrics with 404.

Each gateway's access log is scraped through mtail on that host (job `gateway_usage`, port
monitoring_gateway_mtail_port): per-tenant request counts and request times
(vfleet/roles/monitoring/_mtail.py).

The GPUs of each vLLM host are scraped through Debian's prometheus-node-exporter on that
host (job `gpu`, port 9100, the exporter's registered default), whose textfile collector
serves what vfleet/roles/monitoring/_gpu_textfile.py writes from nvidia-smi."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

import yaml

from vfleet.config.hostconfig import HostConfig, hostport
from vfleet.config.monitoring import MonitoringSettings

__all__ = [
    "VLLM_JOB",
    "GATEWAY_JOB",
    "GATEWAY_USAGE_JOB",
    "GPU_JOB",
    "TARGETS_FILE",
    "GATEWAY_TARGETS_FILE",
    "GATEWAY_USAGE_TARGETS_FILE",
    "GPU_TARGETS_FILE",
    "RULES_FILE",
    "CONFIG_FILE",
    "NODE_EXPORTER_PORT",
    "target_groups",
    "gateway_target_groups",
    "gateway_usage_target_groups",
    "gpu_target_groups",
    "targets_json",
    "prometheus_config",
    "config_yaml",
]

VLLM_JOB = "vllm"
GATEWAY_JOB = "gateway"
GATEWAY_USAGE_JOB = "gateway_usage"
GPU_JOB = "gpu"
NODE_EXPORTER_PORT = 9100  # prometheus-node-exporter's default (Prometheus's port allocation list)
CONFIG_FILE = "prometheus.yml"
TARGETS_FILE = "targets/vllm.json"
GATEWAY_TARGETS_FILE = "targets/gateway.json"
GATEWAY_USAGE_TARGETS_FILE = "targets/gateway-usage.json"
GPU_TARGETS_FILE = "targets/gpu.json"
RULES_FILE = "rules/vllm-alerts.yml"


def target_groups(hosts: Iterable[HostConfig]) -> list[dict[str, Any]]:
    """One file_sd group per vLLM host, labelled with what an alert should name."""
    groups = []
    for cfg in sorted(hosts, key=lambda c: c.name):
        labels = {"host": cfg.name, "service": cfg.service_name}
        if cfg.served_model_name:
            labels["model"] = cfg.served_model_name
        if cfg.vllm_version:
            labels["vllm_version"] = cfg.vllm_version
        groups.append({"targets": [hostport(cfg.address, cfg.vllm_port)], "labels": labels})
    return groups


def _per_gateway(gateways: Iterable[HostConfig], port: Callable[[HostConfig], int]) -> list[dict[str, Any]]:
    return [
        {"targets": [hostport(cfg.address, port(cfg))], "labels": {"host": cfg.name}}
        for cfg in sorted(gateways, key=lambda c: c.name)
    ]


def gateway_target_groups(gateways: Iterable[HostConfig]) -> list[dict[str, Any]]:
    """One file_sd group per gateway host: its exporter, labelled with the host's name."""
    return _per_gateway(gateways, lambda cfg: cfg.monitoring.gateway_exporter_port)


def gateway_usage_target_groups(gateways: Iterable[HostConfig]) -> list[dict[str, Any]]:
    """One file_sd group per gateway host: its mtail, labelled with the host's name."""
    return _per_gateway(gateways, lambda cfg: cfg.monitoring.gateway_mtail_port)


def gpu_target_groups(hosts: Iterable[HostConfig]) -> list[dict[str, Any]]:
    """One file_sd group per vLLM host: its node exporter, labelled with the host's name (the
    label the vllm job's series carry, so a panel or a rule joins the two on `host`)."""
    return [
        {"targets": [hostport(cfg.address, NODE_EXPORTER_PORT)], "labels": {"host": cfg.name}}
        for cfg in sorted(hosts, key=lambda c: c.name)
    ]


def targets_json(groups: list[dict[str, Any]]) -> str:
    """Stable text (sorted keys, fixed indent): an unchanged fleet is an unchanged file."""
    return json.dumps(groups, indent=2, sort_keys=True) + "\n"


def prometheus_config(settings: MonitoringSettings) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": settings.scrape_interval, "evaluation_interval": settings.scrape_interval},
        "rule_files": [RULES_FILE],
        "scrape_configs": [
            {
                "job_name": VLLM_JOB,
                "metrics_path": "/metrics",
                "file_sd_configs": [{"files": [TARGETS_FILE], "refresh_interval": "1m"}],
            },
            {
                "job_name": GATEWAY_JOB,
                "metrics_path": "/metrics",
                "file_sd_configs": [{"files": [GATEWAY_TARGETS_FILE], "refresh_interval": "1m"}],
            },
            {
                "job_name": GATEWAY_USAGE_JOB,
                "metrics_path": "/metrics",
                "file_sd_configs": [{"files": [GATEWAY_USAGE_TARGETS_FILE], "refresh_interval": "1m"}],
            },
            {
                "job_name": GPU_JOB,
                "metrics_path": "/metrics",
                "file_sd_configs": [{"files": [GPU_TARGETS_FILE], "refresh_interval": "1m"}],
            },
            {"job_name": "prometheus", "static_configs": [{"targets": [f"localhost:{settings.port}"]}]},
        ],
    }


def config_yaml(settings: MonitoringSettings) -> str:
    head = "# Managed by vfleet (vfleet/roles/monitoring/_scrape.py): local edits are overwritten.\n"
    return head + yaml.safe_dump(prometheus_config(settings), sort_keys=False)
