"""Alert rules: metric names per vLLM release, `promtool check rules`, and `promtool test rules`
with synthetic series that make every alert fire (and stay quiet when it should), under the
V1 names, the V0 names, and both at once (a fleet in the middle of an upgrade)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from vfleet.config.monitoring import MonitoringSettings
from vfleet.roles.monitoring._gpu_rules import GPU_ALERTS
from vfleet.roles.monitoring._metrics import fleet_metric_names, metric_names_for
from vfleet.roles.monitoring._rules import ALERTS, GATEWAY_ALERTS, alert_rules, rules_yaml
from vfleet.roles.monitoring._usage_rules import usage_records
from vfleet.roles.monitoring._verdict_rules import VERDICT_ALERTS


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real promtool; a missing one fails the test (never a skip)."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail(
            "promtool not found: `apt-get install -y prometheus` (Debian's package provides it; "
            "the Makefile's APT_PACKAGES should list prometheus)"
        )
    return subprocess.run([exe, *args], capture_output=True, text=True, cwd=cwd, timeout=60)


TH = MonitoringSettings.defaults().thresholds
V1 = metric_names_for("0.32.0")
V0 = metric_names_for("0.8.5")


def test_kv_cache_gauge_was_renamed_in_0_9_2():
    """vllm_facts' table (vllm#18354, #24245: the V1 gauge shipped in 0.9.2)."""
    for v in ("0.5.4", "0.8.5", "0.9.1"):
        assert metric_names_for(v)["kv_cache_usage"] == "vllm:gpu_cache_usage_perc", v
    for v in ("0.9.2", "0.11.0", "0.32.0", None):
        assert metric_names_for(v)["kv_cache_usage"] == "vllm:kv_cache_usage_perc", v
    # counters keep their exported names across the V0 -> V1 change
    assert V0["preemptions"] == V1["preemptions"] == "vllm:num_preemptions_total"
    assert V0["generation_tokens"] == V1["generation_tokens"] == "vllm:generation_tokens_total"


def test_a_mixed_fleet_is_watched_under_both_names_newest_first():
    names = fleet_metric_names(["0.8.5", "0.11.0", "0.11.0"])
    assert names["kv_cache_usage"] == ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    assert names["ttft"] == ("vllm:time_to_first_token_seconds",)
    expr = {r["alert"]: r["expr"] for r in alert_rules(names, TH)["groups"][0]["rules"]}["VllmKvCacheNearFull"]
    assert expr == '((vllm:kv_cache_usage_perc{job="vllm"}) or (vllm:gpu_cache_usage_perc{job="vllm"})) > 0.95'


def test_thresholds_reach_the_expressions():
    th = dataclasses.replace(
        TH, kv_cache_usage_max=0.9, ttft_p95_seconds=1.5, waiting_max=3, stuck_for="4m", down_for="30s"
    )
    rules = {r["alert"]: r for r in alert_rules(V1, th)["groups"][0]["rules"]}
    assert list(rules) == list(ALERTS)
    assert rules["VllmKvCacheNearFull"]["expr"].endswith("> 0.9")
    assert rules["VllmTtftP95High"]["expr"].startswith(
        "histogram_quantile(0.95, sum by (le, host, model, service) (rate(vllm:time_to_first_token_seconds_bucket"
    )
    assert rules["VllmTtftP95High"]["expr"].endswith("> 1.5")
    assert "> 3" in rules["VllmRequestsQueueGrowing"]["expr"]
    assert 'increase(vllm:generation_tokens_total{job="vllm"}[4m]) == 0' in rules["VllmEngineStuck"]["expr"]
    assert rules["VllmEngineStuck"]["for"] == "4m" and rules["VllmHostDown"]["for"] == "30s"


@pytest.mark.parametrize("names", [V1, V0, fleet_metric_names(["0.8.5", "0.32.0"])], ids=["v1", "v0", "mixed"])
def test_promtool_accepts_the_rules(tmp_path, names):
    path = tmp_path / "vllm-alerts.yml"
    path.write_text(rules_yaml(names, TH))
    p = promtool("check", "rules", str(path))
    assert p.returncode == 0, p.stdout + p.stderr
    alerts = len(ALERTS) + len(GATEWAY_ALERTS) + len(GPU_ALERTS) + len(VERDICT_ALERTS)
    assert f"SUCCESS: {alerts + len(usage_records(TH))} rules found" in p.stdout


def _series(host: str) -> str:
    return (
        f'{{job="vllm", instance="{host}:8000", host="{host}", model="m", service="vllm", model_name="m", engine="0"}}'
    )


