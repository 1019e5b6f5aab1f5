"""GPU alert rules (vfleet/roles/monitoring/_gpu_rules.py) through the real promtool: `check
rules` on the whole rules file, and `test rules` with synthetic series that make each alert
fire and stay quiet: a GPU lost (nvidia-smi failing, then fewer GPUs listed), a one-minute
blip, uncorrected ECC errors growing, a counter reset by a driver reload (no growth), a node
exporter gone, a textfile that stopped being written, a host with no textfile at all."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from tests.unit.test_monitor_rules import promtool
from vfleet.config.monitoring import MonitoringSettings
from vfleet.roles.monitoring._gpu_rules import GPU_ALERTS, gpu_rules
from vfleet.roles.monitoring._metrics import metric_names_for
from vfleet.roles.monitoring._rules import alert_rules, rules_yaml

TH = dataclasses.replace(MonitoringSettings.defaults().thresholds, down_for="2m", window="5m")
RULES = {r["alert"]: r for r in gpu_rules(TH)}
TEXTFILE = "/var/lib/prometheus/node-exporter/vfleet-gpu.prom"


def lbl(host: str, **extra: str) -> dict[str, str]:
    return {"job": "gpu", "instance": f"{host}:9100", "host": host, **extra}


def sel(host: str, **extra: str) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in lbl(host, **extra).items()) + "}"


def fired(alert: str, host: str, value: str, **extra: str) -> dict:
    """An expected alert, its annotations rendered as promtool renders them."""
    rule = RULES[alert]
    labels = lbl(host, **extra)

    def render(text: str) -> str:
        for k, v in labels.items():
            text = text.replace(f"{{{{ $labels.{k} }}}}", v)
        return text.replace("{{ $value }}", value)

    return {
        "exp_labels": {"alertname": alert, "severity": rule["labels"]["severity"], **labels},
        "exp_annotations": {k: render(v) for k, v in rule["annotations"].items()},
    }


def run(tmp_path: Path, series: list[dict], alerts: list[dict]) -> None:
    (tmp_path / "r.yml").write_text(rules_yaml(metric_names_for("0.32.0"), TH))
    test = {
        "rule_files": ["r.yml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": alerts}],
    }
    (tmp_path / "t.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = promtool("test", "rules", "t.yml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_gpu_group_is_in_the_rules_file_and_promtool_accepts_it(tmp_path):
    groups = {g["name"]: g["rules"] for g in alert_rules(metric_names_for("0.32.0"), TH)["groups"]}
    assert [r["alert"] for r in groups["gpu"]] == list(GPU_ALERTS)
    path = tmp_path / "vllm-alerts.yml"
    path.write_text(rules_yaml(metric_names_for("0.32.0"), TH))
    p = promtool("check", "rules", str(path))
    assert p.returncode == 0, p.stdout + p.stderr


def test_gpu_unavailable_fires_for_a_failing_nvidia_smi_or_a_missing_gpu(tmp_path):
    """`lost`: nvidia-smi fails from minute 2 (and lists 7 of 8); `fewer`: it answers but lists
    7 of 8 from minute 2; `blip`: fails for one minute only (down_for is 2m); `ok`: 8 of 8."""
    series = []
    for host, ok, devices in (
        ("lost", "1 1 0x10", "8 8 7x10"),
        ("fewer", "1x12", "8 8 7x10"),
        ("blip", "1 1 1 0 1x8", "8x12"),
        ("ok", "1x12", "8x12"),
    ):
        series += [
            {"series": f"vfleet_gpu_smi_ok{sel(host)}", "values": ok},
            {"series": f"vfleet_gpu_devices{sel(host)}", "values": devices},
            {"series": f"vfleet_gpu_devices_expected{sel(host)}", "values": "8x12"},
        ]
    run(
        tmp_path,
        series,
        [
            {"eval_time": "3m", "alertname": "GpuUnavailable", "exp_alerts": []},  # not for 2m yet
            {
                "eval_time": "5m",
                "alertname": "GpuUnavailable",
                "exp_alerts": [fired("GpuUnavailable", "lost", "0"), fired("GpuUnavailable", "fewer", "7")],
            },
        ],
    )


def test_ecc_errors_growing_fires_on_growth_only(tmp_path):
    """`bad` GPU 3: 0 -> 2 uncorrected errors at minute 3; `steady`: 5 all along (old errors
    are no news); `reloaded`: the driver reloaded at minute 3 and the volatile count went 5 -> 0."""

    def ecc(host: str) -> str:
        return "vfleet_gpu_ecc_uncorrected_errors_total" + sel(host, gpu="3", uuid=f"GPU-{host}")

    series = [
        {"series": ecc("bad"), "values": "0 0 0 2x9"},
        {"series": ecc("steady"), "values": "5x12"},
        {"series": ecc("reloaded"), "values": "5 5 5 0x9"},
    ]
    run(
        tmp_path,
        series,
        [
            {"eval_time": "2m", "alertname": "GpuEccErrorsGrowing", "exp_alerts": []},
            {
                "eval_time": "4m",
                "alertname": "GpuEccErrorsGrowing",
                "exp_alerts": [fired("GpuEccErrorsGrowing", "bad", "2", gpu="3", uuid="GPU-bad")],
            },
            {"eval_time": "10m", "alertname": "GpuEccErrorsGrowing", "exp_alerts": []},  # out of the window
        ],
    )


def test_gpu_metrics_missing_fires_when_the_readings_stop(tmp_path):
    """`gone`: the node exporter stops answering at minute 2; `stale`: the textfile's mtime
    stops moving at minute 2 (timer stopped), `stalebase` the same with the file labelled by its
    base name (node_exporter releases differ); `nofile`: the exporter answers, no readings at
    all; `ok`: fresh readings every minute."""
    fresh_file = {"file": TEXTFILE}
    mtime = "node_textfile_mtime_seconds"
    readings = {  # host -> metric -> values, one a minute
        "gone": {"up": "1 1 0x10", "vfleet_gpu_smi_ok": "1 1"},
        "stale": {"up": "1x12", "vfleet_gpu_smi_ok": "1x12", mtime: "0 60 120x10"},
        "stalebase": {"up": "1x12", "vfleet_gpu_smi_ok": "1x12", mtime: "0 60 120x10"},
        "nofile": {"up": "1x12"},
        "ok": {"up": "1x12", "vfleet_gpu_smi_ok": "1x12", mtime: "0+60x12"},
    }
    base_file = {"file": TEXTFILE.rsplit("/", 1)[1]}

    def file_label(host: str, metric: str) -> dict[str, str]:
        return {} if metric != mtime else base_file if host == "stalebase" else fresh_file

    series = [
        {"series": metric + sel(host, **file_label(host, metric)), "values": values}
        for host, metrics in readings.items()
        for metric, values in metrics.items()
    ]
    run(
        tmp_path,
        series,
        [
            # nofile since minute 0; gone and stale not for 2m yet
            {
                "eval_time": "3m",
                "alertname": "GpuMetricsMissing",
                "exp_alerts": [fired("GpuMetricsMissing", "nofile", "1")],
            },
            {
                "eval_time": "6m",
                "alertname": "GpuMetricsMissing",
                "exp_alerts": [
                    fired("GpuMetricsMissing", "gone", "0"),
                    fired("GpuMetricsMissing", "stale", "240", **fresh_file),
                    fired("GpuMetricsMissing", "stalebase", "240", **base_file),
                    fired("GpuMetricsMissing", "nofile", "1"),
                ],
            },
        ],
    )
