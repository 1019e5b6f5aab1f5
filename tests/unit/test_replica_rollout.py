"""A multi-host replica is one unit of a rolling restart (vfleet/roles/replica/_rollout.py)."""

from __future__ import annotations

from vfleet.config.replicas import Replica
from vfleet.roles.replica._rollout import restart_steps, unit_batches, unit_members

R = {"r1": Replica("r1", ("gpu02", "gpu01"), 8, 2, 8, "ray", "")}
HOSTS = ["gpu01", "gpu02", "gpu03", "gpu04"]


def test_a_replica_counts_once_and_is_keyed_by_its_head():
    assert unit_batches("1", HOSTS, R) == [["gpu02"], ["gpu03"], ["gpu04"]]
    assert unit_members("gpu02", R) == ("gpu02", "gpu01") and unit_members("gpu03", R) == ("gpu03",)


def test_percentages_are_of_units_and_a_worker_alone_selects_its_replica():
    assert unit_batches("50%", HOSTS, R) == [["gpu02"], ["gpu03"], ["gpu04"]]
    assert unit_batches("100%", HOSTS, R) == [["gpu02", "gpu03", "gpu04"]]
    assert unit_batches("1", ["gpu01"], R) == [["gpu02"]]


def test_ray_unit_restarts_workers_then_head_and_is_ready_when_the_head_serves():
    assert restart_steps(R["r1"], upgrade=True) == [
        ("gpu02", "stop-vllm"),
        ("gpu01", "switch-venv"),
        ("gpu01", "restart-ray"),
        ("gpu02", "switch-venv"),
        ("gpu02", "restart-ray"),
        ("gpu02", "start-vllm"),
        ("gpu02", "wait-ready"),
    ]
    assert ("gpu01", "switch-venv") not in restart_steps(R["r1"], upgrade=False)


def test_mp_unit_stops_every_rank_and_starts_workers_before_the_head():
    mp = Replica("r1", ("gpu02", "gpu01"), 1, 2, 1, "mp", "")
    assert restart_steps(mp, upgrade=False) == [
        ("gpu02", "stop-vllm"),
        ("gpu01", "stop-vllm"),
        ("gpu01", "start-vllm"),
        ("gpu02", "start-vllm"),
        ("gpu02", "wait-ready"),
    ]


def test_unit_keys_are_what_the_rollout_drains():
    from vfleet.roles.replica._rollout import unit_keys

    assert unit_keys(["gpu01", "gpu03", "gpu02"], R) == ["gpu02", "gpu03"]


def test_replica_rollout_restarts_the_members_in_order(monkeypatch):
    """ReplicaRollout.restart_host on the head runs restart_steps over the members' contexts."""
    from types import SimpleNamespace

    from vfleet.roles.replica import _rollout as rr

    calls = []

    class Ctx(SimpleNamespace):
        def must(self, cmd, **kw):
            calls.append((self.name, cmd))

        def record(self, *a, **kw):
            pass

    cfg = SimpleNamespace(
        unit="vllm.service",
        ray_unit="vllm-ray.service",
        service_name="vllm",
        shutdown_timeout=30,
        venv_path="/opt/vllm/new",
    )
    ctxs = {h: Ctx(name=h, config=cfg, step_name="") for h in ("gpu01", "gpu02")}
    monkeypatch.setattr(rr, "start", lambda ctx, unit, no_block: calls.append((ctx.name, f"start {unit}")))
    monkeypatch.setattr(rr.readiness, "wait_ready", lambda ctx: calls.append((ctx.name, "ready")))
    monkeypatch.setattr(rr.vllm_install, "link_current", lambda ctx, c, v: calls.append((ctx.name, f"link {v}")))
    monkeypatch.setattr(rr.replica_deploy, "configure_member", lambda ctx, fleet, r: calls.append((ctx.name, "files")))
    roll = rr.ReplicaRollout.__new__(rr.ReplicaRollout)
    roll.play, roll.fleet = SimpleNamespace(contexts=ctxs), SimpleNamespace(replicas=R)
    roll.restart_host(ctxs["gpu02"], "/opt/vllm/new")
    assert calls == [
        ("gpu02", "systemctl stop -- vllm.service"),
        ("gpu01", "link /opt/vllm/new"),
        ("gpu01", "files"),
        ("gpu01", "systemctl restart -- vllm-ray.service"),
        ("gpu02", "link /opt/vllm/new"),
        ("gpu02", "files"),
        ("gpu02", "systemctl restart -- vllm-ray.service"),
        ("gpu02", "start vllm.service"),
        ("gpu02", "ready"),
    ]