def _alert_labels(host: str, alert: str, severity: str) -> dict[str, str]:
    return {
        "alertname": alert,
        "severity": severity,
        "job": "vllm",
        "instance": f"{host}:8000",
        "host": host,
        "model": "m",
        "service": "vllm",
        "model_name": "m",
        "engine": "0",
    }


def _fired(host: str, alert: str, severity: str, summary: str, labels: dict | None = None) -> dict:
    """An expected alert: its labels, the summary as promtool renders it, the description of
    the rule with this host's labels filled in."""
    rule = {r["alert"]: r for r in alert_rules(V1, TH)["groups"][0]["rules"]}[alert]
    desc = (
        rule["annotations"]["description"]
        .replace("{{ $labels.instance }}", f"{host}:8000")
        .replace("{{ $labels.host }}", host)
    )
    return {
        "exp_labels": labels or _alert_labels(host, alert, severity),
        "exp_annotations": {"summary": summary, "description": desc},
    }


def _cases(names: dict[str, str]) -> dict:
    """Synthetic series (1m steps) for two hosts: `bad` misbehaves, `ok` does not."""
    kv, wait, run = names["kv_cache_usage"], names["requests_waiting"], names["requests_running"]
    pre, gen, ttft = names["preemptions"], names["generation_tokens"], names["ttft"]
    bad, ok = _series("bad"), _series("ok")
    series = [
        {"series": f"up{bad}", "values": "1 1 0x10"},
        {"series": f"up{ok}", "values": "1x12"},
        {"series": f"{kv}{bad}", "values": "0.5 0.99x12"},  # full from minute 1
        {"series": f"{kv}{ok}", "values": "0.5x12"},
        {"series": f"{wait}{bad}", "values": "0+5x12"},  # 0, 5, 10, ... growing
        {"series": f"{wait}{ok}", "values": "20x12"},  # many, but not growing
        {"series": f"{pre}{bad}", "values": "0 0 0 7x10"},  # 7 preemptions at minute 3
        {"series": f"{pre}{ok}", "values": "0x12"},
        {"series": f"{run}{bad}", "values": "3x12"},  # runs requests ...
        {"series": f"{gen}{bad}", "values": "100 200 300 300x10"},  # ... but stops generating at minute 2
        {"series": f"{run}{ok}", "values": "2x12"},
        {"series": f"{gen}{ok}", "values": "0+100x12"},
    ]
    # TTFT histogram: `bad` answers in 2.5-5 s, `ok` under 0.5 s (cumulative buckets per minute)
    for host, slow in (("bad", True), ("ok", False)):
        for le in ("0.5", "2.5", "5.0", "+Inf"):
            grows = le in ("5.0", "+Inf") if slow else True
            lbl = _series(host)[:-1] + f', le="{le}"}}'
            series.append({"series": f"{ttft}_bucket{lbl}", "values": "0+10x12" if grows else "0x12"})
    alerts = [
        {
            "eval_time": "3m",
            "alertname": "VllmHostDown",
            "exp_alerts": [_fired("bad", "VllmHostDown", "critical", "vLLM host bad is down")],
        },
        {"eval_time": "1m", "alertname": "VllmHostDown", "exp_alerts": []},  # not down for 1m yet
        {
            "eval_time": "7m",
            "alertname": "VllmKvCacheNearFull",
            "exp_alerts": [_fired("bad", "VllmKvCacheNearFull", "warning", "KV cache of bad is 99% full")],
        },
        {"eval_time": "4m", "alertname": "VllmKvCacheNearFull", "exp_alerts": []},  # full, not for 5m yet
        {
            "eval_time": "10m",
            "alertname": "VllmRequestsQueueGrowing",
            "exp_alerts": [
                _fired("bad", "VllmRequestsQueueGrowing", "warning", "50 requests waiting on bad, and growing")
            ],
        },
        {
            "eval_time": "4m",
            "alertname": "VllmPreemptions",
            "exp_alerts": [_fired("bad", "VllmPreemptions", "warning", "bad preempted 7 requests in the last 5m")],
        },
        {"eval_time": "2m", "alertname": "VllmPreemptions", "exp_alerts": []},
        {
            "eval_time": "10m",
            "alertname": "VllmTtftP95High",
            "exp_alerts": [
                _fired(
                    "bad",
                    "VllmTtftP95High",
                    "warning",
                    "TTFT p95 of bad is 4.875s",
                    {
                        "alertname": "VllmTtftP95High",
                        "severity": "warning",
                        "host": "bad",
                        "model": "m",
                        "service": "vllm",
                    },
                )
            ],
        },
        {
            "eval_time": "8m",
            "alertname": "VllmEngineStuck",
            "exp_alerts": [
                _fired("bad", "VllmEngineStuck", "critical", "vLLM on bad runs 3 requests but generates no token")
            ],
        },
        {"eval_time": "3m", "alertname": "VllmEngineStuck", "exp_alerts": []},  # tokens still moved in [1m, 3m]
    ]
    assert {a["alertname"] for a in alerts} == set(ALERTS)  # every alert is tested
    return {"interval": "1m", "input_series": series, "alert_rule_test": alerts}


