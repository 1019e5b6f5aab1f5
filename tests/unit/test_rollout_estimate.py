"""What a rollout expects to take and what it took (vfleet/roles/rollout/_estimate.py), from data:
batches of hosts, replica units, hosts never measured, none measured; the durations as printed;
then the real Rollout over local hosts, twice: the first run has nothing to go on and records
each restart, the second reads those records back and says what it expects."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from tests.unit.configs import LAB_VARS
from vfleet.cli.common import backends, make_play
from vfleet.cli.options import TaskOptions
from vfleet.config.fleet import Fleet
from vfleet.config.replicas import Replica
from vfleet.config.variables import SCHEMA
from vfleet.engine.inventory import load_inventory
from vfleet.roles.replica._rollout import unit_batches
from vfleet.roles.rollout import _rolling as rolling
from vfleet.roles.rollout._estimate import (
    LISTED,
    duration,
    estimate,
    expect_line,
    host_cost,
    measured_of,
    spent_s,
    total_line,
)
from vfleet.roles.rollout._records import RestartTimes, RolloutInfo
from vfleet.roles.service import _measured_restart as measured_restart
from vfleet.roles.service._measured_restart import MeasuredRestart

M = {
    "lab1": MeasuredRestart(restart_s=41.2, drain_s=0.2, inflight_wait_s=1.5, undrain_s=0.1),  # 43.0 out of service
    "lab2": MeasuredRestart(restart_s=38.0, drain_s=0.1),  # 38.1
    "lab3": MeasuredRestart(restart_s=50.0, ready_s=47.0),  # 50.0: deploy's, no drain
    "lab4": MeasuredRestart(restart_s=30.0),  # 30.0
}
NO_ESTIMATE = "no estimate: no host has a measured restart yet (the first rollout records them)"


@pytest.mark.parametrize(
    "seconds,text",
    [
        (0.04, "0.0s"),
        (0.4, "0.4s"),
        (41.24, "41.2s"),
        (59.94, "59.9s"),
        (59.96, "1m00s"),
        (190.0, "3m10s"),
        (605.4, "10m05s"),
        (3599.4, "59m59s"),
        (3599.6, "1h00m"),
        (7500.0, "2h05m"),
        (-3.0, "0.0s"),
        (math.nan, "0.0s"),
        (math.inf, "0.0s"),
    ],
)
def test_durations_read_short_where_short_and_whole_where_long(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_a_host_costs_its_restart_plus_the_drain_around_it() -> None:
    assert host_cost(M["lab1"]) == pytest.approx(43.0) and host_cost(M["lab3"]) == 50.0


def test_batches_add_up_and_a_batch_costs_its_slowest_host() -> None:
    est = estimate([["lab1", "lab2"], ["lab3"], ["lab4"]], M)
    assert est.total_s == pytest.approx(43.0 + 50.0 + 30.0)  # lab2 restarts beside lab1: not added
    assert list(est.costs) == ["lab3", "lab1", "lab2", "lab4"] and est.unmeasured == []
    assert expect_line(est) == (
        "expect ~2m03s: 3 batches; per batch the slowest host's last restart, drain "
        "included (lab3 50.0s, lab1 43.0s, lab2 38.1s, lab4 30.0s)"
    )
    assert estimate([["lab1", "lab2", "lab3", "lab4"]], M).total_s == 50.0  # one batch: the slowest only
    assert expect_line(estimate([["lab4"]], M)).startswith("expect ~30.0s: 1 batch; ")


def test_a_host_never_measured_counts_as_the_slowest_measured_host() -> None:
    measured = {**M, "lab4": None}  # a record missing or unreadable on lab4
    est = estimate([["lab1", "lab2"], ["lab3"], ["lab4"], ["lab5"]], measured)  # lab5: not even read
    assert est.unmeasured == ["lab4", "lab5"] and est.stand_in_s == 50.0
    assert est.total_s == pytest.approx(43.0 + 50.0 + 50.0 + 50.0)
    assert expect_line(est) == (
        "expect ~3m13s: 4 batches; per batch the slowest host's last restart, drain "
        "included (lab3 50.0s, lab1 43.0s, lab2 38.1s); lab4, lab5 not measured yet: "
        "counted as the slowest measured host (50.0s)"
    )
    # beside a faster measured host in its batch, the unmeasured one sets the batch's cost
    assert estimate([["lab2", "lab9"], ["lab3"]], M).total_s == pytest.approx(50.0 + 50.0)
    # the slowest measured host of this rollout: a record of a host it does not restart is not read
    assert estimate([["lab2", "lab9"]], M).total_s == pytest.approx(38.1)


def test_no_host_measured_gives_no_estimate_rather_than_a_guess() -> None:
    est = estimate([["lab1"], ["lab2"]], {"lab1": None})
    assert est.total_s is None and est.unmeasured == ["lab1", "lab2"] and expect_line(est) == NO_ESTIMATE
    assert expect_line(estimate([], M)) == NO_ESTIMATE


def test_a_replica_unit_costs_its_measured_total() -> None:
    """Batches of a fleet with replicas are of unit keys (the head); the head's record holds the
    whole unit's restart, and a member's own older record (a deploy's) is not counted again."""
    r1 = Replica("r1", ("gpu01", "gpu02"), 1, 2, 1, "mp", "")
    batches = unit_batches("1", ["gpu01", "gpu02", "gpu03"], {"r1": r1})
    assert batches == [["gpu01"], ["gpu03"]]
    measured = {
        "gpu01": MeasuredRestart(restart_s=95.0, drain_s=1.0),
        "gpu02": MeasuredRestart(restart_s=400.0),
        "gpu03": MeasuredRestart(restart_s=40.0),
    }
    est = estimate(batches, measured)
    assert est.total_s == pytest.approx(96.0 + 40.0) and "gpu02" not in expect_line(est)


def test_a_fleet_of_hundreds_names_a_few_hosts_not_all() -> None:
    hosts = [f"gpu{i:03d}" for i in range(1, 301)]
    measured = {h: MeasuredRestart(restart_s=40.0 + i / 10) for i, h in enumerate(hosts[:200])}
    line = expect_line(estimate([hosts[i : i + 25] for i in range(0, 300, 25)], measured))
    assert f"+{200 - LISTED} more" in line and f"+{100 - LISTED} more" in line and "gpu200 59.9s" in line
    assert len(line) < 400 and "gpu001" not in line  # the slowest are named


def test_a_restart_that_served_becomes_the_next_runs_record_and_a_failed_one_does_not() -> None:
    done = RolloutInfo(started=True, drain_s=0.2, inflight_wait_s=1.5, undrain_s=0.1)
    done.took(RestartTimes(ready_s=35.0, restart_s=41.2, stop_s=6.0))
    assert measured_of(done) == MeasuredRestart(
        restart_s=41.2, ready_s=35.0, stop_s=6.0, drain_s=0.2, inflight_wait_s=1.5, undrain_s=0.1
    )
    failed = RolloutInfo(started=True, drain_s=0.0, error="not ready after 600s", rolled_back=True)
    assert measured_of(failed) is None and measured_of(RolloutInfo()) is None
    assert spent_s([done, failed, None]) == [pytest.approx(43.0)]


def test_the_total_line_says_the_wall_time_the_estimate_and_the_sum() -> None:
    assert total_line(178.4, 190.0, [43.0, 38.1, 50.0, 30.0], stopped=False) == (
        "rollout took 2m58s, 4 hosts restarted (expected ~3m10s); their restarts add up to 2m41s"
    )
    assert total_line(61.7, None, [43.0], stopped=False) == (
        "rollout took 1m02s, 1 host restarted (no estimate); their restarts add up to 43.0s"
    )
    assert total_line(61.7, 190.0, [43.0], stopped=True) == (
        "rollout stopped after 1m02s, 1 host restarted (expected ~3m10s for all of it); their restarts add up to 43.0s"
    )
    assert total_line(3.0, None, [], stopped=True) == "rollout stopped after 3.0s, no host restarted (no estimate)"


# -- the real Rollout over local hosts ---------------------------------------------------------
class Timed(rolling.Rollout):
    """The real Rollout; the in-flight wait and the restart itself are stood in for."""

    def wait_inflight(self, ctx) -> float:
        return 0.0

    def restart_host(self, ctx, new_venv) -> RestartTimes:
        return RestartTimes(ready_s=1.5, restart_s=2.0, stop_s=0.5)


@pytest.fixture
def roll(tmp_path: Path, monkeypatch):
    """Run a restart over two local hosts (batches of 1); returns the summary and what it printed."""
    monkeypatch.setattr(rolling, "_current_venv", lambda ctx: "/opt/vllm/vllm-0.32.0")
    monkeypatch.setattr(rolling, "_venv_version", lambda ctx, venv: "0.32.0")
    monkeypatch.setattr(measured_restart, "ROOT", str(tmp_path / "restarts"))  # not this machine's /var/lib
    hosts = {"gpu1": {"model_name": "tiny"}, "gpu2": {"model_name": "tiny"}}
    path = tmp_path / "inventory.yaml"
    path.write_text(
        yaml.safe_dump(
            {"all": {"vars": {**LAB_VARS, "ansible_connection": "local"}, "children": {"vllm": {"hosts": hosts}}}}
        )
    )
    fleet = Fleet.of(load_inventory(path, schema=SCHEMA))

    def run():
        out = io.StringIO()
        play = make_play(
            "restart", fleet, fleet.vllm_hosts, TaskOptions(), console=Console(file=out, width=400, highlight=False)
        )
        summary = Timed(play, backends(fleet), list(hosts), []).run("1", 0.0)
        return summary, out.getvalue()

    return run


def test_the_first_rollout_records_and_the_next_one_expects(roll, tmp_path: Path) -> None:
    first, printed = roll()
    assert NO_ESTIMATE in printed and first.expected_s is None
    assert first.took_s is not None and first.took_s >= 0
    assert first.closing_lines[-1].startswith("rollout took ") and "2 hosts restarted (no estimate)" in first.total_line
    assert first.to_dict()["expected_s"] is None and first.to_dict()["took_s"] == first.took_s
    # both local hosts write the same unit's file: the last restart is the record
    record = MeasuredRestart.parse((tmp_path / "restarts" / "vllm.service.json").read_text())
    assert record is not None and record.restart_s == 2.0 and record.stop_s == 0.5 and record.task == "restart"

    second, printed = roll()
    line = next(ln for ln in printed.splitlines() if ln.startswith("expect ~"))
    assert re.fullmatch(
        r"expect ~4\.\ds: 2 batches; per batch the slowest host's last restart, drain included "
        r"\(gpu1 2\.\ds, gpu2 2\.\ds\)",
        line,
    ), line
    assert second.expected_s == pytest.approx(4.0, abs=0.5)
    assert printed.index(line) < printed.index("rollout batch 1/2")  # said before the first batch
    assert re.search(r"\(expected ~4\.\ds\); their restarts add up to 4\.\ds$", second.total_line), second.total_line


def test_a_tampered_record_is_no_estimate_and_is_replaced(roll, tmp_path: Path) -> None:
    state = tmp_path / "restarts"
    state.mkdir()
    (state / "vllm.service.json").write_text('{"restart_s": -1e9}')
    summary, printed = roll()
    assert NO_ESTIMATE in printed and "Traceback" not in printed and summary.stopped is None
    assert MeasuredRestart.parse((state / "vllm.service.json").read_text()) is not None


class _Shares:
    """The compile-cache hook, recording what the rollout asked it to share."""

    def __init__(self) -> None:
        self.asked: list[tuple[list[str], list[str]]] = []

    def share(self, sources: list[str], targets: list[str]) -> list[str]:
        self.asked.append((sources, targets))
        return []


class _Passes:
    """An eval gate whose canary always passes: as gate.py's _judge does for a pass, the
    restarted canary, held drained until judged, goes back into the gateways."""

    def before(self, rollout, batch):
        return None

    def after(self, rollout, batch):
        for h in batch:
            if h in rollout.held:
                rollout.undrain(rollout.play.contexts[h])
        return None


@pytest.mark.parametrize("gate", [None, _Passes()])
def test_the_compile_cache_is_shared_only_after_the_eval_gate_passed(tmp_path: Path, monkeypatch, gate) -> None:
    """A cache is reused only when the quality check found the first batch's answers unchanged:
    without --gate nothing vouched for them, so nothing is shared, and one line says so."""
    monkeypatch.setattr(rolling, "_current_venv", lambda ctx: "/opt/vllm/vllm-0.32.0")
    monkeypatch.setattr(rolling, "_venv_version", lambda ctx, venv: "0.32.0")
    monkeypatch.setattr(measured_restart, "ROOT", str(tmp_path / "restarts"))
    path = tmp_path / "inventory.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {**LAB_VARS, "ansible_connection": "local"},
                    "children": {"vllm": {"hosts": {"gpu1": {"model_name": "tiny"}, "gpu2": {"model_name": "tiny"}}}},
                }
            }
        )
    )
    fleet = Fleet.of(load_inventory(path, schema=SCHEMA))
    out, cache = io.StringIO(), _Shares()
    play = make_play("restart", fleet, fleet.vllm_hosts, TaskOptions(), console=Console(file=out, width=400))
    summary = Timed(play, backends(fleet), ["gpu1", "gpu2"], [], gate=gate, cache=cache).run("1", 0.0)
    assert summary.stopped is None and not play.results["gpu2"].failed, out.getvalue()  # both restarted
    if gate is None:
        assert cache.asked == [] and "compile cache not shared: no --gate judged" in out.getvalue(), out.getvalue()
    else:
        assert cache.asked == [(["gpu1"], ["gpu2"])] and "compile cache not shared" not in out.getvalue()
