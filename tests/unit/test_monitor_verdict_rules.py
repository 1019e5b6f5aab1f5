"""The verdict alerts (vfleet/roles/monitoring/_verdict_rules.py) judged by the real promtool:
`check rules` accepts them, and `test rules` with synthetic series shows each one firing on
the host whose numbers meet its verdict and staying quiet on the others, under the V1 and the
V0 metric names, with each host's max_num_seqs from LIMITS (the inventory's) or, for hosts
without one, the ceiling of the last hour. Thresholds are the verdict's own constants
(vfleet/clients/verdict.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from vfleet.clients.verdict import AT_LIMIT_SHARE, KV_NEAR_FULL, TEXTS
from vfleet.config.monitoring import MonitoringSettings
from vfleet.roles.monitoring._metrics import metric_names_for
from vfleet.roles.monitoring._verdict_rules import VERDICT_ALERTS, verdict_group

TH = MonitoringSettings.defaults().thresholds
MINUTES = 20
# the inventory's max_num_seqs; mem, pre, seqs, blip, fell, ok set none. The last host has no
# series: its name needs PromQL quoting, which promtool's `check rules` then parses.
LIMITS = {
    "seqsk": 16,
    "tok": 256,
    "queue": 64,
    "steady": 64,
    "low": 64,
    "lowbusy": 64,
    "lowwait": 64,
    'we"ird\\host': 8,
}
AT_WHAT = "its max_num_seqs (or its ceiling of the last 1h where the inventory sets none)"


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
    kind = {r["alert"]: r["labels"]["verdict"] for r in verdict_group(metric_names_for(None), TH, LIMITS)["rules"]}[
        alert
    ]
    return {
        "exp_labels": {"alertname": alert, "severity": "warning", "verdict": kind, **labels(host)},
        "exp_annotations": {"summary": summary, "description": f"{kind}: {TEXTS[kind]}."},
    }


def series(names: dict[str, str]) -> list[dict[str, str]]:
    """One minute a step. `mem`: 4 waiting, KV 95%. `pre`: 2 waiting, KV 50%, preempting.
    `seqs`: 4 waiting, KV 40%, 16 running, its ceiling. `seqsk`: the same at its max_num_seqs 16.
    `tok`: 1 waiting, KV 20%, 3 running of 256 (the token budget, not max_num_seqs). `blip`:
    waiting for two minutes only. `queue`: 64 running, its max_num_seqs, TTFT growing a second a
    minute. `steady`: TTFT as `queue`, a steady 10 running of 64. `fell`: TTFT as `queue` but
    running 30 after a ceiling of 64. `ok`: 10 running, nothing waits, TTFT steady at 0.5 s.
    `low`: 3 running of 64, its GPU busy 12%; `lowbusy`: the same, GPU 97%; `lowwait`: as `low`
    with 2 waiting (KV 20%)."""
    wait, kv, run = names["requests_waiting"], names["kv_cache_usage"], names["requests_running"]
    pre, ttft = names["preemptions"], names["ttft"]
    n = MINUTES
    growing_sum = " ".join(str(30 * m * (m + 1)) for m in range(n + 1))  # 60 answers a minute, minute m: m s each
    rows = {
        "mem": {wait: f"4x{n}", kv: f"0.95x{n}", run: f"40x{n}", pre: f"0x{n}"},
        "pre": {wait: f"2x{n}", kv: f"0.5x{n}", run: f"40x{n}", pre: f"0+3x{n}"},
        "seqs": {wait: f"4x{n}", kv: f"0.4x{n}", run: f"16x{n}", pre: f"0x{n}"},
        "blip": {wait: f"0 0 3 3 0x{n - 3}", kv: f"0.4x{n}", run: f"16x{n}", pre: f"0x{n}"},
        "queue": {
            wait: f"0x{n}",
            kv: f"0.5x{n}",
            run: f"64x{n}",
            pre: f"0x{n}",
            f"{ttft}_sum": growing_sum,
            f"{ttft}_count": f"0+60x{n}",
        },
        "fell": {
            wait: f"0x{n}",
            kv: f"0.5x{n}",
            run: f"64x5 30x{n - 5}",
            pre: f"0x{n}",
            f"{ttft}_sum": growing_sum,
            f"{ttft}_count": f"0+60x{n}",
        },
        "ok": {
            wait: f"0x{n}",
            kv: f"0.3x{n}",
            run: f"10x{n}",
            pre: f"0x{n}",
            f"{ttft}_sum": f"0+30x{n}",
            f"{ttft}_count": f"0+60x{n}",
        },
        "seqsk": {wait: f"4x{n}", kv: f"0.4x{n}", run: f"16x{n}", pre: f"0x{n}"},
        "tok": {wait: f"1x{n}", kv: f"0.2x{n}", run: f"3x{n}", pre: f"0x{n}"},
        "steady": {
            wait: f"0x{n}",
            kv: f"0.3x{n}",
            run: f"10x{n}",
            pre: f"0x{n}",
            f"{ttft}_sum": growing_sum,
            f"{ttft}_count": f"0+60x{n}",
        },
        "low": {wait: f"0x{n}", kv: f"0.05x{n}", run: f"3x{n}", pre: f"0x{n}"},
        "lowbusy": {wait: f"0x{n}", kv: f"0.05x{n}", run: f"3x{n}", pre: f"0x{n}"},
        "lowwait": {wait: f"2x{n}", kv: f"0.2x{n}", run: f"3x{n}", pre: f"0x{n}"},
    }
    gpu = {"low": 0.12, "lowbusy": 0.97, "lowwait": 0.1}  # vfleet_gpu_utilization_ratio of GPU 0
    return [
        {"series": f"{metric}{sel(host)}", "values": values}
        for host, metrics in rows.items()
        for metric, values in metrics.items()
    ] + [
        {
            "series": f'vfleet_gpu_utilization_ratio{{job="gpu", instance="{host}:9100", host="{host}", gpu="0"}}',
            "values": f"{ratio}x{n}",
        }
        for host, ratio in gpu.items()
    ]


def alert_tests() -> list[dict]:
    room, full = f"(< {KV_NEAR_FULL:.0%})", f"(>= {KV_NEAR_FULL:.0%})"
    tests = [
        {
            "eval_time": "8m",
            "alertname": "VllmMemoryBound",
            "exp_alerts": [
                fired(
                    "mem",
                    "VllmMemoryBound",
                    f"4 requests wait on mem while its KV cache is near full {full} or it preempts",
                ),
                fired(
                    "pre",
                    "VllmMemoryBound",
                    f"2 requests wait on pre while its KV cache is near full {full} or it preempts",
                ),
            ],
        },
        {"eval_time": "3m", "alertname": "VllmMemoryBound", "exp_alerts": []},  # not held for 5m yet
        # not `tok`: 1 waits while 3 of 256 run (the scheduler's token budget, not max_num_seqs)
        {
            "eval_time": "8m",
            "alertname": "VllmMaxNumSeqsTooSmall",
            "exp_alerts": [
                fired(
                    h,
                    "VllmMaxNumSeqsTooSmall",
                    f"4 requests wait on {h} while its KV cache has room {room} and it runs at {AT_WHAT}",
                )
                for h in ("seqs", "seqsk")
            ],
        },
        # not `steady`: its TTFT grows as much, but 10 of its 64 run
        {
            "eval_time": "14m",
            "alertname": "VllmQueueing",
            "exp_alerts": [
                fired(
                    "queue",
                    "VllmQueueing",
                    f"queue runs 64 requests, at {AT_WHAT}, and its mean TTFT grew by 25% or more over 5m",
                )
            ],
        },
        {"eval_time": "4m", "alertname": "VllmQueueing", "exp_alerts": []},
        # not `lowbusy` (its GPU is busy), not `lowwait` (requests wait), not `steady` (no GPU readings)
        {
            "eval_time": "8m",
            "alertname": "VllmUnderfed",
            "exp_alerts": [
                fired(
                    "low",
                    "VllmUnderfed",
                    f"low runs 3 requests, under 50% of {AT_WHAT}, and its GPUs are busy under 50% of the time",
                )
            ],
        },
        {"eval_time": "3m", "alertname": "VllmUnderfed", "exp_alerts": []},
    ]
    assert {t["alertname"] for t in tests} == set(VERDICT_ALERTS)  # every alert is tested
    return tests


@pytest.mark.parametrize("version", ["0.32.0", "0.8.5"])
def test_each_verdict_alert_fires_only_where_its_numbers_are(tmp_path, version):
    names = metric_names_for(version)
    rules = {"groups": [verdict_group(names, TH, LIMITS)]}
    (tmp_path / "verdict.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    check = promtool("check", "rules", "verdict.yml", cwd=tmp_path)
    assert check.returncode == 0 and f"SUCCESS: {len(VERDICT_ALERTS)} rules found" in check.stdout, (
        check.stdout + check.stderr
    )
    test = {
        "rule_files": ["verdict.yml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series(names), "alert_rule_test": alert_tests()}],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = promtool("test", "rules", "test.yml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_alerts_use_the_verdicts_texts_and_thresholds():
    rules = {r["alert"]: r for r in verdict_group(metric_names_for("0.32.0"), TH, LIMITS)["rules"]}
    assert list(rules) == list(VERDICT_ALERTS)
    assert rules["VllmMemoryBound"]["annotations"]["description"].startswith("memory-bound: requests wait for KV cache")
    assert f">= {KV_NEAR_FULL:g}" in rules["VllmMemoryBound"]["expr"]
    assert f"< {KV_NEAR_FULL:g}" in rules["VllmMaxNumSeqsTooSmall"]["expr"]
    assert "offset 5m" in rules["VllmQueueing"]["expr"]
    # a comparison per host of the inventory, its name quoted for PromQL
    assert f'host="queue"}} >= {AT_LIMIT_SHARE * 64:g})' in rules["VllmQueueing"]["expr"]
    assert 'host="we\\"ird\\\\host"}' in rules["VllmQueueing"]["expr"]
    assert rules["VllmUnderfed"]["annotations"]["description"].startswith("not enough load reaches the engine: ")
