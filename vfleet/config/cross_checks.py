"""Rules across variables and across hosts, checked on the whole fleet model before anything
connects (vfleet/config/fleet.py runs them in Fleet.of, so every task refuses the same way).

    problems = check_fleet(inventory, configs, replicas)     # [] or one line per problem

Why a module of its own: the schema checks one variable at a time, and each role reads only
its own variables, so a rule that needs two of them had no home, and its breakage showed only
on the host: two services on one port (the second never binds, or worse, a client reaches the
wrong one), a Ray worker range swallowing vLLM's port, an address one program reads and the
next does not (vfleet/config/addresses.py).

What a host listens on follows from its groups and its replica:

- every host reached over SSH: its SSH port (ansible_port / ssh_port);
- a vLLM host that serves (not a replica's worker): vllm_port;
- a gateway: gateway_port, monitoring_gateway_status_port (nginx's stub_status),
  monitoring_gateway_exporter_port (prometheus-nginx-exporter), monitoring_gateway_mtail_port (mtail);
- a monitoring host: monitoring_port (Prometheus);
- a replica's head: replica_allreduce_port (preflight --replica-allreduce) and, per backend,
  ray_port (Ray's GCS) or replica_master_port (vLLM's --master-port);
- a member of a ray-backend replica: ray_node_manager_port, ray_object_manager_port and
  the worker range ray_min_worker_port..ray_max_worker_port (`ray start` pins every one,
  vfleet/roles/replica/_ray_render.py).

Hosts that share an address share its ports (clients reach ADDRESS:PORT whatever the
inventory name), so the rule holds across them too: two services on one machine are two
inventory names with one address, and need ports of their own. One port stays shared: the
same variable of one unit listed under two names (one address, one SSH port, one
service_name: the same process listens), e.g. SSH itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from vfleet.config.addresses import address_problem, ip_problem, machine_key
from vfleet.config.hostconfig import HostConfig
from vfleet.config.replicas import Replica
from vfleet.config.variables import MONITORING_GROUP
from vfleet.engine.inventory import Host, Inventory
from vfleet.engine.pathrules import is_host_source

__all__ = ["Listener", "listeners", "check_fleet", "RAY_MIN_PORT"]

# Ray refuses a worker port or a GCS address port below 1024 (ray/_private/parameter.py
# RayParams._check_usage: "min_worker_port must be 0 or an integer between 1024 and 65535";
# ray/_private/services.py extract_ip_port: "Must be between 1024 and 65535").
RAY_MIN_PORT = 1024


@dataclass(frozen=True)
class Listener:
    """One port a host listens on, the variable that sets it, and who listens: the unit
    (service_name) on the machine (address, SSH port); None for the machine's sshd."""

    host: str
    var: str
    port: int
    owner: tuple[int, str | None]

    def same_listener(self, other: "Listener") -> bool:
        """The same process seen through two inventory names."""
        return (
            self.host != other.host and self.owner == other.owner and (self.var == other.var or self.owner[1] is None)
        )


def _ssh_var(host: Host) -> str:
    return "ssh_port" if host.sources.get("ssh_port", "default") != "default" else "ansible_port"


def listeners(host: Host, cfg: HostConfig, replica: Replica | None) -> list[Listener]:
    """Every single port `host` listens on (the Ray worker range is apart: `_worker_range`)."""
    out: list[tuple[str, int]] = []
    if cfg.serves and (replica is None or replica.head == cfg.name):
        out.append(("vllm_port", cfg.vllm_port))
    if cfg.is_gateway:
        out += [
            ("gateway_port", cfg.gateway_port),
            ("monitoring_gateway_status_port", cfg.monitoring.gateway_status_port),
            ("monitoring_gateway_exporter_port", cfg.monitoring.gateway_exporter_port),
            ("monitoring_gateway_mtail_port", cfg.monitoring.gateway_mtail_port),
        ]
    if MONITORING_GROUP in cfg.groups:
        out.append(("monitoring_port", cfg.monitoring.port))
    if replica is not None:
        rs = cfg.replica
        if replica.head == cfg.name:
            out.append(("replica_allreduce_port", rs.allreduce_port))
            out.append(
                ("ray_port", rs.ray.port) if replica.backend == "ray" else ("replica_master_port", rs.master_port)
            )
        if replica.backend == "ray":
            out += [
                ("ray_node_manager_port", rs.ray.node_manager_port),
                ("ray_object_manager_port", rs.ray.object_manager_port),
            ]
    ssh = [Listener(host.name, _ssh_var(host), host.port, (host.port, None))] if host.connection != "local" else []
    return ssh + [Listener(host.name, var, port, (host.port, cfg.service_name)) for var, port in out]


def _worker_range(cfg: HostConfig, replica: Replica | None) -> tuple[int, int] | None:
    if replica is None or replica.backend != "ray":
        return None
    return cfg.replica.ray.min_worker_port, cfg.replica.ray.max_worker_port


