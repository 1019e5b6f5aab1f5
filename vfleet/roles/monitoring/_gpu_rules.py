"""Alert rules for the GPUs of the vLLM hosts (job `gpu`: node_exporter's textfile collector
serving what vfleet/roles/monitoring/_gpu_textfile.py writes from nvidia-smi).

Why these three:
- GpuUnavailable: a GPU that has fallen off the bus (Xid 79) or a driver gone shows as
  nvidia-smi failing (`Unable to determine the device handle for GPU ...: GPU is lost`,
  `NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver`) or as fewer
  GPUs listed than the host should have (the inventory's count, written beside the readings
  as vfleet_gpu_devices_expected). vLLM on that host is dead or about to be.
- GpuEccErrorsGrowing: uncorrected ECC errors since the driver loaded went up within the
  window; the counter resets when the driver reloads, which increase() reads as no growth.
- GpuMetricsMissing: without it, the two above go quiet exactly when they are needed: the
  node exporter down, the textfile never written, or written too long ago (the timer stopped,
  or the producer hangs: a lost GPU can make nvidia-smi hang; the producer's own timeout
  covers that, this covers the producer)."""

from __future__ import annotations

from typing import Any

from vfleet.config.monitoring import Thresholds
from vfleet.roles.monitoring._gpu_textfile import TEXTFILE_NAME
from vfleet.roles.monitoring._scrape import GPU_JOB

__all__ = ["GPU_ALERTS", "STALE_AFTER_SECONDS", "gpu_rules"]

GPU_ALERTS = ("GpuUnavailable", "GpuEccErrorsGrowing", "GpuMetricsMissing")
# The producer runs every 15 s (gpu_exporter.INTERVAL): four missed runs is not a blip.
STALE_AFTER_SECONDS = 60


def gpu_rules(th: Thresholds) -> list[dict[str, Any]]:
    """The alerts of GPU_ALERTS, in that order, each labelled with the target's host."""
    sel = f'{{job="{GPU_JOB}"}}'
    # node_exporter's textfile collector labels the file with its full path in some releases and
    # its base name in others: match both
    textfile = f'{{job="{GPU_JOB}", file=~"(.*/)?{TEXTFILE_NAME.replace(".", "[.]")}"}}'
    unavailable = f"(vfleet_gpu_smi_ok{sel} == 0) or (vfleet_gpu_devices{sel} < vfleet_gpu_devices_expected{sel})"
    missing = (
        f"(up{sel} == 0) or (time() - node_textfile_mtime_seconds{textfile} > {STALE_AFTER_SECONDS}) "
        f"or ((up{sel} == 1) unless on (instance) vfleet_gpu_smi_ok{sel})"
    )
    return [
        {
            "alert": "GpuUnavailable",
            "expr": unavailable,
            "for": th.down_for,
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "GPUs of {{ $labels.host }}: nvidia-smi fails or lists fewer than expected",
                "description": "nvidia-smi failed, hung, or could not reach a GPU (value 0), or lists {{ $value }} "
                "GPU(s), fewer than the inventory says: a GPU fell off the bus (Xid 79 in "
                "`journalctl -k`) or the driver is gone. vLLM on this host cannot serve; "
                "drain it and reboot or service the GPU.",
            },
        },
        {
            "alert": "GpuEccErrorsGrowing",
            "expr": f"increase(vfleet_gpu_ecc_uncorrected_errors_total{sel}[{th.window}]) > 0",
            "for": "0m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "GPU {{ $labels.gpu }} of {{ $labels.host }}: uncorrected ECC errors growing",
                "description": "{{ $value }} more uncorrected ECC errors within " + th.window + " on GPU "
                "{{ $labels.gpu }} ({{ $labels.uuid }}): results on it may be wrong and the "
                "driver may retire memory; check `nvidia-smi -q -d ECC,ROW_REMAPPER` and plan "
                "to drain the host.",
            },
        },
        {
            "alert": "GpuMetricsMissing",
            "expr": missing,
            "for": th.down_for,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "No fresh GPU readings from {{ $labels.host }}",
                "description": "The node exporter on {{ $labels.instance }} cannot be scraped, or its "
                f"{TEXTFILE_NAME} is absent or older than {STALE_AFTER_SECONDS}s: "
                "GpuUnavailable and GpuEccErrorsGrowing cannot fire for this host. Check "
                "`systemctl status prometheus-node-exporter vfleet-gpu-metrics.timer`.",
            },
        },
    ]
