"""`vfleet monitor --deploy` on the lab: a real Prometheus (Debian's package; the lab hosts see
this machine's packages through their overlay) on the gateway host scrapes the real vLLM
hosts of the shared deployed fleet; the rules' metric names are the ones the deployed vLLM
exports; a second run changes nothing; the targets follow the inventory; stopping one vLLM
host fires the host-down alert (and the host is started again for the tests after). The
gateway (lab3 too) runs Debian's prometheus-nginx-exporter, which reads nginx's stub_status
on lab3's loopback: Prometheus sees nginx_up 1 and the request counter move with requests
through the gateway, and stopping nginx or the exporter fires GatewayDown (both restarted).
Each vLLM host runs Debian's prometheus-node-exporter with vfleet's GPU readings (nvidia-smi's
query mode, here the simulated GPUs): Prometheus's `gpu` job has, for lab1 and lab2, what the
host's nvidia-smi says, and a driver that stops answering on lab2 fires GpuUnavailable.
Helpers (the inventory, Prometheus's API, a wait): tests/integration/monitor_env.py."""

from __future__ import annotations

import hashlib
import json
import shlex
import time

import httpx
import pytest

from tests.integration.deploy_env import API_KEY, changed_targets, run_report, vfleet
from tests.integration.monitor_env import (
    FAST,
    MONITOR_HOST,
    firing,
    gateway_requests,
    get,
    gpu_series,
    host_gpus,
    query,
    up_hosts,
    wait_for,
    write_monitor_inventory,
)
from vfleet.config.hostconfig import HostConfig
from vfleet.config.monitoring import Thresholds
from vfleet.config.variables import SCHEMA
from vfleet.engine.inventory import load_inventory
from vfleet.roles.monitoring import _gpu_exporter as gpu_exporter
from vfleet.roles.monitoring._gpu_rules import GPU_ALERTS
from vfleet.roles.monitoring._metrics import metric_names_for
from vfleet.roles.monitoring._rules import ALERTS, GATEWAY_ALERTS
from vfleet.roles.monitoring._usage_rules import record_names
from vfleet.roles.monitoring._verdict_rules import VERDICT_ALERTS

pytestmark = pytest.mark.integration

STOPPED = "lab2"
TARGETS = "prometheus config /etc/prometheus/targets/vllm.json"
GPU_TARGETS = "prometheus config /etc/prometheus/targets/gpu.json"
RULES = "prometheus config /etc/prometheus/rules/vllm-alerts.yml"  # per-host max_num_seqs in the verdict alerts
VLLM_HOSTS = ("lab1", "lab2")
GPU_UNITS = f"{gpu_exporter.UNIT} {gpu_exporter.TIMER}"
GPU_RESET = (
    f"systemctl disable --now {GPU_UNITS}; rm -f {gpu_exporter.DEFAULTS_FILE} {gpu_exporter.SCRIPT} "
    f"/etc/systemd/system/{gpu_exporter.SERVICE} /etc/systemd/system/{gpu_exporter.TIMER} "
    "/var/lib/prometheus/node-exporter/vfleet-gpu.prom; systemctl daemon-reload"
)
# The simulator fails every call while its profile has this file (vfleet/lab/nvidia_smi.py; the
# broken-driver profile's text): a driver gone, as a GPU fallen off the bus leaves it.
DRIVER_GONE = "/etc/vfleet-lab/gpu/lab-profile.json"
EXPORTER = "prometheus-nginx-exporter.service"
RESET = (
    f"systemctl disable --now prometheus.service {EXPORTER}; rm -rf /etc/prometheus/targets "
    "/etc/prometheus/rules /etc/prometheus/prometheus.yml /etc/default/prometheus "
    "/etc/default/prometheus-nginx-exporter"
)


