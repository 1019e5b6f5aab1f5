"""The multi-host replica and Ray values of one host, as HostConfig carries them (`cfg.replica`).

Why typed: the replica checks, the all-reduce probe, the Ray units and the install pin used to
read `replica_*` and `ray_*` from host vars each with its own fallback (`get("replica_backend",
"ray")`, the schema's default looked up again for a port). The defaults are the schema's
(vfleet/config/variables.py, merged into the host's vars by the loader), read here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["RaySettings", "ReplicaSettings"]


@dataclass(frozen=True)
class RaySettings:
    """Ray pinned into a ray-backend member's venv, and the ports its node listens on (pinned so
    the members' firewalls can open exactly these)."""

    version: str
    port: int  # the head's GCS port
    node_manager_port: int
    object_manager_port: int
    min_worker_port: int
    max_worker_port: int


@dataclass(frozen=True)
class ReplicaSettings:
    """What a host says about the multi-host replica it belongs to (vfleet/config/replicas.py)."""

    name: str | None  # `replica`: None for a host that serves on its own
    head: bool
    backend: str  # "ray" or "mp"
    gpus_per_host: int | None
    allow_cross_host_tp: bool
    nic: str | None  # None: the interface that routes to the head (a fact)
    master_port: int  # mp backend: the head's --master-port
    max_clock_skew_ms: int
    allreduce_port: int  # preflight --replica-allreduce: the head's rendezvous port
    ray: RaySettings

    @classmethod
    def from_vars(cls, v: Mapping[str, Any]) -> "ReplicaSettings":
        """From a host's merged vars."""
        gpus = v.get("replica_gpus_per_host")
        ray = RaySettings(
            version=str(v["ray_version"]),
            port=int(v["ray_port"]),
            node_manager_port=int(v["ray_node_manager_port"]),
            object_manager_port=int(v["ray_object_manager_port"]),
            min_worker_port=int(v["ray_min_worker_port"]),
            max_worker_port=int(v["ray_max_worker_port"]),
        )
        return cls(
            name=None if v.get("replica") is None else str(v["replica"]),
            head=bool(v["replica_head"]),
            backend=str(v["replica_backend"]),
            gpus_per_host=None if gpus is None else int(gpus),
            allow_cross_host_tp=bool(v["allow_cross_host_tp"]),
            nic=v.get("replica_nic"),
            master_port=int(v["replica_master_port"]),
            max_clock_skew_ms=int(v["replica_max_clock_skew_ms"]),
            allreduce_port=int(v["replica_allreduce_port"]),
            ray=ray,
        )
