"""`vfleet deploy` end to end on the lab: a real vLLM (CPU build) on 2 hosts behind a real
nginx, installed offline from the wheelhouse; then idempotency, a one-variable change, a
killed weight transfer, a vLLM that cannot start, nginx -t protection and testinfra."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import httpx
import pytest

from tests.integration.deploy_env import (
    API_KEY,
    changed_targets,
    ensure_model,
    restarts,
    run_report,
    vfleet,
    write_deploy_inventory,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet(deployed):
    return deployed


def test_first_deploy_serves_through_the_gateway(fleet):
    report = fleet["first"]
    assert report["summary"]["failed"] == 0 and report["summary"]["unreachable"] == 0
    hosts = report["hosts"]
    vllm_hosts = [h for h in hosts if "smoke" in hosts[h] and "host" in hosts[h]["smoke"]]
    assert len(vllm_hosts) == 2
    for h in vllm_hosts:
        smoke = hosts[h]["smoke"]["host"]
        assert all(c["ok"] for c in smoke.values()), smoke
        assert smoke["streamed completion"]["chunks"] > 0
        # the trained tiny model ends its reply by itself and honours response_format json_schema
        assert smoke["stops"]["ok"] and smoke["stops"]["finish_reason"] == "stop" and not smoke["stops"].get("skipped")
        assert smoke["json_schema"]["ok"] and not smoke["json_schema"].get("skipped"), smoke["json_schema"]
        assert json.loads(smoke["json_schema"]["reply"]).keys() == {"city", "country"}
        assert hosts[h]["restarts"] == 1  # started once, by the handler
    gw = [h for h in hosts if "smoke" in hosts[h] and "gateway" in hosts[h]["smoke"]]
    assert len(gw) == 1 and all(c["ok"] for c in hosts[gw[0]]["smoke"]["gateway"].values())
    assert "curl" in report and "/v1/chat/completions" in report["curl"]
    # the curl line works (with the key exported, as printed)
    url = report["curl"].split("http://", 1)[1].split(" ", 1)[0]
    r = httpx.post(
        f"http://{url}",
        headers={"Authorization": f"Bearer {API_KEY}"},
        json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        timeout=60,
    )
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
    # the secret is in no report, and on no host in a unit, a process argument or the journal
    assert API_KEY not in json.dumps(report)
    seen = vfleet(
        "run",
        "--inventory",
        str(fleet["inv"]),
        "--command",
        "ps -eo args; cat /etc/systemd/system/vllm.service 2>/dev/null; "
        "journalctl -o cat --no-pager 2>/dev/null | tail -n 5000",
    )
    assert seen.returncode == 0 and "ExecStart=" in seen.stdout, seen.stderr[-2000:]
    assert API_KEY not in seen.stdout + seen.stderr


def test_every_process_of_a_serving_host_stays_on_its_core(fleet):
    """The lab holds each vLLM host to one core (vfleet/lab/cpus.py): its API server, EngineCore
    and worker threads too, so no host's vLLM takes the CPU another host needs."""
    from vfleet.lab import hosts as lab_hosts
    from vfleet.lab.state import LabState

    state = LabState()
    for name in ("lab1", "lab2"):
        rec = state.load_host(name)
        cmd = (
            "for p in $(pgrep -f 'vllm|VLLM'); do for t in /proc/$p/task/*; do "
            "sed -n 's/^Cpus_allowed_list:\\s*//p' $t/status; done; done | sort | uniq -c"
        )
        out = subprocess.run(
            lab_hosts.ssh_cmd(state.key, state.known_hosts, rec.ip, cmd), capture_output=True, text=True, timeout=60
        ).stdout
        counts = {line.split()[1]: int(line.split()[0]) for line in out.splitlines()}
        assert list(counts) == [rec.extra["cpus"]] and sum(counts.values()) > 10, (name, out)


def test_second_deploy_changes_nothing_and_restarts_nothing(fleet):
    code, report, out = run_report("deploy", fleet["inv"], fleet["work"] / "second.json")
    assert code == 0, out[-3000:]
    for host, data in report["hosts"].items():
        assert data["counts"]["changed"] == 0, (host, changed_targets(report, host))
    assert set(restarts(report).values()) == {0}
    assert report["weights"] == {"controller_bytes_sent": 0, "waves": 0, "copies": 0}


