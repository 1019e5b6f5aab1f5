"""The verdict alerts (vfleet/roles/monitoring/verdict_rules.py) judged by the real promtool:
`check rules` accepts them, and `test rules` with synthetic series shows each one firing on
the host whose numbers meet its verdict and staying quiet on the others, under the V1 and the
V0 metric names. Thresholds are the verdict's own constants (vfleet/clients/verdict.py)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from vfleet.clients.verdict import KV_NEAR_FULL, TEXTS
from vfleet.config.monitoring import MonitoringSettings
from vfleet.roles.monitoring.metrics import metric_names_for
from vfleet.roles.monitoring.verdict_rules import VERDICT_ALERTS, verdict_group

TH = MonitoringSettings.defaults().thresholds
MINUTES = 20


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool not found: `apt-get install -y prometheus` (make setup installs it)")
    return subprocess.run([exe, *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def labels(host: str) -> dict[str, str]:
    return {"job": "vllm", "instance": f"{host}:8000", "host": host, "model": "m", "service": "vllm"}


def sel(host: str) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in labels(host).items()) + "}"


def fired(host: str, alert: str, summary: str) -> dict:
    kind = {r["alert"]: r["labels"]["verdict"] for r in verdict_group(metric_names_for(None), TH)["rules"]}[alert]
    return {"exp_labels": {"alertname": alert, "severity": "warning", "verdict": kind, **labels(host)},
            "exp_annotations": {"summary": summary, "description": f"{kind}: {TEXTS[kind]}."}}


def series(names: dict[str, str]) -> list[dict[str, str]]:
    """One minute a step. `mem`: 4 waiting, KV 95%. `pre`: 2 waiting, KV 50%, preempting.
    `seqs`: 4 waiting, KV 40%. `blip`: waiting for two minutes only. `queue`: 64 running, its
    ceiling, TTFT growing a second a minute. `fell`: TTFT as `queue` but running 30 after a
    ceiling of 64. `ok`: 10 running, nothing waits, TTFT steady at 0.5 s."""
    wait, kv, run = names["requests_waiting"], names["kv_cache_usage"], names["requests_running"]
    pre, ttft = names["preemptions"], names["ttft"]
    n = MINUTES
    growing_sum = " ".join(str(30 * m * (m + 1)) for m in range(n + 1))   # 60 answers a minute, minute m: m s each
    rows = {
        "mem": {wait: f"4x{n}", kv: f"0.95x{n}", run: f"40x{n}", pre: f"0x{n}"},
        "pre": {wait: f"2x{n}", kv: f"0.5x{n}", run: f"40x{n}", pre: f"0+3x{n}"},
        "seqs": {wait: f"4x{n}", kv: f"0.4x{n}", run: f"16x{n}", pre: f"0x{n}"},
        "blip": {wait: f"0 0 3 3 0x{n - 3}", kv: f"0.4x{n}", run: f"16x{n}", pre: f"0x{n}"},
        "queue": {wait: f"0x{n}", kv: f"0.5x{n}", run: f"64x{n}", pre: f"0x{n}",
                  f"{ttft}_sum": growing_sum, f"{ttft}_count": f"0+60x{n}"},
        "fell": {wait: f"0x{n}", kv: f"0.5x{n}", run: f"64x5 30x{n - 5}", pre: f"0x{n}",
                 f"{ttft}_sum": growing_sum, f"{ttft}_count": f"0+60x{n}"},
        "ok": {wait: f"0x{n}", kv: f"0.3x{n}", run: f"10x{n}", pre: f"0x{n}",
               f"{ttft}_sum": f"0+30x{n}", f"{ttft}_count": f"0+60x{n}"},
    }
    return [{"series": f"{metric}{sel(host)}", "values": values}
            for host, metrics in rows.items() for metric, values in metrics.items()]


def alert_tests() -> list[dict]:
    room, full = f"(< {KV_NEAR_FULL:.0%})", f"(>= {KV_NEAR_FULL:.0%})"
    tests = [
        {"eval_time": "8m", "alertname": "VllmMemoryBound", "exp_alerts": [
            fired("mem", "VllmMemoryBound", f"4 requests wait on mem while its KV cache is near full {full} or it preempts"),
            fired("pre", "VllmMemoryBound", f"2 requests wait on pre while its KV cache is near full {full} or it preempts")]},
        {"eval_time": "3m", "alertname": "VllmMemoryBound", "exp_alerts": []},      # not held for 5m yet
        {"eval_time": "8m", "alertname": "VllmMaxNumSeqsTooSmall", "exp_alerts": [
            fired("seqs", "VllmMaxNumSeqsTooSmall", f"4 requests wait on seqs while its KV cache has room {room}")]},
        {"eval_time": "14m", "alertname": "VllmQueueing", "exp_alerts": [
            fired("queue", "VllmQueueing", "queue runs 64 requests, its ceiling of the last 1h, and its mean TTFT "
                                           "grew by 25% or more over 5m")]},
        {"eval_time": "4m", "alertname": "VllmQueueing", "exp_alerts": []},
    ]
    assert {t["alertname"] for t in tests} == set(VERDICT_ALERTS)   # every alert is tested
    return tests


@pytest.mark.parametrize("version", ["0.32.0", "0.8.5"])
def test_each_verdict_alert_fires_only_where_its_numbers_are(tmp_path, version):
    names = metric_names_for(version)
    rules = {"groups": [verdict_group(names, TH)]}
    (tmp_path / "verdict.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    check = promtool("check", "rules", "verdict.yml", cwd=tmp_path)
    assert check.returncode == 0 and f"SUCCESS: {len(VERDICT_ALERTS)} rules found" in check.stdout, \
        check.stdout + check.stderr
    test = {"rule_files": ["verdict.yml"], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series(names), "alert_rule_test": alert_tests()}]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = promtool("test", "rules", "test.yml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_alerts_use_the_verdicts_texts_and_thresholds():
    rules = {r["alert"]: r for r in verdict_group(metric_names_for("0.32.0"), TH)["rules"]}
    assert list(rules) == list(VERDICT_ALERTS)
    assert rules["VllmMemoryBound"]["annotations"]["description"].startswith("memory-bound: requests wait for KV cache")
    assert f">= {KV_NEAR_FULL:g}" in rules["VllmMemoryBound"]["expr"]
    assert f"< {KV_NEAR_FULL:g}" in rules["VllmMaxNumSeqsTooSmall"]["expr"]
    assert "offset 5m" in rules["VllmQueueing"]["expr"]
