"""One run's model of the fleet: every host's HostConfig and the multi-host replicas, built
once from the loaded inventory, and who serves, routes and watches.

    fleet = Fleet.of(inventory)            # InventoryError: every cross-variable problem, one line each
    fleet.config("gpu01")                  # the one HostConfig of that host in this run
    fleet.serving_hosts                    # what the gateways balance over

Why one model: the replicas used to be found again at each step that needed them (the
gateway's backends, the smoke step, the replica deploy, the rollout, the renderer), and a
host's config was built again by each of them, so one run could hold several copies that
had to agree. Here both are made once, when the inventory is loaded, and passed on; the
runner's host contexts get their configs from this same model (Play's `configure`).

It is also where the rules across variables and hosts are checked (the replicas,
vfleet/config/cross_checks.py, the fleet-wide monitoring values, vllm_extra_args and vllm_env
against the pinned version's flags, vfleet/config/extra_args.py): every task builds it before
its first connection, so `vfleet inventory`, render, preflight, deploy and restart all refuse
the same inventory with the same lines."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Collection, Mapping

from vfleet.config.cross_checks import check_fleet
from vfleet.config.extra_args import fleet_errors as extra_args_errors
from vfleet.config.gateway_access import GatewayAccessReader
from vfleet.config.hostconfig import HostConfig
from vfleet.config.lora import lora_problems
from vfleet.config.monitoring import MonitoringSettings, fleet_settings
from vfleet.config.replicas import Replica, member_config, replicas_and_problems
from vfleet.config.speculative import speculative_problems
from vfleet.config.variables import GATEWAY_GROUP, MONITORING_GROUP, VLLM_GROUP
from vfleet.engine.errors import InventoryError
from vfleet.engine.inventory import Host, Inventory

__all__ = ["Fleet"]


@dataclass(frozen=True, eq=False)
class Fleet:
    """The validated inventory with each host's config (a replica member's with its Ray pin,
    vfleet/config/replicas.py member_config) and the replicas by name. Compared by identity:
    a run has one."""

    inventory: Inventory
    replicas: Mapping[str, Replica]
    configs: Mapping[str, HostConfig]
    # The fleet-wide monitoring values (every config's `monitoring` carries them too); None
    # only for an inventory without hosts.
    monitoring: MonitoringSettings | None = None
    # Problems that do not stop a run, found reading the gateways' files (a key file others
    # can read): the CLI prints them with the inventory's warnings.
    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, inventory: Inventory) -> "Fleet":
        """Build every host's config and check the fleet before anything connects: the
        replicas, the fleet-wide monitoring values, ports and addresses (InventoryError with
        every problem at once)."""
        access = GatewayAccessReader()
        configs = {h.name: member_config(h, access) for h in inventory.hosts.values()}
        sources = {h.name: h.sources for h in inventory.hosts.values()}
        monitoring, errors = fleet_settings(
            configs.values(), sources, path=str(inventory.path), gateway_group=GATEWAY_GROUP
        )
        if monitoring is not None and not errors:
            configs = {n: _with_fleet_monitoring(c, monitoring) for n, c in configs.items()}
        replicas, replica_errors = replicas_and_problems(inventory, configs)
        errors += (
            replica_errors
            + check_fleet(inventory, configs, replicas)
            + extra_args_errors(configs.values())
            + access.errors
            + _tenant_keys_of_backends(configs.values())
            + [
                f"{inventory.path}: {line}"
                for line in lora_problems(configs.values()) + speculative_problems(configs.values())
            ]
        )
        if errors:
            raise InventoryError(errors)
        return cls(inventory, replicas, configs, monitoring, tuple(access.warnings))

    # -- configs --------------------------------------------------------------------------
    def config(self, host: str | Host) -> HostConfig:
        """A host's config; a Host is also accepted so Play(configure=fleet.config) works."""
        return self.configs[host if isinstance(host, str) else host.name]

    def configs_of(self, hosts: list[Host]) -> list[HostConfig]:
        return [self.configs[h.name] for h in hosts]

    # -- hosts by role, in inventory order --------------------------------------------------
    def in_group(self, group: str) -> list[Host]:
        return [h for h in self.inventory.hosts.values() if group in h.groups]

    @property
    def vllm_hosts(self) -> list[Host]:
        return self.in_group(VLLM_GROUP)

    @property
    def gateways(self) -> list[Host]:
        return self.in_group(GATEWAY_GROUP)

    @property
    def monitoring_hosts(self) -> list[Host]:
        return self.in_group(MONITORING_GROUP)

    @property
    def serving_hosts(self) -> list[Host]:
        """The vLLM hosts that answer requests: single-host replicas and each replica's head
        (a worker serves no HTTP). The gateway balances over these."""
        workers = self.workers
        return [h for h in self.vllm_hosts if h.name not in workers]

    # -- replicas -------------------------------------------------------------------------
    def replica_of(self, host: str) -> Replica | None:
        """The replica a host belongs to (None: it serves on its own)."""
        return next((r for r in self.replicas.values() if host in r.members), None)

    @property
    def members(self) -> set[str]:
        """Every host of a multi-host replica (they deploy and restart as one)."""
        return {h for r in self.replicas.values() for h in r.members}

    @property
    def workers(self) -> set[str]:
        """Every replica member but the heads (no HTTP: never smoked, never a backend)."""
        return {h for r in self.replicas.values() for h in r.workers}


def _tenant_keys_of_backends(configs: Collection[HostConfig]) -> list[str]:
    """A tenant key equal to a vLLM host's api_key would let the tenant past the gateway's
    limits, straight to vLLM (the gateway's own api_key is checked as its tenants are read)."""
    backend = {c.api_key: c.name for c in configs if c.serves and c.api_key}
    return [
        f"host '{g.name}': vars.gateway_tenants: tenant '{t.name}' has the same key as the "
        f"api_key of host '{backend[t.key]}'; give the tenant a key of its own"
        for g in configs
        for t in g.gateway_tenants
        if t.key in backend
    ]


def _with_fleet_monitoring(cfg: HostConfig, fleet: MonitoringSettings) -> HostConfig:
    """`cfg` with the fleet-wide monitoring values; its gateway ports stay its own."""
    own = dataclasses.replace(
        fleet,
        gateway_status_port=cfg.monitoring.gateway_status_port,
        gateway_exporter_port=cfg.monitoring.gateway_exporter_port,
        gateway_mtail_port=cfg.monitoring.gateway_mtail_port,
    )
    return cfg if own == cfg.monitoring else dataclasses.replace(cfg, monitoring=own)