@pytest.fixture(scope="module")
def monitored(deployed, tmp_path_factory):
    work = tmp_path_factory.mktemp("monitor")
    inv = write_monitor_inventory(deployed["inv"], work / "monitor.yaml")
    hosts = {h.name: HostConfig.from_host(h) for h in load_inventory(inv, {}, schema=SCHEMA).hosts.values()}
    # from a bare monitoring host, whatever an earlier run left there
    reset = vfleet("run", "--inventory", str(inv), "--limit", MONITOR_HOST, "--command", RESET, timeout=120)
    assert reset.returncode == 0, (reset.stdout + reset.stderr)[-2000:]
    reset = vfleet("run", "--inventory", str(inv), "--limit", "vllm", "--command", GPU_RESET, timeout=120)
    assert reset.returncode == 0, (reset.stdout + reset.stderr)[-2000:]
    code, report, out = run_report("monitor", inv, work / "first.json", "--deploy", "--dest", str(work / "dest"))
    assert code == 0, out[-4000:]
    api = f"http://{hosts[MONITOR_HOST].address}:9090/api/v1"
    yield {"inv": inv, "work": work, "first": report, "api": api, "hosts": hosts, "deploy_inv": deployed["inv"]}
    # leave the lab as the other tests expect it: no Prometheus, no exporter running
    vfleet(
        "run",
        "--inventory",
        str(inv),
        "--limit",
        MONITOR_HOST,
        "--command",
        f"systemctl disable --now prometheus.service {EXPORTER}",
        timeout=120,
    )
    vfleet(
        "run",
        "--inventory",
        str(inv),
        "--limit",
        "vllm",
        "--command",
        f"systemctl disable --now {GPU_UNITS}",
        timeout=120,
    )


def test_first_run_scrapes_every_vllm_host(monitored):
    assert monitored["first"]["summary"]["failed"] == 0
    changed = changed_targets(monitored["first"], MONITOR_HOST)
    for path in (
        "/etc/prometheus/prometheus.yml",
        "/etc/prometheus/rules/vllm-alerts.yml",
        "/etc/prometheus/targets/vllm.json",
        "/etc/prometheus/targets/gateway.json",
    ):
        assert f"prometheus config {path}" in changed, changed
    assert "exporter args /etc/default/prometheus-nginx-exporter" in changed, changed
    assert GPU_TARGETS in changed, changed
    for host in VLLM_HOSTS:
        on_host = changed_targets(monitored["first"], host)
        for target in (
            f"node exporter args {gpu_exporter.DEFAULTS_FILE}",
            f"gpu producer {gpu_exporter.SCRIPT}",
            f"service {gpu_exporter.TIMER}",
        ):
            assert target in on_host, (host, on_host)
    api = monitored["api"]
    wait_for("both vLLM hosts scraped", lambda: up_hosts(api) == {"lab1": "up", "lab2": "up"}, timeout=120)
    # --dest wrote byte for byte what runs there, plus the dashboard
    dest = monitored["work"] / "dest"
    assert (dest / "grafana" / "vllm-dashboard.json").is_file()
    files = ["prometheus.yml", "targets/vllm.json", "targets/gateway.json", "targets/gpu.json", "rules/vllm-alerts.yml"]
    code, report, out = run_report(
        "run",
        monitored["inv"],
        dest.parent / "sums.json",
        "--limit",
        MONITOR_HOST,
        "--quiet",
        "--command",
        "cd /etc/prometheus && sha256sum " + " ".join(files),
    )
    assert code == 0, out[-2000:]
    on_host = report["hosts"][MONITOR_HOST]["steps"][-1]["data"]["stdout"]
    for f in files:
        assert f"{hashlib.sha256((dest / f).read_bytes()).hexdigest()}  {f}" in on_host, (f, on_host)


def test_rules_use_the_names_the_deployed_vllm_exports(monitored):
    api = monitored["api"]
    version = monitored["hosts"]["lab1"].vllm_version
    names = metric_names_for(version)
    for logical, name in names.items():
        series = name + "_bucket" if logical in ("ttft", "e2e_latency") else name
        query = f"count by (host) ({series})"
        wait_for(
            f"{series} scraped from both hosts",
            lambda: {r["metric"]["host"] for r in get(api, "query", query=query)["result"]} == {"lab1", "lab2"},
            timeout=60,
        )
    assert get(api, "query", query="vllm:gpu_cache_usage_perc")["result"] == []  # the old name is gone
    groups = {g["name"]: [r["name"] for r in g["rules"]] for g in get(api, "rules")["groups"]}
    assert groups == {
        "vllm": list(ALERTS),
        "gateway": list(GATEWAY_ALERTS),
        "gpu": list(GPU_ALERTS),
        "vllm-verdict": list(VERDICT_ALERTS),
        "gateway_usage": list(record_names(Thresholds.window)),
    }
    wait_for(
        "every rule evaluated without error",
        lambda: all(r["health"] == "ok" for g in get(api, "rules")["groups"] for r in g["rules"]),
        timeout=30,
    )


