"""Multi-host replicas: one model served by several hosts together (TP inside each host, PP
across them, on Ray or on vLLM's own multi-node mode), found and checked from the inventory.

Why a module of its own: a replica is a property of a *set* of hosts (who is head, how many
GPUs each gives, whether TP would cross a host), which no per-host HostConfig can check. It is
checked when the inventory is loaded, before anything connects, with one line per problem
naming the file, the group that set `replica`, the key and the fix. What only the hosts can
tell (their GPUs, driver, versions, NIC, clock) is vfleet/roles/replica/preflight.py.

    replicas = find_replicas(inv)          # {name: Replica}; raises VfleetError when invalid

A run finds them once, in its fleet model (vfleet/config/fleet.py), which also answers which
replica a host is in and which hosts serve.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import Host, Inventory
from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig
from vfleet.config.replica_settings import ReplicaSettings
from vfleet.config.variables import VLLM_GROUP

__all__ = ["Replica", "find_replicas", "member_config", "SAME_ON_EVERY_MEMBER"]

# Every member must agree on these (they define one engine): a difference is an inventory error.
SAME_ON_EVERY_MEMBER = (
    "tensor_parallel_size", "pipeline_parallel_size", "replica_backend", "replica_gpus_per_host",
    "allow_cross_host_tp", "vllm_package", "vllm_version", "vllm_python", "vllm_root", "model_name",
    "model_path", "model_dir", "dtype", "max_model_len", "quantization", "kv_cache_dtype",
    "ray_version", "ray_port", "replica_master_port", "vllm_port", "service_name",
)
_GROUP_IN_SOURCE = re.compile(r"(group '[^']*'|host '[^']*'|--set)")


@dataclass(frozen=True)
class Replica:
    """A validated multi-host replica. `members` are in inventory order with the head first,
    which is also the node rank of the mp backend and the pipeline stage order."""

    name: str
    members: tuple[str, ...]
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpus_per_host: int
    backend: str
    where: str                      # "inv.yaml: line 10: group 'r1'": where `replica` was set

    @property
    def head(self) -> str:
        return self.members[0]

    @property
    def workers(self) -> tuple[str, ...]:
        return self.members[1:]

    @property
    def world_size(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def node_rank(self, host: str) -> int:
        return self.members.index(host)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "head": self.head, "workers": list(self.workers),
                "tensor_parallel_size": self.tensor_parallel_size,
                "pipeline_parallel_size": self.pipeline_parallel_size,
                "gpus_per_host": self.gpus_per_host, "backend": self.backend}


def _where(host: Host, key: str) -> str:
    src = host.sources.get(key, "")
    m = _GROUP_IN_SOURCE.search(src)
    return m.group(1) if m else f"host '{host.name}'"


def _problems(inv: Inventory, name: str, hosts: list[Host], cfg: HostConfig) -> tuple[list[str], Replica | None]:
    """`cfg` is the first member's config: the parallel sizes, backend and version it reads
    must be the same on every member (SAME_ON_EVERY_MEMBER)."""
    first = hosts[0]
    at = f"{inv.path}: {_where(first, 'replica')}: replica '{name}'"
    out: list[str] = []
    not_serving = [h.name for h in hosts if VLLM_GROUP not in h.groups]
    if not_serving:
        out.append(f"{at}: {', '.join(not_serving)} not in group '{VLLM_GROUP}'; fix: put every member under {VLLM_GROUP}")
    if len(hosts) < 2:
        out.append(f"{at}: replica: only {first.name} is a member; fix: add the other hosts to the group, "
                   "or unset `replica` for a single-host replica")
    for key in SAME_ON_EVERY_MEMBER:
        values = {repr(h.vars.get(key)) for h in hosts}
        if len(values) > 1:
            shown = ", ".join(f"{h.name}={h.vars.get(key)!r}" for h in hosts)
            out.append(f"{at}: {key} differs between members ({shown}); fix: set it once on the replica's group")
    heads = [h for h in hosts if ReplicaSettings.from_vars(h.vars).head]
    if len(heads) > 1:
        out.append(f"{at}: replica_head: true on {', '.join(h.name for h in heads)}; fix: mark one head")
    tp, pp = cfg.tensor_parallel_size, cfg.pipeline_parallel_size
    n = len(hosts)
    g = cfg.replica.gpus_per_host
    split_ok = True
    if g is None:
        split_ok = (tp * pp) % n == 0
        if not split_ok:
            out.append(f"{at}: tensor_parallel_size x pipeline_parallel_size = {tp * pp} GPUs do not split over "
                       f"{n} hosts; fix: make TP x PP a multiple of {n}, or set replica_gpus_per_host")
        g = max(1, (tp * pp) // n)
    elif n * g != tp * pp:
        split_ok = False
        want = f"pipeline_parallel_size {n * g // tp}" if (n * g) % tp == 0 else "TP x PP to match"
        out.append(f"{at}: {n} hosts x replica_gpus_per_host {g} = {n * g} GPUs, but TP {tp} x PP {pp} "
                   f"= {tp * pp}; fix: {want}, or change the members")
    if split_ok and not cfg.replica.allow_cross_host_tp and (tp > g or g % tp):
        out.append(f"{at}: tensor_parallel_size {tp} does not divide one host's {g} GPUs, so a TP group would "
                   f"cross hosts (slow over the network); fix: a tensor_parallel_size that divides {g}, with "
                   "more pipeline stages, or allow_cross_host_tp: true")
    backend = cfg.replica.backend
    out += _backend_problems(at, backend, cfg.vllm_package, cfg.vllm_version, pp)
    if out:
        return out, None
    members = heads + [h for h in hosts if h not in heads] if heads else hosts
    return [], Replica(name, tuple(h.name for h in members), tp, pp, g, backend, first.sources.get("replica", ""))


def _backend_problems(at: str, backend: str, package: str, version: str | None, pp: int) -> list[str]:
    """What the pinned build cannot run, from the facts table (vfleet/config/data/vllm_facts.yaml multinode)."""
    mn = vllm_facts.data()["multinode"]
    if pp > 1 and any(r["package"] == package and str(r["version"]) == str(version) and r["pp"] == "fails"
                      for r in mn.get("cpu_parallel_modes", [])):
        return [f"{at}: pipeline_parallel_size {pp}: {package} {version} fails on the first request with "
                "pipeline parallelism (docs/evidence/replica-cpu-0.32.0); fix: pipeline_parallel_size 1 and "
                "the GPUs of every member in tensor_parallel_size, with allow_cross_host_tp: true"]
    row = next(r for r in mn["backends"] if r["backend"] == backend)
    if backend == "ray" and any(r["package"] == package and vllm_facts.version_ge(r["through"], str(version))
                                for r in mn["cpu_no_ray"]):
        return [f"{at}: replica_backend ray: {package} {version} cannot run vLLM's Ray executor (the CPU platform "
                "has no Ray device key); fix: replica_backend: mp"]
    if version is not None and not vllm_facts.version_ge(str(version), row["first"]):
        return [f"{at}: replica_backend {backend}: vLLM {version} has no multi-node {backend} mode (from {row['first']}); "
                f"fix: vllm_version >= {row['first']} or replica_backend: ray"]
    return []


def _grouped(inv: Inventory) -> dict[str, list[Host]]:
    groups: dict[str, list[Host]] = {}
    for h in inv.hosts.values():
        name = ReplicaSettings.from_vars(h.vars).name
        if name:
            groups.setdefault(name, []).append(h)
    return groups


def find_replicas(inv: Inventory, configs: Mapping[str, HostConfig] | None = None) -> dict[str, Replica]:
    """The inventory's multi-host replicas; VfleetError listing every problem when one is invalid.
    `configs`: the run's configs by host (the fleet model's), so none is built twice."""
    out: dict[str, Replica] = {}
    errors: list[str] = []
    for name, hosts in _grouped(inv).items():
        cfg = configs[hosts[0].name] if configs is not None else HostConfig.from_host(hosts[0])
        problems, r = _problems(inv, name, hosts, cfg)
        errors += problems
        if r is not None:
            out[name] = r
    if errors:
        raise VfleetError("\n".join(errors))
    return out


def member_config(host: Host) -> HostConfig:
    """HostConfig.from_host, plus Ray pinned into the vLLM venv of a ray-backend member: the
    install spec (and so the venv's marker) then says which Ray it holds, and an upgrade
    builds the new venv with the same Ray beside the running one."""
    cfg = HostConfig.from_host(host)
    if cfg.replica.name and cfg.replica.backend == "ray":
        pins = tuple(p for p in cfg.vllm_extra_pins if not re.match(r"ray(\[[^]]*\])?\s*[=<>!~]", p))
        cfg = dataclasses.replace(cfg, vllm_extra_pins=pins + (f"ray=={cfg.replica.ray.version}",))
    return cfg

