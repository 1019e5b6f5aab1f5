"""One fleet model per run (vfleet/config/fleet.py): the replicas are found once and each host's
config is built once, however many steps need them, and the runner's host contexts hold those
same configs. Counted on real task runs, in this process: `render` (every file deploy would
write, replicas included) and `restart` (with a multi-host replica: the rollout over units)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from invoke import Context

from vfleet.cli.common import make_play, select
from vfleet.cli.options import TaskOptions
from vfleet.config import replicas
from vfleet.config.fleet import Fleet
from vfleet.config.hostconfig import HostConfig
from vfleet.config.variables import SCHEMA
from vfleet.engine import lock
from vfleet.engine.inventory import load_inventory

INV = Path(__file__).parent / "data" / "replica" / "inventory.yaml"


@pytest.fixture
def counted(monkeypatch) -> Counter:
    """How often the replicas were grouped (every way to find them goes through it) and each
    host's config was built."""
    calls: Counter = Counter()
    grouped, from_host = replicas._grouped, HostConfig.from_host

    def count_grouped(inv):
        calls["replicas"] += 1
        return grouped(inv)

    def count_from_host(cls, host, access=None):
        calls[host.name] += 1
        return from_host(host, access)

    monkeypatch.setattr(replicas, "_grouped", count_grouped)
    monkeypatch.setattr(HostConfig, "from_host", classmethod(count_from_host))
    return calls


def test_the_model_answers_who_serves_routes_and_is_a_member():
    fleet = Fleet.of(load_inventory(INV, schema=SCHEMA))
    assert [h.name for h in fleet.vllm_hosts] == ["gpu01", "gpu02", "gpu03"]
    assert [h.name for h in fleet.serving_hosts] == ["gpu01", "gpu03"]  # a worker serves no HTTP
    assert [h.name for h in fleet.gateways] == ["gw"] and fleet.monitoring_hosts == []
    assert fleet.members == {"gpu01", "gpu02"} and fleet.workers == {"gpu02"}
    assert fleet.replica_of("gpu02") is fleet.replicas["r1"] and fleet.replica_of("gpu03") is None
    assert "ray==2.60.0" in fleet.config("gpu01").install_spec.pins  # a member's config is member_config's
    assert fleet.configs_of(fleet.gateways) == [fleet.config("gw")]


def test_the_plays_contexts_hold_the_fleets_configs(counted):
    opts = TaskOptions()
    fleet = Fleet.of(load_inventory(INV, schema=SCHEMA))
    play = make_play("t", fleet, select(fleet, None), opts)
    assert all(play.contexts[n].config is fleet.config(n) for n in fleet.inventory.hosts)
    assert set(counted.values()) == {1}, counted


def test_render_finds_the_replicas_once_and_builds_each_config_once(counted, capsys):
    from vfleet.cli.main import program

    program.run(["vfleet", "render", "--inventory", str(INV)], exit=False)
    out = capsys.readouterr().out
    assert "# ===== gpu02: /etc/systemd/system/vllm-ray.service" in out and "# ===== gw: " in out
    assert counted == Counter({"replicas": 1, "gpu01": 1, "gpu02": 1, "gpu03": 1, "gw": 1}), counted


def test_restart_with_a_replica_finds_it_once(counted, tmp_path, monkeypatch):
    from vfleet.cli import rollout
    from vfleet.roles.rollout import _rolling as rolling
    from vfleet.roles.rollout._records import RolloutSummary

    monkeypatch.setattr(lock, "LOCK_PATH", str(tmp_path / "run" / "fleet.lock"))
    inv = tmp_path / "inventory.yaml"
    inv.write_text(INV.read_text().replace("  vars:\n", "  vars:\n    ansible_connection: local\n", 1))
    seen = []

    def run(self, *a):
        seen.append((type(self).__name__, self.vllm_hosts, sorted(b.name for b in self.backends)))
        return RolloutSummary([], None, [], {}, [], [])

    monkeypatch.setattr(rolling.Rollout, "run", run)
    rollout.restart(Context(), inventory=str(inv))
    assert seen == [("ReplicaRollout", ["gpu01", "gpu03"], ["gpu01", "gpu03"])]  # units, keyed by their head
    assert counted == Counter({"replicas": 1, "gpu01": 1, "gpu02": 1, "gpu03": 1, "gw": 1}), counted
