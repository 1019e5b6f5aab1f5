"""The replica and Ray variables as typed config (vfleet/config/replica_settings.py): each
variable lands in its field, unset ones take the schema's default, none is left out."""

from __future__ import annotations

from functools import reduce

import pytest

from tests.unit.configs import host_config
from vfleet.config.variables import SCHEMA

# variable, field of HostConfig.replica (dotted), a value other than the default
ROWS = [
    ("replica", "name", "r1"),
    ("replica_head", "head", True),
    ("replica_backend", "backend", "mp"),
    ("replica_gpus_per_host", "gpus_per_host", 4),
    ("allow_cross_host_tp", "allow_cross_host_tp", True),
    ("replica_nic", "nic", "ib0"),
    ("replica_master_port", "master_port", 29600),
    ("replica_max_clock_skew_ms", "max_clock_skew_ms", 900),
    ("replica_allreduce_port", "allreduce_port", 30000),
    ("ray_version", "ray.version", "2.40.0"),
    ("ray_port", "ray.port", 6380),
    ("ray_node_manager_port", "ray.node_manager_port", 8078),
    ("ray_object_manager_port", "ray.object_manager_port", 8079),
    ("ray_min_worker_port", "ray.min_worker_port", 11000),
    ("ray_max_worker_port", "ray.max_worker_port", 11999),
]


def _get(obj: object, dotted: str) -> object:
    return reduce(getattr, dotted.split("."), obj)


@pytest.mark.parametrize("var,field,value", ROWS, ids=[r[0] for r in ROWS])
def test_each_variable_lands_in_its_field(var: str, field: str, value: object) -> None:
    assert _get(host_config({var: value}).replica, field) == value
    assert _get(host_config().replica, field) == SCHEMA.defaults()[var]


def test_every_replica_and_ray_variable_is_typed() -> None:
    names = {
        v.name
        for v in SCHEMA.specs.values()
        if v.name.startswith(("replica", "ray_")) or v.name == "allow_cross_host_tp"
    }
    assert names == {r[0] for r in ROWS}
