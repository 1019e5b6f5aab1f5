"""Multi-host replicas: one model served by several hosts together (TP inside each host, PP
across them, on Ray or on vLLM's own multi-node mode), found and checked from the inventory.

Why a module of its own: a replica is a property of a *set* of hosts (who is head, how many
GPUs each gives, whether TP would cross a host), which no per-host HostConfig can check. It is
checked when the inventory is loaded, before anything connects, with one line per problem
naming the file, the group that set `replica`, the key and the fix. What only the hosts can
tell (their GPUs, driver, versions, NIC, clock) is vfleet/roles/replica/_preflight.py.

    replicas = find_replicas(inv)          # {name: Replica}; raises VfleetError when invalid

A run finds them once, in its fleet model (vfleet/config/fleet.py), which also answers which
replica a host is in and which hosts serve.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

from vfleet.config import vllm_facts
from vfleet.config.gateway_access import GatewayAccessReader
from vfleet.config.hostconfig import HostConfig
from vfleet.config.replica_settings import ReplicaSettings
from vfleet.config.variables import VARIABLES, VLLM_GROUP
from vfleet.engine.errors import InventoryError
from vfleet.engine.inventory import Host, Inventory

__all__ = ["Replica", "find_replicas", "replicas_and_problems", "member_config", "SAME_ON_EVERY_MEMBER", "PER_MEMBER"]

# What may differ between the members of a replica: how each is reached (connection), what
# only the controller waits for, the host's own GPUs, NICs and bind address, how weights reach
# it, its preflight options, its process environment (vllm_env: thread binding to that host's
# cores, its libraries' settings, like nccl_env; the engine's own settings are flags and reach
# every rank from the head), and its gateway and monitoring roles (the gateway routes to the
# head only; monitoring is fleet-wide, vfleet/config/monitoring.py). Every other variable
# reaches the engine (the vLLM or Ray command line, the unit, its environment, the venv, the
# weights) and must be equal on every member, or the ranks disagree about the engine they run:
# a new variable is compared unless it is added here.
PER_MEMBER = frozenset(
    {
        "ansible_host",
        "ssh_host",
        "ansible_user",
        "ssh_user",
        "ansible_port",
        "ssh_port",
        "ansible_ssh_private_key_file",
        "ansible_private_key_file",
        "ssh_key_file",
        "ansible_connection",
        "connection",
        "known_hosts_file",
        "host_key_checking",
        "become",
        "connect_timeout",
        "command_timeout",
        "max_fail_percentage",
        "install_timeout",
        "ready_timeout",
        "cuda_visible_devices",
        "nccl_env",
        "vllm_env",
        "replica_nic",
        "replica_head",
        "vllm_host",
        "gpu_profile",
        "model_size_bytes",
        "weights_fanout",
        "weights_distribution",
        "weights_bwlimit",
        "weights_peer_ssh_key",
        "preflight_smi_xml",
        "replica_max_clock_skew_ms",
    }
)
_PER_MEMBER_PREFIXES = ("gateway_", "monitoring_")
SAME_ON_EVERY_MEMBER = tuple(
    v.name for v in VARIABLES if v.name not in PER_MEMBER and not v.name.startswith(_PER_MEMBER_PREFIXES)
)
_SECRET = frozenset(v.name for v in VARIABLES if v.secret)
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
    where: str  # "inv.yaml: line 10: group 'r1'": where `replica` was set

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
        return {
            "name": self.name,
            "head": self.head,
            "workers": list(self.workers),
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "gpus_per_host": self.gpus_per_host,
            "backend": self.backend,
        }


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
        out.append(
            f"{at}: {', '.join(not_serving)} not in group '{VLLM_GROUP}'; fix: put every member under {VLLM_GROUP}"
        )
    if len(hosts) < 2:
        out.append(
            f"{at}: replica: only {first.name} is a member; fix: add the other hosts to the group, "
            "or unset `replica` for a single-host replica"
        )
    out += [f"{at}: {line}" for line in _differences(hosts)]
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
            out.append(
                f"{at}: tensor_parallel_size x pipeline_parallel_size = {tp * pp} GPUs do not split over "
                f"{n} hosts; fix: make TP x PP a multiple of {n}, or set replica_gpus_per_host"
            )
        g = max(1, (tp * pp) // n)
    elif n * g != tp * pp:
        split_ok = False
        want = f"pipeline_parallel_size {n * g // tp}" if (n * g) % tp == 0 else "TP x PP to match"
        out.append(
            f"{at}: {n} hosts x replica_gpus_per_host {g} = {n * g} GPUs, but TP {tp} x PP {pp} "
            f"= {tp * pp}; fix: {want}, or change the members"
        )
    if split_ok and not cfg.replica.allow_cross_host_tp and (tp > g or g % tp):
        out.append(
            f"{at}: tensor_parallel_size {tp} does not divide one host's {g} GPUs, so a TP group would "
            f"cross hosts (slow over the network); fix: a tensor_parallel_size that divides {g}, with "
            "more pipeline stages, or allow_cross_host_tp: true"
        )
    backend = cfg.replica.backend
    out += _backend_problems(at, backend, cfg.vllm_package, cfg.vllm_version, pp)
    if out:
        return out, None
    members = heads + [h for h in hosts if h not in heads] if heads else hosts
    return [], Replica(name, tuple(h.name for h in members), tp, pp, g, backend, first.sources.get("replica", ""))


def _differences(hosts: list[Host]) -> list[str]:
    """One line per engine variable the members disagree on (secrets named, never shown)."""
    out = []
    for key in SAME_ON_EVERY_MEMBER:
        if len({repr(h.vars.get(key)) for h in hosts}) > 1:
            shown = (
                "values not shown: a secret"
                if key in _SECRET
                else ", ".join(f"{h.name}={h.vars.get(key)!r}" for h in hosts)
            )
            out.append(f"{key} differs between members ({shown}); fix: set it once on the replica's group")
    return out


def _backend_problems(at: str, backend: str, package: str, version: str | None, pp: int) -> list[str]:
    """What the pinned build cannot run, from the facts table (vfleet/config/data/vllm_facts.yaml multinode)."""
    mn = vllm_facts.data()["multinode"]
    if pp > 1 and any(
        r["package"] == package and str(r["version"]) == str(version) and r["pp"] == "fails"
        for r in mn.get("cpu_parallel_modes", [])
    ):
        return [
            f"{at}: pipeline_parallel_size {pp}: {package} {version} fails on the first request with "
            "pipeline parallelism (docs/evidence/replica-cpu-0.32.0); fix: pipeline_parallel_size 1 and "
            "the GPUs of every member in tensor_parallel_size, with allow_cross_host_tp: true"
        ]
    row = next(r for r in mn["backends"] if r["backend"] == backend)
    if backend == "ray" and any(
        r["package"] == package and vllm_facts.version_ge(r["through"], str(version)) for r in mn["cpu_no_ray"]
    ):
        return [
            f"{at}: replica_backend ray: {package} {version} cannot run vLLM's Ray executor (the CPU platform "
            "has no Ray device key); fix: replica_backend: mp"
        ]
    if version is not None and not vllm_facts.version_ge(str(version), row["first"]):
        return [
            f"{at}: replica_backend {backend}: vLLM {version} has no multi-node {backend} mode (from {row['first']}); "
            f"fix: vllm_version >= {row['first']} or replica_backend: ray"
        ]
    return []


def _grouped(inv: Inventory) -> dict[str, list[Host]]:
    groups: dict[str, list[Host]] = {}
    for h in inv.hosts.values():
        name = ReplicaSettings.from_vars(h.vars).name
        if name:
            groups.setdefault(name, []).append(h)
    return groups


def replicas_and_problems(
    inv: Inventory,
    configs: Mapping[str, HostConfig] | None = None,
) -> tuple[dict[str, Replica], list[str]]:
    """The inventory's valid multi-host replicas and one line per problem of the others, so the
    fleet model reports them with its other checks at once. `configs`: the run's configs by
    host (the fleet model's), so none is built twice."""
    out: dict[str, Replica] = {}
    errors: list[str] = []
    for name, hosts in _grouped(inv).items():
        cfg = configs[hosts[0].name] if configs is not None else HostConfig.from_host(hosts[0])
        problems, r = _problems(inv, name, hosts, cfg)
        errors += problems
        if r is not None:
            out[name] = r
    return out, errors


def find_replicas(inv: Inventory, configs: Mapping[str, HostConfig] | None = None) -> dict[str, Replica]:
    """The inventory's multi-host replicas; InventoryError listing every problem when one is invalid."""
    out, errors = replicas_and_problems(inv, configs)
    if errors:
        raise InventoryError(errors)
    return out


def member_config(host: Host, access: GatewayAccessReader | None = None) -> HostConfig:
    """HostConfig.from_host, plus Ray pinned into the vLLM venv of a ray-backend member: the
    install spec (and so the venv's marker) then says which Ray it holds, and an upgrade
    builds the new venv with the same Ray beside the running one."""
    cfg = HostConfig.from_host(host, access)
    if cfg.replica.name and cfg.replica.backend == "ray":
        pins = tuple(p for p in cfg.vllm_extra_pins if not re.match(r"ray(\[[^]]*\])?\s*[=<>!~]", p))
        cfg = dataclasses.replace(cfg, vllm_extra_pins=pins + (f"ray=={cfg.replica.ray.version}",))
    return cfg
