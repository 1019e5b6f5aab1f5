"""Helpers of tests/integration/test_monitor.py: the monitoring inventory (the deployed fleet
plus a monitoring group on MONITOR_HOST), a wait for a condition, and reads of the Prometheus
HTTP API (targets, instant queries, firing alerts, the gateway's and the GPUs' series), plus
what a host's (simulated) nvidia-smi says its GPUs are."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest
import yaml

from tests.integration.deploy_env import run_report

MONITOR_HOST = "lab3"  # the deployed fleet's gateway also runs Prometheus (3 lab hosts)
FAST = {"monitoring_scrape_interval": "5s", "monitoring_down_for": "10s"}


def write_monitor_inventory(deploy_inv: Path, dest: Path, drop: tuple[str, ...] = ()) -> Path:
    """The deploy inventory plus a monitoring group (MONITOR_HOST), less the vLLM hosts in `drop`."""
    data = yaml.safe_load(deploy_inv.read_text())
    children = data["all"]["children"]
    for name in drop:
        children["vllm"]["hosts"].pop(name)
    children["monitoring"] = {"vars": dict(FAST), "hosts": {MONITOR_HOST: {}}}
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def wait_for(what: str, probe: Callable[[], Any], timeout: float, every: float = 2.0) -> Any:
    """probe() until it returns something truthy; fail with the last value after `timeout`."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except httpx.HTTPError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    pytest.fail(f"{what}: not within {timeout:.0f}s (last: {last!r})")


def get(api: str, path: str, **params: str) -> Any:
    r = httpx.get(f"{api}/{path}", params=params, timeout=10)
    r.raise_for_status()
    return r.json()["data"]


def up_hosts(api: str) -> dict[str, str]:
    """host label -> health of each active vllm target."""
    return {
        t["labels"]["host"]: t["health"]
        for t in get(api, "targets")["activeTargets"]
        if t["labels"].get("job") == "vllm"
    }


def query(api: str, promql: str) -> dict[str, float]:
    """host label -> value of each series of an instant query."""
    return {r["metric"]["host"]: float(r["value"][1]) for r in get(api, "query", query=promql)["result"]}


def firing(api: str, alert: str) -> set[str]:
    return {
        a["labels"]["host"]
        for a in get(api, "alerts")["alerts"]
        if a["labels"]["alertname"] == alert and a["state"] == "firing"
    }


def gateway_requests(api: str) -> float | None:
    return query(api, 'nginx_http_requests_total{job="gateway"}').get(MONITOR_HOST)


def gpu_series(api: str, promql: str) -> dict[tuple[str, str], float]:
    """(host, gpu) -> value of each series of an instant query on the gpu job."""
    return {
        (r["metric"]["host"], r["metric"]["gpu"]): float(r["value"][1])
        for r in get(api, "query", query=promql)["result"]
    }


def host_gpus(inv: Path, host: str, tmp: Path) -> dict[str, float]:
    """GPU index -> memory.total in bytes, as the host's (simulated) nvidia-smi says it."""
    code, report, out = run_report(
        "run",
        inv,
        tmp / f"smi-{host}.json",
        "--limit",
        host,
        "--quiet",
        "--command",
        "nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits",
    )
    assert code == 0, out[-2000:]
    rows = [ln.split(", ") for ln in report["hosts"][host]["steps"][-1]["data"]["stdout"].splitlines() if ln]
    return {i: float(mib) * 1024 * 1024 for i, mib in rows}
