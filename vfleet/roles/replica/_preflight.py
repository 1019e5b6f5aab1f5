"""Preflight across the members of a multi-host replica: what no single host can judge.

    facts = gather(play, replicas)                 # one SSH round trip per member
    extra = member_checks(replicas, gpu_facts, facts, settings)   # pure, tested from data

Why these checks: a replica's ranks must run the same engine (vLLM, torch, NCCL, Python and
Ray versions identical, or the workers fail to join or, worse, compute differently), on the
same GPU model and driver, with enough GPUs per host for its share of TP x PP; the members
must reach each other on the interface NCCL/Gloo will use (the one that routes to the head),
and their clocks must agree (Ray and NCCL timeouts, and logs that can be read side by side).
The optional cross-member all-reduce (`preflight --replica-allreduce`) is
vfleet/roles/replica/_allreduce.py; the single-host one is `--nccl-bandwidth`.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from vfleet.config.replica_settings import ReplicaSettings
from vfleet.config.replicas import Replica
from vfleet.engine.facts import gather as gather_facts
from vfleet.engine.runner import HostContext, Play
from vfleet.roles.preflight import FAIL, PASS, WARN, Check
from vfleet.roles.replica._facts import ClockFact, ReachFact, Route, RouteFact, VersionsFact

__all__ = ["peer_of", "facts_for", "gather", "member_checks", "VERSION_KEYS"]

VERSION_KEYS = ("python", "vllm", "torch", "nccl", "ray")


def peer_of(replica: Replica, host: str, address: Mapping[str, str]) -> str:
    """Whom a member routes to: the head (the head itself: its first worker)."""
    return address[replica.workers[0]] if host == replica.head else address[replica.head]


def facts_for(replica: Replica, host: str, address: Mapping[str, str], python: str, ssh_port: int) -> dict[str, Any]:
    peer = peer_of(replica, host, address)
    return {
        "route": RouteFact(peer),
        "reach": ReachFact(peer, ssh_port),
        "versions": VersionsFact(python),
        "clock": ClockFact(),
    }


def read_clock(ctx: HostContext, fact: ClockFact) -> dict[str, Any]:
    """The host's clock as an offset from the controller's, in a round trip of its own.

    WHY: members are read in parallel but not at the same instant (a loaded host answers
    seconds later, and the versions probe imports torch), so comparing raw readings measures
    the reading order, not the clocks. The controller's time halfway through the round trip
    is the reference; half the round trip is how wrong that can be."""
    sent = time.time()
    clock = gather_facts(ctx, {"clock": fact})["clock"]
    back = time.time()
    if clock.get("epoch_ms") is not None:
        clock["offset_ms"] = int(clock["epoch_ms"] - (sent + back) * 500)
        clock["uncertainty_ms"] = int((back - sent) * 500) + 1
    return clock


def gather(play: Play, replicas: Mapping[str, Replica]) -> dict[str, dict[str, Any]]:
    """Member facts of every replica whose members are all in the play."""
    members = {h: r for r in replicas.values() for h in r.members if all(m in play.contexts for m in r.members)}
    address = {h: play.contexts[h].config.address for h in members}
    out: dict[str, dict[str, Any]] = {}

    def step(ctx: HostContext) -> None:
        cfg = ctx.config
        facts = facts_for(
            members[ctx.name],
            ctx.name,
            address,
            f"{cfg.vllm_root}/current/bin/python",
            int(play.contexts[members[ctx.name].head].host.port),
        )
        clock = facts.pop("clock")
        out[ctx.name] = gather_facts(ctx, facts)
        out[ctx.name]["clock"] = read_clock(ctx, clock)

    if members:
        play.run_step("preflight: replica members", step, hosts=[h for h in members if h in play.active])
    return out


def _same(replica: Replica, cid: str, label: str, values: dict[str, Any], fix: str) -> dict[str, Check]:
    known = {h: v for h, v in values.items() if v not in (None, "", {})}
    if len(known) < len(replica.members):
        missing = sorted(set(replica.members) - set(known))
        return {
            h: Check(
                cid,
                WARN,
                f"replica {replica.name}: {label} unknown on {', '.join(missing)}",
                "run preflight again after install",
            )
            for h in replica.members
        }
    distinct = set(map(str, known.values()))
    if len(distinct) == 1:
        return {
            h: Check(cid, PASS, f"replica {replica.name}: every member has {label} {known[h]}") for h in replica.members
        }
    spread = ", ".join(f"{h}={v}" for h, v in known.items())
    return {h: Check(cid, FAIL, f"replica {replica.name} mixes {label}: {spread}", fix) for h in replica.members}


def _gpu_checks(replica: Replica, gpu_facts: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Check]]:
    count = {}
    for h in replica.members:
        n = len(gpu_facts.get(h, {}).get("gpus") or [])
        count[h] = (
            Check("replica.gpus", PASS, f"{n} GPUs, the replica needs {replica.gpus_per_host}")
            if n >= replica.gpus_per_host
            else Check(
                "replica.gpus",
                FAIL,
                f"{n} GPUs, but replica {replica.name} needs {replica.gpus_per_host} "
                f"per host (TP {replica.tensor_parallel_size} x PP {replica.pipeline_parallel_size} "
                f"over {len(replica.members)} hosts)",
                "use hosts with enough GPUs or change TP/PP",
            )
        )
    model = {
        h: ",".join(sorted({g.get("name") or "?" for g in gpu_facts.get(h, {}).get("gpus") or []})) or None
        for h in replica.members
    }
    driver = {h: gpu_facts.get(h, {}).get("driver_version") for h in replica.members}
    return [
        count,
        _same(replica, "replica.gpu_model", "GPU model", model, "use one GPU model across the replica"),
        _same(replica, "replica.driver", "driver", driver, "install the same NVIDIA driver on every member"),
    ]


def _net_check(replica: Replica, host: str, f: Mapping[str, Any], nic: str | None) -> Check:
    route: Route | None = f.get("route")
    peer = route.target if route else "?"
    if route is None or not route.dev or route.dev == "lo":
        return Check("replica.nic", FAIL, f"no route from {host} to {peer}", "give the members one network")
    if nic and nic != route.dev:
        return Check(
            "replica.nic",
            WARN,
            f"replica_nic {nic}, but the route to {peer} leaves on {route.dev}",
            f"set replica_nic: {route.dev} or fix the routing",
        )
    if not f.get("reach"):
        return Check(
            "replica.nic",
            FAIL,
            f"{peer} is not reachable from {host} over {route.dev}",
            "open the members' ports to each other (Ray, NCCL, SSH)",
        )
    return Check("replica.nic", PASS, f"{peer} reachable over {route.dev} (src {route.src})")


def _clock_check(replica: Replica, host: str, facts: Mapping[str, Mapping[str, Any]], max_skew_ms: int) -> Check:
    mine = facts.get(host, {}).get("clock") or {}
    head = facts.get(replica.head, {}).get("clock") or {}
    if mine.get("epoch_ms") is None or head.get("epoch_ms") is None:
        return Check("replica.clock", WARN, "clock not read", "check `date` on the members")
    # offsets from the controller's clock where they were measured (read_clock), raw readings otherwise
    skew = abs(int(mine.get("offset_ms", mine["epoch_ms"])) - int(head.get("offset_ms", head["epoch_ms"])))
    slack = int(mine.get("uncertainty_ms", 0)) + int(head.get("uncertainty_ms", 0))
    if skew - slack > max_skew_ms:
        return Check(
            "replica.clock",
            FAIL,
            f"clock {skew} ms (+-{slack} ms) from the head's (limit {max_skew_ms} ms)",
            "run chrony or systemd-timesyncd on every member",
        )
    if mine.get("ntp_synchronized") is False:
        return Check(
            "replica.clock",
            WARN,
            f"clock within {skew} ms of the head's, but not NTP-synchronised",
            "enable chrony or systemd-timesyncd",
        )
    return Check("replica.clock", PASS, f"clock within {skew} ms of the head's")


def member_checks(
    replicas: Mapping[str, Replica],
    gpu_facts: Mapping[str, Mapping[str, Any]],
    member_facts: Mapping[str, Mapping[str, Any]],
    settings: Mapping[str, ReplicaSettings],
) -> dict[str, list[dict[str, str]]]:
    """host -> check dicts (the shape audit.audit's extra_checks takes); `settings`: every
    member's replica settings (its replica_nic and clock limit)."""
    out: dict[str, list[dict[str, str]]] = {}
    for r in replicas.values():
        if not all(h in member_facts for h in r.members):
            continue
        per = _gpu_checks(r, gpu_facts)
        versions = {h: member_facts[h].get("versions") or {} for h in r.members}
        installed = all(v.get("vllm") for v in versions.values())
        for key in VERSION_KEYS:
            values = {h: v.get(key) for h, v in versions.items()}
            if installed and not any(values.values()):  # e.g. no NCCL in the CPU build, no Ray for mp
                per.append(
                    {
                        h: Check(f"replica.version.{key}", PASS, f"replica {r.name}: no {key} on any member")
                        for h in r.members
                    }
                )
                continue
            per.append(
                _same(
                    r,
                    f"replica.version.{key}",
                    key,
                    values,
                    f"install the same {key} on every member (one vllm_version and ray_version)",
                )
            )
        for h in r.members:
            checks = [c[h] for c in per if h in c]
            checks.append(_net_check(r, h, member_facts[h], settings[h].nic))
            checks.append(_clock_check(r, h, member_facts, settings[h].max_clock_skew_ms))
            out[h] = [{**c.to_dict(), "id": f"{c.id}:{r.name}"} for c in checks]
    return out
