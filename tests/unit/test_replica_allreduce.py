"""The cross-member all-reduce of `preflight --replica-allreduce` (vfleet/roles/replica/_allreduce.py):
the jobs it plans from the route facts, the checks it makes of results, and its probe run for
real as two local ranks over loopback with gloo (torch is in the dev environment)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from tests.unit.configs import host_config
from vfleet.config.replicas import Replica
from vfleet.roles.replica._allreduce import PROBE, AllReduceJob, plan, to_check
from vfleet.roles.replica._facts import parse_route

R = Replica("r1", ("gpu01", "gpu02", "gpu03"), 8, 3, 8, "ray", "inv.yaml: line 10: group 'r1'")
ADDRESS = {"gpu01": "gpu01.example", "gpu02": "gpu02.example", "gpu03": "gpu03.example"}
ROUTES = {
    "gpu01": parse_route("10.0.0.2", ["10.0.0.2 dev ens1 src 10.0.0.1 uid 0"]),
    "gpu02": parse_route("10.0.0.1", ["10.0.0.1 dev ens1 src 10.0.0.2 uid 0"]),
    "gpu03": parse_route("10.0.0.1", ["10.0.0.1 dev ens2 src 10.0.0.3 uid 0"]),
}
DEFAULTS = host_config().replica  # the schema's replica settings: what a member sets by default


def test_ranks_follow_the_node_order_and_meet_at_the_heads_routed_address():
    jobs = plan(R, ADDRESS, ROUTES, {h: DEFAULTS for h in R.members})
    assert [(j.rank, j.world) for j in jobs.values()] == [(0, 3), (1, 3), (2, 3)]
    assert {j.head for j in jobs.values()} == {"10.0.0.1"}  # not the inventory name
    assert {j.port for j in jobs.values()} == {29599}
    assert dict(jobs["gpu03"].env) == {"GLOO_SOCKET_IFNAME": "ens2", "NCCL_SOCKET_IFNAME": "ens2"}


def test_replica_nic_and_port_from_the_inventory_win():
    settings = {
        "gpu01": host_config({"replica_allreduce_port": 30000}).replica,
        "gpu02": host_config({"replica_nic": "ib0"}).replica,
        "gpu03": DEFAULTS,
    }
    jobs = plan(R, ADDRESS, ROUTES, settings)
    assert jobs["gpu02"].port == 30000 and dict(jobs["gpu02"].env)["NCCL_SOCKET_IFNAME"] == "ib0"


def test_without_a_route_the_inventory_address_and_no_interface():
    jobs = plan(R, ADDRESS, {h: None for h in R.members}, {h: DEFAULTS for h in R.members})
    assert jobs["gpu02"].head == "gpu01.example" and jobs["gpu02"].env == ()


@pytest.mark.parametrize(
    "result,status,words",
    [
        (
            {
                "ok": True,
                "backend": "nccl",
                "world": 3,
                "bytes": 4 << 20,
                "seconds": 0.0021,
                "busbw_gbps": 2.66,
                "sum_ok": True,
            },
            "pass",
            ["nccl all-reduce of 4 MiB over 3 members", "2.1 ms", "2.66 GB/s"],
        ),
        ({"ok": False, "backend": "gloo", "world": 3, "sum_ok": False}, "fail", ["wrong sum"]),
        (
            {"ok": False, "backend": "nccl", "error": "DistNetworkError: timed out"},
            "fail",
            ["failed on gpu02: DistNetworkError", "open TCP 29599"],
        ),
        (None, "fail", ["no all-reduce result from gpu02"]),
    ],
)
def test_checks_from_results(result, status, words):
    c = to_check(R, "gpu02", result, 29599).to_dict()
    assert c["id"] == "replica.allreduce:r1" and c["status"] == status
    assert all(w in c["message"] + c["fix"] for w in words), c


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job(head: str, port: int, rank: int, env: tuple[tuple[str, str], ...] = ()) -> AllReduceJob:
    return AllReduceJob(f"gpu0{rank + 1}", rank, 2, head, port, env)


@pytest.mark.parametrize("head", ["127.0.0.1", "::1"])
def test_the_probe_all_reduces_across_two_real_ranks_with_gloo(head):
    """Over IPv6 too: the rendezvous URL brackets the head (tcp://[::1]:port)."""
    # IPv6 loopback is part of the test, not optional: a machine without it fails here
    assert head != "::1" or socket.has_ipv6, "this machine has no IPv6: the ::1 case cannot run"
    port = _free_port()
    procs = [
        subprocess.Popen([sys.executable, "-c", PROBE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for rank, p in enumerate(procs):
        job = _job(head, port, rank, (("GLOO_SOCKET_IFNAME", "lo"),))
        p.stdin.write(json.dumps(job.payload(numel=1024, iters=2)))
        p.stdin.close()
    results = [json.loads(p.stdout.read().strip().splitlines()[-1]) for p in procs]
    for p in procs:
        p.wait(timeout=120)
    assert [(r["ok"], r["sum_ok"], r["backend"], r["rank"]) for r in results] == [
        (True, True, "gloo", 0),
        (True, True, "gloo", 1),
    ]
    assert to_check(R, "gpu01", results[0], port).status == "pass"


def test_a_rank_alone_reports_the_timeout_instead_of_raising():
    port = _free_port()
    p = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        input=json.dumps(_job("127.0.0.1", port, 1).payload(numel=8, iters=1, timeout_s=3)),
    )
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["ok"] is False and r["error"]