@pytest.mark.parametrize("version", ["0.32.0", "0.8.5"])
def test_every_alert_fires_on_synthetic_series(tmp_path, version):
    names = metric_names_for(version)
    (tmp_path / "vllm-alerts.yml").write_text(rules_yaml(names, TH))
    test = {"rule_files": ["vllm-alerts.yml"], "evaluation_interval": "1m", "tests": [_cases(names)]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = promtool("test", "rules", "test.yml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


def test_mixed_fleet_rules_fire_for_the_old_name_and_count_a_host_exporting_both_once(tmp_path):
    names = fleet_metric_names(["0.8.5", "0.11.0"])
    (tmp_path / "r.yml").write_text(rules_yaml(names, TH))
    old, both = _series("old"), _series("both")
    test = {
        "rule_files": ["r.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"vllm:gpu_cache_usage_perc{old}", "values": "0.99x10"},
                    # 0.9-0.10 exported the deprecated name beside the new one: one alert, the new name's value
                    {"series": f"vllm:kv_cache_usage_perc{both}", "values": "0.97x10"},
                    {"series": f"vllm:gpu_cache_usage_perc{both}", "values": "0.96x10"},
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "6m",
                        "alertname": "VllmKvCacheNearFull",
                        "exp_alerts": [
                            _fired("both", "VllmKvCacheNearFull", "warning", "KV cache of both is 97% full"),
                            _fired("old", "VllmKvCacheNearFull", "warning", "KV cache of old is 99% full"),
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "t.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = promtool("test", "rules", "t.yml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


def _gw(host: str) -> str:
    return f'{{job="gateway", instance="{host}:9113", host="{host}"}}'


def test_gateway_down_fires_when_the_exporter_or_nginx_is_gone(tmp_path):
    """`gone`: the exporter stops answering at minute 2 (up 0, nginx_up stale); `stopped`:
    the exporter answers but nginx does not (nginx_up 0 from minute 2); `ok` stays up;
    `blip` loses one scrape, shorter than down_for (1m), and never fires."""
    th = dataclasses.replace(TH, down_for="2m")
    (tmp_path / "r.yml").write_text(rules_yaml(V1, th))
    assert [r["alert"] for r in alert_rules(V1, th)["groups"][1]["rules"]] == list(GATEWAY_ALERTS)
    series = [
        {"series": f"up{_gw('gone')}", "values": "1 1 0x10"},
        {"series": f"nginx_up{_gw('gone')}", "values": "1 1"},
        {"series": f"up{_gw('stopped')}", "values": "1x12"},
        {"series": f"nginx_up{_gw('stopped')}", "values": "1 1 0x10"},
        {"series": f"up{_gw('ok')}", "values": "1x12"},
        {"series": f"nginx_up{_gw('ok')}", "values": "1x12"},
        {"series": f"up{_gw('blip')}", "values": "1 1 1 0 1x8"},
        {"series": f"nginx_up{_gw('blip')}", "values": "1 1 1 _ 1x8"},
    ]

    def fired(host: str) -> dict:
        return {
            "exp_labels": {
                "alertname": "GatewayDown",
                "severity": "critical",
                "job": "gateway",
                "instance": f"{host}:9113",
                "host": host,
            },
            "exp_annotations": {
                "summary": f"nginx gateway {host} is down",
                "description": alert_rules(V1, th)["groups"][1]["rules"][0]["annotations"]["description"].replace(
                    "{{ $labels.instance }}", f"{host}:9113"
                ),
            },
        }

    alerts = [
        {"eval_time": "3m", "alertname": "GatewayDown", "exp_alerts": []},  # down since 2m, not for 2m yet
        {"eval_time": "5m", "alertname": "GatewayDown", "exp_alerts": [fired("gone"), fired("stopped")]},
    ]
    test = {
        "rule_files": ["r.yml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": alerts}],
    }
    (tmp_path / "t.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = promtool("test", "rules", "t.yml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
