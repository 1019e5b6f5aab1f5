"""Cross-member preflight of a multi-host replica, from fake facts (vfleet/roles/replica/_preflight.py)."""

from __future__ import annotations

import copy

from tests.unit.configs import host_config
from vfleet.config.replicas import Replica
from vfleet.roles.replica._facts import ClockFact, ReachFact, VersionsFact, parse_route
from vfleet.roles.replica._preflight import member_checks, peer_of

R = Replica("r1", ("gpu01", "gpu02"), 8, 2, 8, "ray", "inv.yaml: line 10: group 'r1'")
GPU = {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8, "driver_version": "570.86.15"}
VERSIONS = {"python": "3.11.2", "vllm": "0.20.0", "torch": "2.9.0", "nccl": "2.27.3", "ray": "2.60.0"}
MEMBER = {
    "gpu01": {
        "route": parse_route("10.0.0.2", ["10.0.0.2 dev ens1 src 10.0.0.1 uid 0"]),
        "reach": True,
        "versions": dict(VERSIONS),
        "clock": {"epoch_ms": 1_000_000, "ntp_synchronized": True},
    },
    "gpu02": {
        "route": parse_route("10.0.0.1", ["10.0.0.1 dev ens1 src 10.0.0.2 uid 0"]),
        "reach": True,
        "versions": dict(VERSIONS),
        "clock": {"epoch_ms": 1_000_120, "ntp_synchronized": True},
    },
}


DEFAULTS = host_config().replica  # the schema's replica settings: what a member sets by default


def _checks(gpu=None, member=None, settings=None):
    out = member_checks(
        {"r1": R},
        gpu or {"gpu01": GPU, "gpu02": GPU},
        member or MEMBER,
        {h: DEFAULTS for h in R.members} | (settings or {}),
    )
    return {h: {c["id"]: c for c in cs} for h, cs in out.items()}


def test_identical_members_pass_every_check():
    got = _checks()
    assert set(got["gpu02"]) == {f"replica.{k}:r1" for k in ("gpus", "gpu_model", "driver", "nic", "clock")} | {
        f"replica.version.{k}:r1" for k in ("python", "vllm", "torch", "nccl", "ray")
    }
    assert {c["status"] for cs in got.values() for c in cs.values()} == {"pass"}


def test_head_routes_to_its_first_worker_and_workers_to_the_head():
    address = {"gpu01": "10.0.0.1", "gpu02": "10.0.0.2"}
    assert (peer_of(R, "gpu01", address), peer_of(R, "gpu02", address)) == ("10.0.0.2", "10.0.0.1")


def test_mixed_torch_fails_on_every_member_naming_both():
    m = copy.deepcopy(MEMBER)
    m["gpu02"]["versions"]["torch"] = "2.8.0"
    got = _checks(member=m)
    for h in ("gpu01", "gpu02"):
        c = got[h]["replica.version.torch:r1"]
        assert c["status"] == "fail" and "gpu01=2.9.0, gpu02=2.8.0" in c["message"]


def test_not_installed_yet_warns_instead_of_failing():
    m = copy.deepcopy(MEMBER)
    m["gpu02"]["versions"] = {}
    assert _checks(member=m)["gpu01"]["replica.version.vllm:r1"]["status"] == "warn"


def test_gpu_count_model_and_driver():
    small = {"gpus": GPU["gpus"][:4], "driver_version": "550.54.14"}
    got = _checks(gpu={"gpu01": GPU, "gpu02": small})
    assert got["gpu02"]["replica.gpus:r1"]["status"] == "fail" and got["gpu01"]["replica.gpus:r1"]["status"] == "pass"
    assert got["gpu01"]["replica.driver:r1"]["status"] == "fail"
    a100 = {"gpus": [{"name": "NVIDIA A100-SXM4-80GB"}] * 8, "driver_version": "570.86.15"}
    assert _checks(gpu={"gpu01": GPU, "gpu02": a100})["gpu02"]["replica.gpu_model:r1"]["status"] == "fail"