def test_one_variable_changes_only_that_unit_and_restarts_only_that_host(fleet, tmp_path):
    target = "lab1"
    inv = write_deploy_inventory(fleet["lab"], tmp_path, host_vars={target: {"max_num_seqs": 4}})
    code, report, out = run_report("deploy", inv, tmp_path / "r.json", "--diff")
    assert code == 0, out[-3000:]
    assert changed_targets(report, target) == [
        "unit /etc/systemd/system/vllm.service",
        "systemd daemon-reload",
        "service vllm.service",
    ], changed_targets(report, target)
    assert "--max-num-seqs" in out and "+    --max-num-seqs 4" in out.replace("\\\n", "\n") or "-max-num-seqs" in out
    assert restarts(report) == {"lab1": 1, "lab2": 0, "lab3": 0}
    for other in ("lab2", "lab3"):
        assert report["hosts"][other]["counts"]["changed"] == 0, changed_targets(report, other)
    # and back, so the fleet is as the other tests expect
    code, report, out = run_report("deploy", fleet["inv"], tmp_path / "back.json")
    assert code == 0 and restarts(report) == {"lab1": 1, "lab2": 0, "lab3": 0}


def test_a_host_with_its_own_served_model_name_deploys_and_passes_smoke(fleet, tmp_path):
    inv = write_deploy_inventory(fleet["lab"], tmp_path, host_vars={"lab1": {"served_model_name": "tiny-lab1"}})
    code, report, out = run_report("deploy", inv, tmp_path / "served.json", "--limit", "lab1")
    assert code == 0, out[-3000:]
    smoke = report["hosts"]["lab1"]["smoke"]["host"]
    assert smoke["/v1/models"]["models"] == ["tiny-lab1"] and all(c["ok"] for c in smoke.values()), smoke
    assert restarts(report) == {"lab1": 1}
    code, report, out = run_report("deploy", fleet["inv"], tmp_path / "back.json", "--limit", "lab1")
    assert code == 0 and restarts(report) == {"lab1": 1}, out[-3000:]


def test_check_mode_reports_without_changing(fleet, tmp_path):
    inv = write_deploy_inventory(fleet["lab"], tmp_path, host_vars={"lab2": {"max_num_seqs": 3}})
    code, report, out = run_report("deploy", inv, tmp_path / "check.json", "--check", "--diff")
    assert code == 0, out[-3000:]
    assert any("would change" in s.get("message", "") for s in report["hosts"]["lab2"]["steps"])
    assert set(restarts(report).values()) == {0}
    code, report, _ = run_report("deploy", fleet["inv"], tmp_path / "after.json")
    assert all(d["counts"]["changed"] == 0 for d in report["hosts"].values())  # nothing was applied


