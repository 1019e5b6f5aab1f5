"""A real Prometheus (Debian's binary) on loopback runs what `vfleet monitor --dest` wrote: it
scrapes a stand-in vLLM /metrics (the V1 names of the lab's 0.32.0), evaluates every rule
without error, fires VllmHostDown for a host that does not answer, and drops a host from its
targets when the inventory does, through file_sd alone (no reload). No lab needed: the lab
test (tests/integration/test_monitor.py) does the same against real vLLM hosts."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest
import yaml

from vfleet.config.monitoring import MonitoringSettings
from vfleet.roles.monitoring._gpu_rules import GPU_ALERTS
from vfleet.roles.monitoring._rules import ALERTS, GATEWAY_ALERTS
from vfleet.roles.monitoring._usage_rules import usage_records
from vfleet.roles.monitoring._verdict_rules import VERDICT_ALERTS

REPO = Path(__file__).resolve().parents[2]
METRICS = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.1
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="tiny"} 0.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 10.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="tiny"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 1.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"} 1.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 0.1
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def inventory(path: Path, ports: dict[str, int], prom_port: int) -> Path:
    data = {
        "all": {
            "vars": {"vllm_version": "0.32.0", "model_name": "tiny"},
            "children": {
                "vllm": {"hosts": {n: {"ansible_host": "127.0.0.1", "vllm_port": p} for n, p in ports.items()}},
                "monitoring": {
                    "vars": {
                        "monitoring_scrape_interval": "1s",
                        "monitoring_down_for": "2s",
                        "monitoring_port": prom_port,
                    },
                    "hosts": {"mon": {"ansible_host": "127.0.0.1"}},
                },
            },
        }
    }
    path.write_text(yaml.safe_dump(data))
    return path


def write_dest(inv: Path, dest: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "vfleet.cli", "monitor", "--inventory", str(inv), "--dest", str(dest)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 30) -> Any:
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout:.0f}s (last: {last!r})")


@pytest.fixture
def prometheus(tmp_path):
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.fail("prometheus not found: `apt-get install -y prometheus` (the Makefile's APT_PACKAGES)")
    www = tmp_path / "www"
    www.mkdir()
    (www / "metrics").write_text(METRICS)
    up, down, prom = free_port(), free_port(), free_port()
    inv = inventory(tmp_path / "inv.yaml", {"up1": up, "down1": down}, prom)
    dest = tmp_path / "dest"
    write_dest(inv, dest)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "http.server", str(up), "--bind", "127.0.0.1", "--directory", str(www)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [
                exe,
                f"--config.file={dest / 'prometheus.yml'}",
                f"--web.listen-address=127.0.0.1:{prom}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "prometheus.log").open("w"),
        ),
    ]
    try:
        yield {
            "api": f"http://127.0.0.1:{prom}/api/v1",
            "tmp": tmp_path,
            "ports": {"up1": up},
            "prom": prom,
            "dest": dest,
        }
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def data(api: str, path: str) -> Any:
    r = httpx.get(f"{api}/{path}", timeout=5)
    r.raise_for_status()
    return r.json()["data"]


def vllm_targets(api: str) -> dict[str, str]:
    return {
        t["labels"]["host"]: t["health"] for t in data(api, "targets")["activeTargets"] if t["labels"]["job"] == "vllm"
    }


def test_prometheus_runs_the_generated_files(prometheus):
    api = prometheus["api"]
    wait_for("both targets scraped once", lambda: vllm_targets(api) == {"up1": "up", "down1": "down"})

    def evaluated() -> list[dict]:
        rules = [r for g in data(api, "rules")["groups"] for r in g["rules"]]
        return rules if all(not r["lastEvaluation"].startswith("0001") for r in rules) else []

    rules = wait_for("every rule evaluated once", evaluated)
    assert {g["name"]: [r["name"] for r in g["rules"]] for g in data(api, "rules")["groups"]} == {
        "vllm": list(ALERTS),
        "gateway": list(GATEWAY_ALERTS),
        "gpu": list(GPU_ALERTS),
        "vllm-verdict": list(VERDICT_ALERTS),
        "gateway_usage": list(usage_records(MonitoringSettings.defaults().thresholds)),
    }
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]
    fired = wait_for(
        "VllmHostDown firing",
        lambda: {
            a["labels"]["host"]
            for a in data(api, "alerts")["alerts"]
            if a["labels"]["alertname"] == "VllmHostDown" and a["state"] == "firing"
        },
    )
    assert fired == {"down1"}
    # the gpu job's targets (port 9100 of each host) serve no GPU readings here: GpuMetricsMissing
    # may fire for them; nothing else does
    others = {a["labels"]["alertname"] for a in data(api, "alerts")["alerts"]} - {"VllmHostDown", "GpuMetricsMissing"}
    assert others == set()  # an idle, healthy host fires nothing
    # the inventory loses down1: file_sd drops it without a reload
    smaller = inventory(prometheus["tmp"] / "smaller.yaml", prometheus["ports"], prometheus["prom"])
    write_dest(smaller, prometheus["dest"])
    wait_for("down1 dropped from the targets", lambda: vllm_targets(api) == {"up1": "up"})