# It found that mtail on the lab counted nothing: mtail not in adm (Debian's logrotate re-creates
# nginx's logs 0640 www-data:adm), and the access log created 0600 root by `nginx -t` under the
# file writer's umask 077 (validate commands now run under umask 022).
def test_the_gateways_requests_reach_prometheus_through_mtail(monitored):
    """A request through the gateway: a line of its JSON access log, mtail's counter on the
    gateway, a series in Prometheus by tenant and model (no tenants here). ~20 s."""
    gw, model = monitored["hosts"][MONITOR_HOST], monitored["hosts"]["lab1"].served_model_name
    query = 'sum by (tenant, model, status) (vfleet_gateway_requests_total{job="gateway_usage"})'

    def sent_and_counted() -> list:
        httpx.post(
            gw.gateway_url + "/v1/completions",
            headers={"Authorization": f"Bearer {API_KEY}"},
            json={"model": model, "prompt": "x", "max_tokens": 1},
            timeout=60,
        )
        return [
            r["metric"]
            for r in get(monitored["api"], "query", query=query)["result"]
            if r["metric"].get("model") == model and r["metric"].get("status") == "200"
        ]

    series = wait_for("the gateway's requests counted in Prometheus", sent_and_counted, timeout=120, every=5)
    # no tenant: Prometheus drops a label whose value is empty
    assert series == [{"model": model, "status": "200"}], series


def test_second_run_changes_nothing(monitored, tmp_path):
    code, report, out = run_report("monitor", monitored["inv"], tmp_path / "second.json", "--deploy")
    assert code == 0, out[-3000:]
    for host in (MONITOR_HOST, *VLLM_HOSTS):
        assert report["hosts"][host]["counts"]["changed"] == 0, (host, changed_targets(report, host))


def test_targets_follow_the_inventory(monitored, tmp_path):
    api = monitored["api"]
    smaller = write_monitor_inventory(monitored["deploy_inv"], tmp_path / "smaller.yaml", drop=(STOPPED,))
    try:
        code, report, out = run_report("monitor", smaller, tmp_path / "smaller.json", "--deploy")
        assert code == 0, out[-3000:]
        assert changed_targets(report, MONITOR_HOST) == [TARGETS, GPU_TARGETS, RULES, "service prometheus.service"]
        wait_for(f"{STOPPED} no longer a target", lambda: set(up_hosts(api)) == {"lab1"}, timeout=60)
    finally:  # the fleet as monitored before, whatever failed: the later tests need STOPPED a target
        code, report, out = run_report("monitor", monitored["inv"], tmp_path / "back.json", "--deploy")
    assert code == 0 and changed_targets(report, MONITOR_HOST) == [
        TARGETS,
        GPU_TARGETS,
        RULES,
        "service prometheus.service",
    ]
    wait_for(f"{STOPPED} a target again", lambda: up_hosts(api) == {"lab1": "up", "lab2": "up"}, timeout=60)


def stop_until_it_fires(
    monitored: dict, host: str, unit: str, alert: str, figure: str, health_url: str, ready_s: float, resolve_s: float
) -> None:
    """Stop `unit` on `host` and wait until `alert` fires for that host alone (how long it took
    goes to `figure` in the work folder: docs/measurements.md); then start it again and
    wait until health_url answers and the alert resolves."""
    api, inv = monitored["api"], monitored["inv"]
    assert firing(api, alert) == set()
    p = vfleet("run", "--inventory", str(inv), "--limit", host, "--command", f"systemctl stop {unit}", timeout=180)
    stopped = time.monotonic()
    try:
        assert p.returncode == 0, (p.stdout + p.stderr)[-2000:]
        # the rule's `for` (10s) + one scrape (5s) + one evaluation (5s), with slack for a busy 2-core lab
        assert wait_for(f"{alert} firing", lambda: firing(api, alert), timeout=120) == {host}
        (monitored["work"] / figure).write_text(
            json.dumps({"fired_after_s": round(time.monotonic() - stopped, 1), **FAST})
        )
    finally:
        vfleet("run", "--inventory", str(inv), "--limit", host, "--command", f"systemctl start {unit}", timeout=180)
        wait_for(
            f"{host} answering again",
            lambda: httpx.get(health_url, timeout=5).status_code == 200,
            timeout=ready_s,
            every=5,
        )
    wait_for(f"{alert} resolved", lambda: firing(api, alert) == set(), timeout=resolve_s)


def test_stopping_a_host_fires_host_down(monitored):
    cfg = monitored["hosts"][STOPPED]
    stop_until_it_fires(
        monitored,
        STOPPED,
        cfg.unit,
        "VllmHostDown",
        "host-down.json",
        f"{cfg.base_url}/health",
        cfg.ready_timeout,
        resolve_s=60,
    )


