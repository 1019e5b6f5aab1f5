"""Preflight: gather a host's facts in one round trip, audit them against the inventory, and
plan its capacity. Pure logic: the caller runs `gather_script(cfg)` on the host (over SSH, with
`sh`) and hands back its stdout; `cfg` is the host's HostConfig.

    script = gather_script(cfg)                   # one POSIX sh script for every fact
    facts  = parse_gathered(stdout, cfg)          # JSON-serialisable facts
    checks = host_checks(cfg, facts)              # [Check(id, status, message, fix)]
    extra  = fleet_checks({host: facts}, {group: [hosts]})
    snapshot_write(dir, gathered_raw_outputs(stdout), facts); facts_from_snapshot(dir, cfg)"""

from __future__ import annotations

from . import _audit as audit, _capacity as capacity
from ._adapter_facts import with_adapters
from ._capacity import DEFAULT_BLOCK_SIZE
from ._capacity.draft import draft_of
from ._capacity.figures import check_inputs
from ._capacity.parallel import ParallelPlan, plan_parallel
from ._capacity.record import CapacityRecord
from ._check_base import FAIL, PASS, WARN, Check
from ._checks import check_tp_heads, host_checks, upgrade_checks
from ._facts import gather_script
from ._fleet_checks import fleet_checks
from ._gathered import gathered_raw_outputs, parse_gathered, snapshot_from_gathered
from ._model_facts import with_model_source
from ._parsers.query_gpu_csv import parse_rows
from ._snapshot import facts_from_snapshot, snapshot_write

__all__ = [
    "audit",
    "capacity",
    "CapacityRecord",
    "Check",
    "check_inputs",
    "check_tp_heads",
    "DEFAULT_BLOCK_SIZE",
    "draft_of",
    "facts_from_snapshot",
    "FAIL",
    "fleet_checks",
    "gather_script",
    "gathered_raw_outputs",
    "host_checks",
    "ParallelPlan",
    "parse_gathered",
    "parse_rows",
    "PASS",
    "plan_parallel",
    "snapshot_from_gathered",
    "snapshot_write",
    "upgrade_checks",
    "WARN",
    "with_adapters",
    "with_model_source",
]