def _address_problems(host: Host, cfg: HostConfig) -> list[str]:
    """The host's own address, vllm_host and gateway_listen_address."""
    var = next((k for k in ("ssh_host", "ansible_host") if host.vars.get(k) == host.address), "host name")
    checks = [(var, host.address, address_problem(host.address))]
    if cfg.serves:
        checks.append(("vllm_host", cfg.vllm_host, address_problem(cfg.vllm_host)))
    if cfg.gateway_listen_address is not None:
        checks.append(("gateway_listen_address", cfg.gateway_listen_address, ip_problem(cfg.gateway_listen_address)))
    return [f"host '{host.name}': {name} {value!r}: {why}" for name, value, why in checks if why]


def _ray_port_problems(cfg: HostConfig, replica: Replica | None) -> list[str]:
    if replica is None or replica.backend != "ray":
        return []
    ray = cfg.replica.ray
    out = [
        f"host '{cfg.name}': {var} {port}: Ray takes ports {RAY_MIN_PORT}-65535 here; fix: a port from {RAY_MIN_PORT}"
        for var, port in (
            ("ray_port", ray.port),
            ("ray_min_worker_port", ray.min_worker_port),
            ("ray_max_worker_port", ray.max_worker_port),
        )
        if port < RAY_MIN_PORT
    ]
    if ray.min_worker_port > ray.max_worker_port:
        out.append(
            f"host '{cfg.name}': ray_min_worker_port {ray.min_worker_port} is above ray_max_worker_port "
            f"{ray.max_worker_port}; fix: min <= max"
        )
    return out


def _clash(a: Listener, b: Listener, where: str) -> str:
    if a.host == b.host:
        return f"host '{a.host}': {a.var} and {b.var} are both {a.port}; fix: give each its own port"
    return (
        f"hosts '{a.host}' and '{b.host}' share the address {where}: {a.host}'s {a.var} and {b.host}'s "
        f"{b.var} are both {a.port}; fix: give each its own port"
    )


def _port_problems(where: str, ports: list[Listener], ranges: dict[str, tuple[int, int]]) -> list[str]:
    """Ports of the hosts at one address: each distinct (one sshd may serve several names), none
    inside a Ray worker range."""
    out: list[str] = []
    first: dict[int, Listener] = {}
    for p in ports:
        seen = first.setdefault(p.port, p)
        if seen is not p and not seen.same_listener(p):
            out.append(_clash(seen, p, where))
    for owner, (lo, hi) in ranges.items():
        if lo > hi:
            continue
        for p in ports:
            if lo <= p.port <= hi:
                whose = "its" if p.host == owner else f"{owner}'s"
                out.append(
                    f"host '{p.host}': {p.var} {p.port} is inside {whose} Ray worker ports "
                    f"ray_min_worker_port..ray_max_worker_port ({lo}-{hi}); fix: move it out or narrow the range"
                )
    spans = sorted((lo, hi, h) for h, (lo, hi) in ranges.items() if lo <= hi)
    out += [
        f"hosts '{a}' and '{b}' share the address {where} and their Ray worker ranges overlap; fix: separate ranges"
        for (_, hi_a, a), (lo_b, _, b) in zip(spans, spans[1:])
        if lo_b <= hi_a
    ]
    return out


def _weights_problems(host: Host, cfg: HostConfig) -> list[str]:
    """The chain cuts the model into pieces on the controller: a HOST:/path source has none there."""
    if cfg.weights_distribution == "chain" and cfg.model_source and is_host_source(cfg.model_source):
        return [
            f"host '{host.name}': weights_distribution chain needs model_source on the controller (a folder "
            f"or hf://), not {cfg.model_source}; set weights_distribution: waves for a HOST:/path source"
        ]
    return []


def check_fleet(inventory: Inventory, configs: Mapping[str, HostConfig], replicas: Mapping[str, Replica]) -> list[str]:
    """Every cross-variable problem of the fleet, one line each, prefixed with the inventory's path."""
    replica_of = {h: r for r in replicas.values() for h in r.members}
    hosts = list(inventory.hosts.values())
    out: list[str] = []
    by_address: dict[str, list[Host]] = {}
    for h in hosts:
        cfg, replica = configs[h.name], replica_of.get(h.name)
        out += _address_problems(h, cfg) + _ray_port_problems(cfg, replica) + _weights_problems(h, cfg)
        by_address.setdefault(machine_key(h.address), []).append(h)
    for where, group in by_address.items():
        ports = [p for h in group for p in listeners(h, configs[h.name], replica_of.get(h.name))]
        ranges = {h.name: r for h in group if (r := _worker_range(configs[h.name], replica_of.get(h.name)))}
        out += _port_problems(where, ports, ranges)
    return [f"{inventory.path}: {line}" for line in out]