def test_the_gateways_exporter_is_scraped_and_counts_requests(monitored):
    api, gw = monitored["api"], monitored["hosts"][MONITOR_HOST]
    wait_for(
        "nginx_up 1 from the gateway's exporter",
        lambda: query(api, 'nginx_up{job="gateway"}') == {MONITOR_HOST: 1.0},
        timeout=90,
    )
    # stub_status is on lab3's loopback only: not on the public port, not on the network
    assert httpx.get(f"{gw.gateway_url}/stub_status", timeout=10).status_code == 404
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://{gw.address}:{gw.monitoring.gateway_status_port}/stub_status", timeout=10)
    before = wait_for("a first request count", lambda: gateway_requests(api), timeout=60)
    for _ in range(20):
        assert httpx.get(f"{gw.gateway_url}/health", timeout=10).status_code == 200
    wait_for("the count moved by the 20 requests", lambda: (gateway_requests(api) or 0) >= before + 20, timeout=60)


@pytest.mark.parametrize("unit", ["nginx.service", EXPORTER])
def test_stopping_nginx_or_its_exporter_fires_gateway_down(monitored, unit):
    api, gw = monitored["api"], monitored["hosts"][MONITOR_HOST]
    wait_for("the gateway up before", lambda: query(api, 'nginx_up{job="gateway"}') == {MONITOR_HOST: 1.0}, timeout=90)
    stop_until_it_fires(
        monitored,
        MONITOR_HOST,
        unit,
        "GatewayDown",
        f"gateway-down-{unit}.json",
        f"{gw.gateway_url}/health",
        60,
        resolve_s=90,
    )


def test_gpu_readings_of_each_vllm_host_reach_prometheus(monitored, tmp_path):
    api, inv = monitored["api"], monitored["inv"]
    expected = {h: float(gpu_exporter.expected_gpus(monitored["hosts"][h])) for h in VLLM_HOSTS}
    wait_for(
        "nvidia-smi answered on both vLLM hosts",
        lambda: query(api, 'vfleet_gpu_smi_ok{job="gpu"}') == {h: 1.0 for h in VLLM_HOSTS},
        timeout=120,
    )
    assert query(api, 'vfleet_gpu_devices_expected{job="gpu"}') == expected
    want: dict[tuple[str, str], float] = {}
    for host in VLLM_HOSTS:
        gpus = host_gpus(inv, host, tmp_path)
        assert query(api, 'vfleet_gpu_devices{job="gpu"}')[host] == len(gpus) >= expected[host]
        want.update({(host, i): total for i, total in gpus.items()})
    assert gpu_series(api, 'vfleet_gpu_memory_total_bytes{job="gpu"}') == want
    assert set(gpu_series(api, 'vfleet_gpu_utilization_ratio{job="gpu"}')) == set(want)
    assert set(gpu_series(api, 'vfleet_gpu_memory_used_bytes{job="gpu"}')) == set(want)
    # the node exporter reads a fresh file: written by the timer within the last minute
    ages = query(api, 'time() - node_textfile_mtime_seconds{job="gpu"}')
    assert set(ages) == set(VLLM_HOSTS) and all(age < 60 for age in ages.values()), ages
    assert firing(api, "GpuUnavailable") == set() and firing(api, "GpuMetricsMissing") == set()


def test_a_driver_that_stops_answering_fires_gpu_unavailable(monitored):
    api, inv = monitored["api"], monitored["inv"]
    wait_for(
        "lab2's GPUs answering before",
        lambda: query(api, 'vfleet_gpu_smi_ok{job="gpu"}').get(STOPPED) == 1.0,
        timeout=120,
    )
    gone = json.dumps(
        {
            "nvidia_smi": "fail",
            "exit_code": 9,
            "stdout": "NVIDIA-SMI has failed because it couldn't "
            "communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and "
            "running.\n\n",
        }
    )
    p = vfleet(
        "run",
        "--inventory",
        str(inv),
        "--limit",
        STOPPED,
        "--command",
        f"printf '%s' {shlex.quote(gone)} > {DRIVER_GONE}",
        timeout=120,
    )
    try:
        assert p.returncode == 0, (p.stdout + p.stderr)[-2000:]
        # the timer (15s) + one scrape (5s) + `for` (10s) + one evaluation (5s), with slack
        assert wait_for("GpuUnavailable firing", lambda: firing(api, "GpuUnavailable"), timeout=150) == {STOPPED}
        assert query(api, 'vfleet_gpu_devices{job="gpu"}')[STOPPED] == 0.0
    finally:
        vfleet("run", "--inventory", str(inv), "--limit", STOPPED, "--command", f"rm -f {DRIVER_GONE}", timeout=120)
    wait_for("GpuUnavailable resolved", lambda: firing(api, "GpuUnavailable") == set(), timeout=120)
