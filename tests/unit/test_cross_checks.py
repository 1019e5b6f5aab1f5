"""Rules across variables and hosts, checked by the fleet model before anything connects
(vfleet/config/cross_checks.py, addresses.py, monitoring.py fleet_settings, replicas.py
SAME_ON_EVERY_MEMBER): fleets from tests/unit/data/cross/fleets.yaml, each refused with the
lines it names or loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from vfleet.config.addresses import address_problem, machine_key
from vfleet.config.fleet import Fleet
from vfleet.config.replicas import PER_MEMBER, SAME_ON_EVERY_MEMBER
from vfleet.config.variables import SCHEMA, VARIABLES
from vfleet.config.vllm_facts import flag_available
from vfleet.engine.errors import InventoryError
from vfleet.engine.inventory import load_inventory
from vfleet.roles.replica._ray_render import render_member

DATA = Path(__file__).parent / "data" / "cross"
CASES = yaml.safe_load((DATA / "fleets.yaml").read_text())
BASE = {"vllm_version": "0.32.0", "model_name": "tiny"}


def _load(
    tmp: Path, groups: dict[str, Any], vars: dict[str, Any] | None = None, overrides: dict[str, Any] | None = None
):
    path = tmp / "inventory.yaml"
    path.write_text(yaml.safe_dump({"all": {"vars": {**BASE, **(vars or {})}, "children": groups}}, sort_keys=False))
    return load_inventory(path, overrides, schema=SCHEMA)


def _refusal(inv) -> list[str]:
    try:
        Fleet.of(inv)
    except InventoryError as exc:
        return exc.errors
    return []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_fleet(case: dict[str, Any], tmp_path: Path) -> None:
    lines = _refusal(_load(tmp_path, case["groups"], case.get("vars"), case.get("set")))
    assert bool(lines) == bool(case["errors"]), lines
    for fragment in case["errors"]:
        assert any(fragment in line for line in lines), (fragment, lines)
    assert all("\n" not in line and line.startswith(str(tmp_path)) for line in lines), lines


# --- the fleet-wide monitoring values reach every host -----------------------------------------
def test_a_threshold_set_on_a_model_group_reaches_the_monitoring_host(tmp_path: Path) -> None:
    fleet = Fleet.of(
        _load(
            tmp_path,
            {
                "vllm": {
                    "vars": {"monitoring_waiting_max": 3, "monitoring_scrape_interval": "30s"},
                    "hosts": {"gpu01": {"ansible_host": "10.0.0.1"}},
                },
                "monitoring": {"vars": {"monitoring_port": 9091}, "hosts": {"mon01": {"ansible_host": "10.0.0.3"}}},
                "gateways": {"hosts": {"gw01": {"ansible_host": "10.0.0.9", "monitoring_gateway_exporter_port": 9200}}},
            },
        )
    )
    for settings in (fleet.monitoring, fleet.config("mon01").monitoring, fleet.config("gpu01").monitoring):
        assert (settings.thresholds.waiting_max, settings.scrape_interval, settings.port) == (3, "30s", 9091)
    assert fleet.config("gw01").monitoring.gateway_exporter_port == 9200  # a gateway's own port stays its own
    assert fleet.config("gpu01").monitoring.gateway_exporter_port == 9113


def test_monitor_writes_the_value_set_on_the_model_group(tmp_path: Path) -> None:
    """It used to take the first monitoring host's, which had only the default (15s)."""
    from vfleet.cli.main import program

    inv = _load(
        tmp_path,
        {
            "vllm": {"vars": {"monitoring_scrape_interval": "45s"}, "hosts": {"gpu01": {"ansible_host": "10.0.0.1"}}},
            "monitoring": {"hosts": {"mon01": {"ansible_host": "10.0.0.3"}}},
        },
    )
    program.run(["vfleet", "monitor", "--inventory", str(inv.path), "--dest", str(tmp_path / "out")], exit=False)
    config = yaml.safe_load((tmp_path / "out" / "prometheus.yml").read_text())
    assert config["global"]["scrape_interval"] == "45s"


def test_without_a_monitoring_host_the_files_still_get_the_inventorys_values(tmp_path: Path) -> None:
    fleet = Fleet.of(
        _load(
            tmp_path, {"vllm": {"hosts": {"gpu01": {"ansible_host": "10.0.0.1"}}}}, {"monitoring_ttft_p95_seconds": 0.5}
        )
    )
    assert fleet.monitoring.thresholds.ttft_p95_seconds == 0.5


# --- replica members compare every engine variable ---------------------------------------------
def test_every_variable_is_either_compared_or_listed_as_per_member() -> None:
    names = {v.name for v in VARIABLES}
    compared, per_member = set(SAME_ON_EVERY_MEMBER), {n for n in names if n not in SAME_ON_EVERY_MEMBER}
    assert PER_MEMBER <= names, PER_MEMBER - names  # no stale name in the exceptions
    assert per_member == PER_MEMBER | {n for n in names if n.startswith(("gateway_", "monitoring_"))}
    assert {
        "dtype",
        "max_model_len",
        "quantization",
        "kv_cache_dtype",
        "block_size",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "vllm_version",
        "vllm_package",
        "vllm_extra_args",
        "model_name",
        "served_model_name",
        "trust_remote_code",
        "enforce_eager",
        "ray_version",
        "vllm_port",
        "ray_port",
        "api_key",
        "hf_token",
        "vllm_allow_unsafe",
        "model_source",
    } <= compared


