"""Optional preflight check across a replica's members: one torch.distributed all-reduce over
the network the engine will use (`vfleet preflight --replica-allreduce`).

    jobs = plan(replica, address, routes, settings)        # host -> AllReduceJob (rank, env)
    results = run(play, replicas, member_facts)            # host -> the probe's JSON
    check = to_check(replica, host, results[host])         # pass | fail, one per member

Why: the member checks (vfleet/roles/replica/_preflight.py) prove the versions agree and the head's
address answers on the routed interface, but not that the collective library itself can form
a group across hosts on it (a firewall on the rendezvous or data ports, a wrong
NCCL_SOCKET_IFNAME, an MTU mismatch show only then). This runs the real thing once, with the
vLLM venv's own python and torch, every member a rank (rank = node rank, head first),
backend `nccl` where torch sees a GPU (one GPU per member: the cross-host link is what is
tested; `--nccl-bandwidth` measures a host's own GPUs) and `gloo` where it sees none (the
CPU lab). The interface comes from the same route fact the service environment uses. Every
member's result (backend, sum correct, seconds, bus bandwidth) goes into the report. It is
opt-in: it holds the port and, on GPU hosts, some memory of GPU 0 for a few seconds.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from vfleet.config.hostconfig import hostport
from vfleet.config.replica_settings import ReplicaSettings
from vfleet.config.replicas import Replica
from vfleet.engine.runner import HostContext, Play
from vfleet.roles.preflight import FAIL, PASS, Check
from vfleet.roles.replica._facts import Route

__all__ = ["AllReduceJob", "AllReduceResult", "plan", "run", "to_check", "PROBE"]

q = shlex.quote


@dataclass(frozen=True)
class AllReduceResult:
    """One member's probe result as it printed it (the host's "replica_allreduce" section)."""

    REPORT_KEY: ClassVar[str] = "replica_allreduce"

    result: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.result


# Reads {"init_method", "rank", "world", "numel", "iters", "timeout_s", "env"} on stdin and
# prints one JSON line; never raises (a failure is {"ok": false, "error": ...}).
PROBE = r"""
import datetime, json, os, sys, time
p = json.loads(sys.stdin.read())
os.environ.update(p["env"])
out = {"ok": False, "rank": p["rank"], "world": p["world"]}
try:
    import torch
    import torch.distributed as dist
    out["backend"] = backend = "nccl" if torch.cuda.is_available() else "gloo"
    dev = "cuda:0" if backend == "nccl" else "cpu"
    dist.init_process_group(backend, init_method=p["init_method"], rank=p["rank"],
                            world_size=p["world"], timeout=datetime.timedelta(seconds=p["timeout_s"]))
    x = torch.full((p["numel"],), float(p["rank"] + 1), dtype=torch.float32, device=dev)
    dist.all_reduce(x)
    want = p["world"] * (p["world"] + 1) / 2
    out["sum_ok"] = bool(torch.all(x == want).item())
    if backend == "nccl":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(p["iters"]):
        dist.all_reduce(x)
    if backend == "nccl":
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / p["iters"]
    size = p["numel"] * 4
    out.update(seconds=round(dt, 6), bytes=size,
               busbw_gbps=round(2 * (p["world"] - 1) / p["world"] * size / dt / 1e9, 3))
    out["ok"] = out["sum_ok"]
    dist.destroy_process_group()
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
print(json.dumps(out))
"""


@dataclass(frozen=True)
class AllReduceJob:
    """What one member runs: its rank in the group and the interface environment."""

    host: str
    rank: int
    world: int
    head: str  # the head's address on the routed network (the rendezvous)
    port: int
    env: tuple[tuple[str, str], ...]

    @property
    def init_method(self) -> str:
        """torch's tcp:// rendezvous URL: an IPv6 head in brackets (torch reads it with urlparse,
        as vLLM's get_tcp_uri writes it: vllm/utils/network_utils.py)."""
        return f"tcp://{hostport(self.head, self.port)}"

    def payload(self, numel: int = 1 << 20, iters: int = 5, timeout_s: int = 60) -> dict[str, Any]:
        return {
            "init_method": self.init_method,
            "rank": self.rank,
            "world": self.world,
            "numel": numel,
            "iters": iters,
            "timeout_s": timeout_s,
            "env": dict(self.env),
        }