def test_killed_weight_transfer_leaves_live_model_and_resumes(fleet, tmp_path):
    src = tmp_path / "tiny-v2"
    shutil.copytree(ensure_model(), src)
    (src / "MANIFEST.sha256").unlink()
    (src / "extra-shard.bin").write_bytes(bytes(range(256)) * (40 * 4096))  # 40 MiB
    inv = write_deploy_inventory(
        fleet["lab"], tmp_path, extra={"model_source": str(src), "weights_bwlimit": 8000, "weights_fanout": False}
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "vfleet.cli", "weights", "--inventory", str(inv), "--limit", "lab1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    before = vfleet("run", "--inventory", str(inv), "--limit", "lab1", "--command", "readlink /srv/models/tiny").stdout
    deadline = time.time() + 60
    while time.time() < deadline:  # wait until rsync is writing into staging, then kill the run
        r = vfleet(
            "run",
            "--inventory",
            str(inv),
            "--limit",
            "lab1",
            "--command",
            "du -sb /srv/models/.staging 2>/dev/null | cut -f1",
        )
        size = int((r.stdout.split("[lab1] ")[-1].split()[0:1] or ["0"])[0] or 0) if "[lab1]" in r.stdout else 0
        if size > 2_000_000:
            break
        time.sleep(0.5)
    proc.kill()
    subprocess.run(["pkill", "-f", f"rsync.*{src}"], check=False)
    proc.wait()
    after = vfleet(
        "run",
        "--inventory",
        str(inv),
        "--limit",
        "lab1",
        "--command",
        "readlink /srv/models/tiny; cd /srv/models/tiny/ && sha256sum --quiet -c MANIFEST.sha256 && echo OK",
    )
    assert "OK" in after.stdout
    live = [ln for ln in before.splitlines() if ln.startswith("[lab1]")][0]
    assert live in after.stdout  # still the old copy
    code, report, out = run_report("weights", inv, tmp_path / "resume.json", "--limit", "lab1")
    assert code == 0, out[-3000:]
    copy = [s for s in report["hosts"]["lab1"]["steps"] if s["action"] == "copy"][0]
    assert copy["data"]["bytes_sent"] < 40 * 1024 * 1024  # resumed, not started over
    done = vfleet("run", "--inventory", str(inv), "--limit", "lab1", "--command", "ls /srv/models/tiny/")
    assert "extra-shard.bin" in done.stdout
    # put the fleet's model back
    code, report, out = run_report("deploy", fleet["inv"], tmp_path / "back.json", "--limit", "lab1,lab3")
    assert code == 0, out[-3000:]


def test_vllm_that_cannot_start_fails_with_its_journal(fleet, tmp_path):
    inv = write_deploy_inventory(
        fleet["lab"], tmp_path, host_vars={"lab2": {"max_model_len": 99999999, "ready_timeout": 240}}
    )
    code, report, out = run_report("service", inv, tmp_path / "bad.json", "--limit", "lab2")
    assert code == 1
    failed = [s for s in report["hosts"]["lab2"]["steps"] if s["status"] == "failed"][-1]
    assert "journal:" in failed["message"] and "max" in failed["message"].lower()
    code, report, out = run_report("deploy", fleet["inv"], tmp_path / "fixed.json", "--limit", "lab2,lab3")
    assert code == 0, out[-3000:]


def test_nginx_config_that_fails_test_is_never_loaded(fleet, tmp_path):
    broken = "echo 'this is not nginx' > /etc/nginx/conf.d/zz-broken.conf"
    assert vfleet("run", "--inventory", str(fleet["inv"]), "--limit", "gateways", "--command", broken).returncode == 0
    before = vfleet(
        "run",
        "--inventory",
        str(fleet["inv"]),
        "--limit",
        "gateways",
        "--command",
        "sha256sum /etc/nginx/conf.d/vfleet-gateway.conf",
    ).stdout
    inv = write_deploy_inventory(fleet["lab"], tmp_path, extra={"gateway_rate_burst": 77})
    code, report, out = run_report("gateway", inv, tmp_path / "gw.json")
    assert code == 1 and "rejected by nginx -t; the previous file was put back" in out
    after = vfleet(
        "run",
        "--inventory",
        str(fleet["inv"]),
        "--limit",
        "gateways",
        "--command",
        "sha256sum /etc/nginx/conf.d/vfleet-gateway.conf; rm -f /etc/nginx/conf.d/zz-broken.conf",
    ).stdout
    assert before.split("[lab3]")[1].split()[0] == after.split("[lab3]")[1].split()[0]
    r = httpx.get("http://10.213.0.13/health", timeout=10)
    assert r.status_code == 200  # nginx kept serving the old config


def test_verify_suite_passes_on_the_deployed_fleet(fleet):
    p = vfleet("verify", "--inventory", str(fleet["inv"]))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert " passed" in p.stdout and " failed" not in p.stdout


def test_planner_kv_capacity_matches_what_vllm_logs(fleet, tmp_path):
    from vfleet.roles.preflight._capacity import parse_kv_cache_log

    out = tmp_path / "plan.json"
    p = vfleet("plan", "--inventory", str(fleet["inv"]), "--limit", "lab1", "--report", str(out))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-1000:]
    planned = json.loads(out.read_text())["hosts"]["lab1"]["capacity"]["kv_capacity_tokens"]
    log = vfleet(
        "run",
        "--inventory",
        str(fleet["inv"]),
        "--limit",
        "lab1",
        "--command",
        "journalctl -u vllm -o cat --no-pager | grep 'KV cache size' | tail -n 1",
    ).stdout
    logged = parse_kv_cache_log(log)
    assert logged, log
    ratio = planned / logged
    print(f"planner KV capacity {planned} tokens / vLLM log {logged} tokens = {ratio:.4f}")
    assert 0.99 <= ratio <= 1.01