def test_unreachable_peer_no_route_and_a_nic_that_is_not_the_route():
    m = copy.deepcopy(MEMBER)
    m["gpu02"]["reach"] = False
    assert _checks(member=m)["gpu02"]["replica.nic:r1"]["status"] == "fail"
    m["gpu02"]["route"] = parse_route("10.0.0.1", ["RTNETLINK answers: Network is unreachable"])
    assert "no route" in _checks(member=m)["gpu02"]["replica.nic:r1"]["message"]
    got = _checks(settings={"gpu02": host_config({"replica_nic": "ib0"}).replica})["gpu02"]["replica.nic:r1"]
    assert got["status"] == "warn" and "leaves on ens1" in got["message"]


def test_clock_skew_beyond_the_limit_fails_and_unsynced_warns():
    m = copy.deepcopy(MEMBER)
    m["gpu02"]["clock"]["epoch_ms"] = 1_002_000
    assert _checks(member=m)["gpu02"]["replica.clock:r1"]["status"] == "fail"
    wider = host_config({"replica_max_clock_skew_ms": 5000}).replica
    assert _checks(member=m, settings={"gpu02": wider})["gpu02"]["replica.clock:r1"]["status"] == "pass"
    m["gpu02"]["clock"] = {"epoch_ms": 1_000_010, "ntp_synchronized": False}
    assert _checks(member=m)["gpu02"]["replica.clock:r1"]["status"] == "warn"


def test_fact_parsers():
    assert ReachFact("10.0.0.1", 22).process(["reachable"]) is True
    assert ReachFact("10.0.0.1", 22).process(["unreachable"]) is False
    assert "/dev/tcp/10.0.0.1/22" in ReachFact("10.0.0.1", 22).command()
    assert ClockFact().process(["1764590000123", "yes"]) == {"epoch_ms": 1764590000123, "ntp_synchronized": True}
    assert ClockFact().process(["1764590000123", "unknown"])["ntp_synchronized"] is None
    assert VersionsFact("/opt/vllm/current/bin/python").process(['{"vllm": "0.20.0"}']) == {"vllm": "0.20.0"}
    assert VersionsFact("/x").process(["Traceback"]) == {}


def test_a_component_no_member_has_passes_once_installed():
    m = copy.deepcopy(MEMBER)
    for h in m:
        m[h]["versions"]["nccl"] = None
    c = _checks(member=m)["gpu01"]["replica.version.nccl:r1"]
    assert c["status"] == "pass" and "no nccl on any member" in c["message"]


def test_clock_compares_offsets_from_the_controller_not_the_moments_of_reading():
    """gpu02 answered 2 s after gpu01 (a loaded host): its raw reading is 2 s later, its
    offset from the controller's clock the same; a real 2 s offset still fails."""
    m = copy.deepcopy(MEMBER)
    m["gpu01"]["clock"].update(offset_ms=40, uncertainty_ms=30)
    m["gpu02"]["clock"].update(epoch_ms=1_002_000, offset_ms=55, uncertainty_ms=30)
    assert _checks(member=m)["gpu02"]["replica.clock:r1"]["status"] == "pass"
    m["gpu02"]["clock"]["offset_ms"] = 2_055
    check = _checks(member=m)["gpu02"]["replica.clock:r1"]
    assert check["status"] == "fail" and "+-60 ms" in check["message"]


class _Ctx:
    """Answers the clock fact like a host whose clock runs 5 s ahead of this one."""

    def run(self, cmd, stdin=None, **kw):
        import time
        from types import SimpleNamespace

        from vfleet.engine.fact_protocol import MARK

        out = f"{int(time.time() * 1000) + 5000}\nyes\n"
        return SimpleNamespace(
            ok=True, exited=0, stdout=f"{MARK} BEGIN clock\n{out}\n{MARK} STDERR clock\n\n{MARK} END clock 0\n"
        )


def test_read_clock_measures_the_offset_from_the_controller():
    from vfleet.roles.replica._preflight import read_clock

    clock = read_clock(_Ctx(), ClockFact())
    assert 4_900 <= clock["offset_ms"] <= 5_100 and clock["uncertainty_ms"] >= 1 and clock["ntp_synchronized"] is True