def plan(
    replica: Replica,
    address: Mapping[str, str],
    routes: Mapping[str, Route | None],
    settings: Mapping[str, ReplicaSettings],
) -> dict[str, AllReduceJob]:
    """One job per member. The rendezvous is the head's address as its first worker routes
    to it (the head's own route is to that worker: its src is the head's address there), on
    the head's replica_allreduce_port."""
    head_route = routes.get(replica.head)
    head = (head_route.src if head_route and head_route.src else None) or address[replica.head]
    port = settings[replica.head].allreduce_port
    jobs = {}
    for host in replica.members:
        route = routes.get(host)
        nic = settings[host].nic or (route.dev if route else None)
        env = (("GLOO_SOCKET_IFNAME", nic), ("NCCL_SOCKET_IFNAME", nic)) if nic and nic != "lo" else ()
        jobs[host] = AllReduceJob(host, replica.node_rank(host), len(replica.members), head, port, env)
    return jobs


def run(
    play: Play,
    replicas: Mapping[str, Replica],
    member_facts: Mapping[str, Mapping[str, Any]],
    settings: Mapping[str, ReplicaSettings],
) -> dict[str, dict[str, Any]]:
    """Run every replica's all-reduce, all members of one replica at the same time (the ranks
    wait for each other); host -> the probe's result, also kept in the host's report data."""
    out: dict[str, dict[str, Any]] = {}
    for r in replicas.values():
        if not all(h in member_facts and h in play.active for h in r.members):
            continue
        address = {h: play.contexts[h].config.address for h in r.members}
        jobs = plan(r, address, {h: member_facts[h].get("route") for h in r.members}, settings)

        def step(ctx: HostContext, jobs: dict[str, AllReduceJob] = jobs) -> None:
            python = f"{ctx.config.vllm_root}/current/bin/python"
            res = ctx.run(f"{q(python)} -c {q(PROBE)}", stdin=json.dumps(jobs[ctx.name].payload()), timeout=180)
            lines = res.stdout.strip().splitlines()
            try:
                result = json.loads(lines[-1]) if lines else {}
            except ValueError:
                result = {}
            if not result:
                tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [f"exit {res.exited}"]
                result = {"ok": False, "error": f"{python}: {tail[0][:300]}"}
            out[ctx.name] = result
            ctx.result.note(AllReduceResult(result))

        play.run_step(f"preflight: replica {r.name} all-reduce", step, hosts=list(r.members), forks=len(r.members))
    return out


def to_check(replica: Replica, host: str, result: Mapping[str, Any] | None, port: int) -> Check:
    """The member's check from its probe result."""
    cid = f"replica.allreduce:{replica.name}"
    if not result:
        return Check(
            cid,
            FAIL,
            f"replica {replica.name}: no all-reduce result from {host}",
            "run preflight again with every member reachable",
        )
    backend = result.get("backend", "?")
    if result.get("ok"):
        mib = int(result.get("bytes", 0)) / 2**20
        return Check(
            cid,
            PASS,
            f"{backend} all-reduce of {mib:g} MiB over {result.get('world')} members: sum correct, "
            f"{float(result.get('seconds', 0)) * 1000:.1f} ms, bus bandwidth {result.get('busbw_gbps')} GB/s",
        )
    if result.get("sum_ok") is False:
        return Check(
            cid,
            FAIL,
            f"{backend} all-reduce over {result.get('world')} members returned a wrong sum",
            "check that every member runs the same torch and that its GPUs pass preflight",
        )
    return Check(
        cid,
        FAIL,
        f"{backend} all-reduce failed on {host}: {result.get('error', 'no result')}",
        f"open TCP {port} (rendezvous) and the collective's ports between members, and check "
        "replica_nic / the route to the head; install the venv first if python is missing",
    )