REPLICA = {
    "vllm": {
        "vars": {"replica": "r1", "tensor_parallel_size": 1, "pipeline_parallel_size": 2},
        "hosts": {"gpu01": {"ansible_host": "10.0.0.1"}, "gpu02": {"ansible_host": "10.0.0.2"}},
    }
}


@pytest.mark.parametrize(
    "var, value",
    [
        ("dtype", "float16"),
        ("max_model_len", 4096),
        ("quantization", "awq"),
        ("kv_cache_dtype", "fp8"),
        ("block_size", 32),
        ("vllm_extra_args", ["--seed", "1"]),
        ("served_model_name", "other"),
        ("trust_remote_code", True),
        ("enforce_eager", True),
        ("ray_version", "2.40.0"),
        ("gpu_memory_utilization", 0.8),
        ("max_num_seqs", 4),
        ("chat_template", "/srv/t.jinja"),
        ("ray_node_manager_port", 8078),
        ("model_source", "/srv/other"),
        ("vllm_site_packages", ["/opt/torch/site-packages"]),
    ],
)
def test_a_member_that_differs_in_an_engine_variable_is_refused(var: str, value: Any, tmp_path: Path) -> None:
    groups = yaml.safe_load(yaml.safe_dump(REPLICA))
    groups["vllm"]["hosts"]["gpu02"][var] = value
    lines = _refusal(_load(tmp_path, groups))
    assert any(f"replica 'r1': {var} differs between members" in ln for ln in lines), lines


@pytest.mark.parametrize(
    "var, value",
    [
        ("replica_nic", "ens2"),
        ("cuda_visible_devices", "4,5,6,7"),
        ("nccl_env", {"NCCL_IB_HCA": "mlx5_1"}),
        ("weights_bwlimit", 1000),
        ("vllm_env", {"VLLM_CPU_OMP_THREADS_BIND": "1"}),
        ("ansible_user", "ops"),
        ("gateway_weight", 3),
    ],
)
def test_what_belongs_to_each_member_may_differ(var: str, value: Any, tmp_path: Path) -> None:
    groups = yaml.safe_load(yaml.safe_dump(REPLICA))
    groups["vllm"]["hosts"]["gpu02"][var] = value
    assert _refusal(_load(tmp_path, groups)) == []


def test_a_secret_that_differs_is_named_never_shown(tmp_path: Path) -> None:
    groups = yaml.safe_load(yaml.safe_dump(REPLICA))
    groups["vllm"]["hosts"]["gpu01"]["api_key"] = "sk-member-one-SECRET"
    groups["vllm"]["hosts"]["gpu02"]["api_key"] = "sk-member-two-SECRET"
    lines = _refusal(_load(tmp_path, groups))
    assert any("api_key differs between members (values not shown: a secret)" in ln for ln in lines), lines
    assert "SECRET" not in "\n".join(lines)


# --- IPv6 heads: brackets where Ray and torch parse HOST:PORT, bare where a program wants the address --
@pytest.mark.parametrize("backend", ["ray", "mp"])
def test_an_ipv6_head_is_bracketed_where_it_meets_a_port(backend: str, tmp_path: Path) -> None:
    groups = {
        "vllm": {
            "vars": {
                "replica": "r1",
                "tensor_parallel_size": 1,
                "pipeline_parallel_size": 2,
                "replica_backend": backend,
                "vllm_version": "0.20.0",
            },
            "hosts": {"gpu01": {"ansible_host": "fd00::1"}, "gpu02": {"ansible_host": "fd00::2"}},
        }
    }
    fleet = Fleet.of(_load(tmp_path, groups))
    r = fleet.replicas["r1"]
    head = {f.path: f.text for f in render_member(r, fleet.config("gpu01"), fleet.config("gpu01"), flag_available)}
    worker = {f.path: f.text for f in render_member(r, fleet.config("gpu02"), fleet.config("gpu01"), flag_available)}
    if backend == "ray":
        assert "--address=[fd00::1]:6379" in worker["/etc/systemd/system/vllm-ray.service"]
        assert "RAY_ADDRESS='[fd00::1]:6379'" in head["/etc/vllm/vllm.env"].splitlines()  # quoted for systemd
        assert "--node-ip-address=fd00::2" in worker["/etc/systemd/system/vllm-ray.service"]
    else:
        unit = worker["/etc/systemd/system/vllm.service"]
        assert "--master-addr fd00::1" in unit and "[fd00::1]" not in unit


def test_address_rules_directly() -> None:
    assert address_problem("fd00::1") is None and address_problem("10.0.0.1") is None
    assert address_problem("gpu01.example.com.") is None
    assert "brackets" in address_problem("[::1]") and "zone" in address_problem("fe80::1%eth0")
    assert machine_key("LOCALHOST") == machine_key("::1") == machine_key("127.0.0.2") == "loopback"
    assert machine_key("FD00:0::1") == "fd00::1" and machine_key("Gpu01.") == "gpu01"
