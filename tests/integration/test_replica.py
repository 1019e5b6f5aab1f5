"""A two-host replica of the tiny model on the lab (lab1 + lab2), served through lab3's gateway.

The issue asks for pipeline parallel 2 over Ray. The CPU build cannot run vLLM's Ray executor
(no Ray device key on the CPU platform), and its pipeline parallelism fails on the first
request even on one node (docs/evidence/replica-cpu-0.32.0; the inventory check refuses it),
so this is the closest mode it runs: vLLM's own multi-node multiprocessing executor
(replica_backend: mp) with tensor parallel 2 across the two hosts (allow_cross_host_tp), lab1
the head (node rank 0, the gateway's one backend), lab2 a headless worker. Real sshd, systemd,
nginx and vLLM throughout.
"""
from __future__ import annotations

import socket

import httpx
import pytest
import yaml

from tests.integration.deploy_env import API_KEY, changed_targets, run_report, write_deploy_inventory


@pytest.fixture(scope="module")
def replica(lab, tmp_path_factory):
    lab_inv = lab.ensure(3)
    work = tmp_path_factory.mktemp("replica")
    inv = write_deploy_inventory(lab_inv, work)
    data = yaml.safe_load(inv.read_text())
    vllm = data["all"]["children"]["vllm"]
    vllm["children"] = {"tiny_r1": {"vars": {"replica": "tiny-r1", "replica_backend": "mp",
                                             "tensor_parallel_size": 2, "pipeline_parallel_size": 1,
                                             "allow_cross_host_tp": True},
                                    "hosts": vllm.pop("hosts")}}
    inv.write_text(yaml.safe_dump(data, sort_keys=False))
    code, report, out = run_report("deploy", inv, work / "first.json", timeout=1500)
    yield {"inv": inv, "work": work, "code": code, "report": report, "out": out}
    # put back the single-host deployment the other modules share
    plain = write_deploy_inventory(lab_inv, tmp_path_factory.mktemp("plain"))
    run_report("deploy", plain, work / "restore.json", "--skip-preflight", timeout=1500)


def test_deploy_brings_bare_hosts_to_a_two_host_replica(replica):
    assert replica["code"] == 0, replica["out"][-4000:]
    head = replica["report"]["hosts"]["lab1"]
    assert head["replica"]["workers"] == ["lab2"] and head["replica"]["tensor_parallel_size"] == 2
    assert head["replica"]["route"]["dev"] == "eth0" and head["replica"]["route"]["src"] == "10.213.0.11"
    checks = {c["id"]: c["status"] for c in head["checks"]}
    assert checks["replica.nic:tiny-r1"] == "pass" and checks["replica.clock:tiny-r1"] in ("pass", "warn")


def test_the_gateway_serves_the_replica_through_its_head_only(replica):
    r = httpx.post("http://10.213.0.13/v1/completions", timeout=120,
                   headers={"Authorization": f"Bearer {API_KEY}"},
                   json={"model": "tiny", "prompt": "Hello", "max_tokens": 8})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] >= 1
    with pytest.raises(OSError):  # the headless worker answers no HTTP
        socket.create_connection(("10.213.0.12", 8000), timeout=3).close()


def test_second_deploy_changes_nothing(replica):
    code, report, out = run_report("deploy", replica["inv"], replica["work"] / "second.json", "--skip-preflight",
                                   timeout=900)
    assert code == 0, out[-3000:]
    for h in ("lab1", "lab2"):
        assert changed_targets(report, h) == [], (h, changed_targets(report, h))
