"""`vfleet monitor --dest`: the files from an inventory, checked by the real promtool (config,
file_sd targets and rules together), written atomically; the dashboard's queries parse."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.unit.test_monitor_rules import promtool
from vfleet.config.hostconfig import HostConfig
from vfleet.config.variables import SCHEMA
from vfleet.engine.inventory import load_inventory
from vfleet.roles.monitoring import _files as files_mod
from vfleet.roles.monitoring._dashboard import panel_queries
from vfleet.roles.monitoring._files import MonitoringFile, monitoring_files, write_tree
from vfleet.roles.monitoring._metrics import fleet_metric_names

DATA = Path(__file__).parent / "data" / "monitor"
FLEET = DATA / "fleet.yaml"
REPO = Path(__file__).resolve().parents[2]


def fleet():
    inv = load_inventory(FLEET, {}, schema=SCHEMA)
    vllm = [HostConfig.from_host(h) for h in inv.hosts.values() if "vllm" in h.groups]
    return inv, vllm, HostConfig.from_host(inv.hosts["mon01"]).monitoring


def gateways(inv):
    return [HostConfig.from_host(h) for h in inv.hosts.values() if "gateways" in h.groups]


def vfleet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vfleet.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_targets_name_every_vllm_host_with_its_labels():
    _, vllm, settings = fleet()
    by_name = {f.path: f for f in monitoring_files(vllm, settings)}
    groups = json.loads(by_name["targets/vllm.json"].text)
    assert groups == [
        {
            "targets": ["10.20.0.11:8001"],
            "labels": {"host": "gpu01", "model": "qwen-7b", "service": "vllm", "vllm_version": "0.8.5"},
        },
        {
            "targets": ["10.20.0.12:8000"],
            "labels": {"host": "gpu02", "model": "qwen2.5-7b", "service": "vllm", "vllm_version": "0.11.0"},
        },
    ]


def test_gateway_targets_name_each_gateways_exporter():
    inv, vllm, settings = fleet()
    by_name = {f.path: f for f in monitoring_files(vllm, settings, gateways(inv))}
    assert json.loads(by_name["targets/gateway.json"].text) == [
        {"targets": ["10.20.0.2:9200"], "labels": {"host": "gw01"}},
        {"targets": ["10.20.0.4:9113"], "labels": {"host": "gw02"}},
    ]
    config = yaml.safe_load(by_name["prometheus.yml"].text)
    job = {j["job_name"]: j for j in config["scrape_configs"]}["gateway"]
    assert job["file_sd_configs"] == [{"files": ["targets/gateway.json"], "refresh_interval": "1m"}]
    # a fleet without gateways still gets the file the config names, empty
    assert {f.path: f for f in monitoring_files(vllm, settings)}["targets/gateway.json"].text == "[]\n"


def test_gpu_targets_name_each_vllm_hosts_node_exporter():
    _, vllm, settings = fleet()
    files = {f.path: f.text for f in monitoring_files(vllm, settings)}
    assert json.loads(files["targets/gpu.json"]) == [
        {"targets": [f"10.20.0.1{i}:9100"], "labels": {"host": f"gpu0{i}"}} for i in (1, 2)
    ]
    jobs = {j["job_name"]: j.get("file_sd_configs") for j in yaml.safe_load(files["prometheus.yml"])["scrape_configs"]}
    assert jobs["gpu"] == [{"files": ["targets/gpu.json"], "refresh_interval": "1m"}]


def test_monitoring_group_variables_reach_config_and_rules():
    _, vllm, settings = fleet()
    assert settings.thresholds.ttft_p95_seconds == 1.5 and settings.thresholds.down_for == "30s"
    by_name = {f.path: f for f in monitoring_files(vllm, settings)}
    rules = {r["alert"]: r for r in yaml.safe_load(by_name["rules/vllm-alerts.yml"].text)["groups"][0]["rules"]}
    assert rules["VllmTtftP95High"]["expr"].endswith("> 1.5") and rules["VllmHostDown"]["for"] == "30s"
    # the fleet is mid-upgrade: both names of the KV cache gauge are watched
    assert "vllm:gpu_cache_usage_perc" in rules["VllmKvCacheNearFull"]["expr"]
    assert "vllm:kv_cache_usage_perc" in rules["VllmKvCacheNearFull"]["expr"]
    config = yaml.safe_load(by_name["prometheus.yml"].text)
    assert config["rule_files"] == ["rules/vllm-alerts.yml"]
    assert config["scrape_configs"][0]["file_sd_configs"] == [
        {"files": ["targets/vllm.json"], "refresh_interval": "1m"}
    ]
    assert [f.path for f in monitoring_files(vllm, settings) if not f.deployed] == ["grafana/vllm-dashboard.json"]


def test_cli_writes_a_tree_promtool_accepts(tmp_path):
    p = vfleet("monitor", "--inventory", str(FLEET), "--dest", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    written = sorted(str(q.relative_to(tmp_path)) for q in tmp_path.rglob("*") if q.is_file())
    assert written == [
        "grafana/vllm-dashboard.json",
        "prometheus.yml",
        "rules/vllm-alerts.yml",
        "targets/gateway-usage.json",
        "targets/gateway.json",
        "targets/gpu.json",
        "targets/vllm.json",
    ]
    assert "10.20.0.2:9200" in (tmp_path / "targets" / "gateway.json").read_text()
    assert "10.20.0.2:3903" in (tmp_path / "targets" / "gateway-usage.json").read_text()  # mtail's default port
    c = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert c.returncode == 0, c.stdout + c.stderr
    assert "SUCCESS: 1 rule files found" in c.stdout + c.stderr
    # promtool reads the targets through the config: a broken targets file is caught
    for name in ("vllm.json", "gateway.json", "gpu.json"):
        good = (tmp_path / "targets" / name).read_text()
        (tmp_path / "targets" / name).write_text('[{"targets": 5}]')
        bad = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
        assert bad.returncode != 0 and f"targets/{name}" in bad.stdout + bad.stderr
        (tmp_path / "targets" / name).write_text(good)


def test_cli_says_what_is_missing():
    p = vfleet("monitor", "--inventory", str(FLEET))
    assert p.returncode == 2 and "--dest" in p.stderr and "--deploy" in p.stderr
    p = vfleet("monitor", "--inventory", str(DATA / "no-monitoring.yaml"), "--deploy")
    assert p.returncode == 2 and "no host of group 'monitoring'" in p.stderr, p.stderr
    p = vfleet(
        "monitor", "--inventory", str(DATA.parent / "inventories" / "good" / "ranges.yaml"), "--dest", "/nonexistent"
    )
    assert p.returncode == 2 and "no host in group 'vllm'" in p.stderr, p.stderr


def test_write_tree_replaces_whole_files_and_leaves_no_temp(tmp_path):
    write_tree(tmp_path, [MonitoringFile("rules/a.yml", "old\n", True)])
    write_tree(tmp_path, [MonitoringFile("rules/a.yml", "new\n", True)])
    assert (tmp_path / "rules" / "a.yml").read_text() == "new\n"
    assert os.listdir(tmp_path / "rules") == ["a.yml"]


def test_write_tree_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    write_tree(tmp_path, [MonitoringFile("prometheus.yml", "old\n", True)])

    def fail(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(files_mod.os, "replace", fail)
    with pytest.raises(OSError):
        write_tree(tmp_path, [MonitoringFile("prometheus.yml", "new\n", True)])
    assert (tmp_path / "prometheus.yml").read_text() == "old\n"
    assert os.listdir(tmp_path) == ["prometheus.yml"]


def test_dashboard_queries_parse_and_use_the_fleet_names(tmp_path):
    _, vllm, settings = fleet()
    names = fleet_metric_names(c.vllm_version for c in vllm)
    dash = json.loads({f.path: f for f in monitoring_files(vllm, settings)}["grafana/vllm-dashboard.json"].text)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert exprs == [q for _, _, q in panel_queries(names)] and len(exprs) == 15
    assert exprs[-2:] == ["tenant:vfleet_gateway_requests:rate5m", "tenant:vfleet_gateway_requests_429:rate5m"]
    assert 'avg by (host) (vfleet_gpu_utilization_ratio{job="gpu", host=~"$host"})' in exprs
    assert 'sum by (host) (vfleet_gpu_memory_used_bytes{job="gpu", host=~"$host"})' in exprs
    assert 'rate(nginx_http_requests_total{job="gateway"}[1m])' in exprs
    assert 'nginx_connections_active{job="gateway"}' in exprs
    assert any("vllm:gpu_cache_usage_perc" in e and "vllm:kv_cache_usage_perc" in e for e in exprs)
    assert dash["templating"]["list"][0]["name"] == "host"
    # promtool parses every query (as recording rules; Grafana's $host becomes a regex)
    rules = {
        "groups": [
            {
                "name": "dash",
                "rules": [{"record": f"dash:q{i}", "expr": e.replace("$host", ".*")} for i, e in enumerate(exprs)],
            }
        ]
    }
    (tmp_path / "dash.yml").write_text(yaml.safe_dump(rules))
    p = promtool("check", "rules", str(tmp_path / "dash.yml"))
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_verdict_alerts_compare_each_host_with_its_inventory_max_num_seqs():
    """vLLM exports no max_num_seqs: the rules carry the inventory's, per host; a host without
    one is compared with its own ceiling of the last hour."""
    _, vllm, settings = fleet()
    vllm = [dataclasses.replace(c, max_num_seqs=32) if c.name == "gpu01" else c for c in vllm]
    text = {f.path: f.text for f in monitoring_files(vllm, settings)}["rules/vllm-alerts.yml"]
    verdict = {
        r["alert"]: r["expr"] for g in yaml.safe_load(text)["groups"] if g["name"] == "vllm-verdict" for r in g["rules"]
    }
    assert 'host="gpu01"} >= 30.4)' in verdict["VllmQueueing"] and 'host="gpu02"}' not in verdict["VllmQueueing"]
    assert 'host="gpu01"} < 16)' in verdict["VllmUnderfed"]
    assert "max_over_time(" in verdict["VllmQueueing"]  # gpu02's fallback
