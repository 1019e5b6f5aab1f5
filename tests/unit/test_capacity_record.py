"""The capacity record preflight notes on a host's result (vfleet/roles/preflight/_capacity/record.py):
later steps read it typed (the gateway's max_conns), and the report's `capacity` / `layout`
entries keep the shapes they had when the plan travelled as dicts."""

from __future__ import annotations

from types import SimpleNamespace

from tests.unit.preflight_cases import QWEN
from vfleet.engine.results import HostResult
from vfleet.roles.preflight import _capacity as capacity
from vfleet.roles.preflight._capacity.parallel import plan_parallel
from vfleet.roles.preflight._capacity.record import CapacityRecord


def _noted(record: CapacityRecord) -> HostResult:
    result = HostResult("gpu01")
    record.note_on(result)
    assert result.get(CapacityRecord) is record
    return result


def test_gpu_plan_and_layout() -> None:
    plan = capacity.plan(QWEN, 81920, max_model_len=4096)
    layout = plan_parallel(QWEN, 81920, gpus_per_host=8, hosts=1)
    assert _noted(CapacityRecord(plan)).data == {"capacity": plan.to_dict()}
    result = _noted(CapacityRecord(plan, layout))
    assert result.data == {"capacity": plan.to_dict(), "layout": layout.to_dict()}
    assert list(result.to_dict())[-2:] == ["capacity", "layout"]
    assert CapacityRecord(plan).max_concurrency == plan.max_concurrency > 0


def test_cpu_build_and_no_plan() -> None:
    cpu = _noted(CapacityRecord(cpu_kv_capacity_tokens=1048576))
    assert cpu.data == {"capacity": {"kv_capacity_tokens": 1048576, "source": "cpu_kvcache_space_gib"}}
    assert cpu.get(CapacityRecord).max_concurrency is None
    assert _noted(CapacityRecord()).data == {"capacity": None}


def test_the_gateway_step_reads_the_planned_concurrency() -> None:
    from vfleet.cli.deploy_steps import _planned

    plan = capacity.plan(QWEN, 81920, max_model_len=4096)
    planned, cpu, skipped = HostResult("a"), HostResult("b"), HostResult("c")
    CapacityRecord(plan).note_on(planned)
    CapacityRecord(cpu_kv_capacity_tokens=4096).note_on(cpu)
    play = SimpleNamespace(results={"a": planned, "b": cpu, "c": skipped})
    assert _planned(play) == {"a": plan.max_concurrency, "b": None, "c": None}
