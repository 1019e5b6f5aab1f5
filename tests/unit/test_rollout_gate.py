"""The eval gate of a rollout (vfleet/roles/rollout/_gate.py), from data, without a host.

The real Rollout runs its batches over local hosts with no gateway; what would touch a host
(the in-flight wait, the restart, the rollback, reading the venv links) is recorded instead,
and the eval is injected: EvalReport-shaped dicts per host and phase, and a judge that
compares them by the thresholds of EVAL_API (score drop 0.03, divergence 0.10). What is
checked is the gate's decision and what it makes the rollout do: baseline and candidate
evaluated with the host drained, the canary passed (the others roll) or rolled back (only
the canary, the other batches never start, exit non-zero, one line naming what regressed),
and what it keeps with the run (reports beside --report, the report's "gate" section). What is
refused before anything changes is in test_rollout_gate_refusals, the CLI in test_rollout_gate_cli."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import pytest
from rich.console import Console

from tests.unit.rollout_gate_cases import IDS, Report, fleet_of, report
from vfleet.cli.common import backends, make_play
from vfleet.cli.options import TaskOptions
from vfleet.engine.report import report_dict
from vfleet.engine.runner import HostFailed
from vfleet.roles.rollout import _rolling as rolling
from vfleet.roles.rollout._gate import EvalGate, Evaluator, GateRecord, gate_lines
from vfleet.roles.rollout._records import RestartTimes, RolloutInfo
from vfleet.roles.service import _measured_restart as measured_restart

MAX_DROP, MAX_DIVERGENCE = 0.03, 0.10


# -- a judge over EvalReport-shaped data -------------------------------------------------------
@dataclass
class Comparison:
    passed: bool
    score_a: float
    score_b: float
    score_drop: float
    divergence: float | None
    regressed: list[str]
    measured_changes: list[str]
    divergence_signed: float | None = None

    def line(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        return (
            f"eval gate: {verdict}: score {self.score_a:.2f} -> {self.score_b:.2f} (drop {self.score_drop:.2f}); "
            f"divergence {self.divergence or 0:.2f} nats/token; regressed: {', '.join(self.regressed) or 'none'}"
        )


def judge(a: Report, b: Report) -> Comparison:
    was = {i["id"]: i["passed"] for i in a.data["items"]}
    regressed = [
        f"{i['id']}: passed -> failed (reply {i['reply']!r})"
        for i in b.data["items"]
        if was[i["id"]] and not i["passed"]
    ]
    divs = [i["divergence"] for i in b.data["items"] if i["divergence"] is not None]
    div = sum(divs) / len(divs) if divs else None
    drop = a.score - b.score
    return Comparison(drop <= MAX_DROP and (div or 0) <= MAX_DIVERGENCE, a.score, b.score, drop, div, regressed, [])


# -- a rollout over local hosts ----------------------------------------------------------------
class Recorded(rolling.Rollout):
    """The real Rollout; what would touch a host is recorded in `calls`."""

    calls: list[tuple]

    def wait_inflight(self, ctx) -> float:
        return 0.0

    failing: set[str]  # hosts whose restart fails
    versions: dict[str, str]  # what each host runs, as its live measured record says
    measured: dict[tuple[str, str], dict]  # (host, phase) -> the measured record its eval got

    def restart_host(self, ctx, new_venv):
        self.calls.append(("restart", ctx.name, new_venv))
        self.versions[ctx.name] = "0.32.0"
        if ctx.name in self.failing:
            raise HostFailed("not ready after 600s")
        return RestartTimes(ready_s=1.0, restart_s=2.0, stop_s=0.5)

    def rollback(self, ctx, old_venv, old_version) -> bool:
        self.calls.append(("rollback", ctx.name, old_venv, old_version))
        return True


@pytest.fixture
def run_gated(tmp_path, monkeypatch):
    """Roll these hosts (host -> model) with a gate whose evals answer from `evals`
    ((host, "baseline" | "candidate") -> Report, or an Exception to raise)."""
    monkeypatch.setattr(rolling, "_current_venv", lambda ctx: "/opt/vllm/vllm-0.31.0")
    monkeypatch.setattr(rolling, "_venv_version", lambda ctx, venv: "0.31.0" if venv else None)
    monkeypatch.setattr(measured_restart, "ROOT", str(tmp_path / "restarts"))  # not this machine's /var/lib

    def run(
        models: dict[str, str],
        evals: dict[tuple[str, str], Any],
        *,
        upgrade: bool = True,
        saved: tuple[Report, str] | None = None,
        failing: tuple[str, ...] = (),
        **more: Any,
    ):
        fleet = fleet_of(tmp_path, models, **more)
        out = io.StringIO()
        play = make_play(
            "upgrade", fleet, fleet.vllm_hosts, TaskOptions(), console=Console(file=out, width=400, highlight=False)
        )
        r = Recorded(
            play,
            backends(fleet),
            list(models),
            [],
            upgrade=upgrade,
            restore=None if upgrade else (lambda ctx: "the saved point"),
        )
        r.calls, r.failing, r.versions, r.measured = [], set(failing), {h: "0.31.0" for h in models}, {}

        def evaluate(cfg, reference, measured):
            phase = "baseline" if reference is None else "candidate"
            r.measured[(cfg.name, phase)] = measured
            r.calls.append((phase, cfg.name, cfg.name in r.drained, cfg.served_model_name))
            answer = evals[(cfg.name, phase)]
            if isinstance(answer, Exception):
                raise answer
            return answer

        record = GateRecord(
            "eval.yaml",
            "built-in",
            {"max_score_drop": MAX_DROP, "max_divergence": MAX_DIVERGENCE},
            {"seed": 0, "max_tokens": 24},
        )

        def measure(ctx) -> dict:
            return {"vllm_version": r.versions[ctx.name], "dtype": "bfloat16"}

        r.gate = EvalGate(Evaluator(evaluate, judge, measure), record, str(tmp_path / "run-gate"), saved)
        summary = r.run("1", 0.0)
        play.note(summary)
        return r, play, summary, out.getvalue()

    return run


NO_OP = {("gpu1", "baseline"): report(), ("gpu1", "candidate"): report(divergence=0.0)}
DEGRADED = {
    ("gpu1", "baseline"): report(),
    ("gpu1", "candidate"): report(failing=("capital-france", "add-small"), divergence=0.84),
}


def test_a_canary_that_passes_goes_back_in_and_the_other_batches_roll(run_gated, tmp_path):
    r, play, summary, out = run_gated({"gpu1": "tiny", "gpu2": "tiny"}, NO_OP)
    new = "/opt/vllm/vllm-0.32.0"
    assert r.calls == [
        ("baseline", "gpu1", True, "tiny"),
        ("restart", "gpu1", new),
        ("candidate", "gpu1", True, "tiny"),
        ("restart", "gpu2", new),
    ]  # evaluated drained
    assert summary.stopped is None and summary.drained == [] and play.exit_code == 0
    assert set(summary.serving.values()) == {new}
    base, cand = tmp_path / "run-gate-baseline-gpu1.json", tmp_path / "run-gate-candidate-gpu1.json"
    assert json.loads(base.read_text())["target"]["model"] == "tiny" and cand.exists()
    gate = report_dict(play)["gate"]
    assert gate["thresholds"] == {"max_score_drop": 0.03, "max_divergence": 0.1}
    verdict = gate["hosts"]["gpu1"]
    assert verdict["passed"] is True and verdict["score_drop"] == 0.0 and verdict["divergence"] == 0.0
    assert verdict["baseline"] == str(base) and verdict["candidate"] == str(cand)
    lines = gate_lines(play)
    assert len(lines) == 1 and lines[0].startswith("gpu1: eval gate: PASSED: score 1.00 -> 1.00")
    assert f"baseline saved in {base}" in lines[0] and "`baseline:`" in lines[0]
    assert "[gpu1] eval gate: PASSED" in out  # said when judged, before the next batch
    # the live record, read before the restart for the baseline and after it for the candidate
    assert r.measured == {
        ("gpu1", "baseline"): {"vllm_version": "0.31.0", "dtype": "bfloat16"},
        ("gpu1", "candidate"): {"vllm_version": "0.32.0", "dtype": "bfloat16"},
    }
    assert report_dict(play)["hosts"]["gpu1"]["rollout"]["undrain_s"] >= 0


@pytest.mark.parametrize("upgrade", [True, False], ids=["upgrade: previous venv", "deploy: rollback point"])
def test_a_canary_that_regressed_is_rolled_back_alone_and_the_run_stops(run_gated, upgrade):
    r, play, summary, out = run_gated({"gpu1": "tiny", "gpu2": "tiny"}, DEGRADED, upgrade=upgrade)
    old = "/opt/vllm/vllm-0.31.0" if upgrade else None
    assert r.calls[-1] == ("rollback", "gpu1", old, "0.31.0")
    assert not [c for c in r.calls if c[1] == "gpu2"]  # the other host: never evaluated nor restarted
    assert summary.stopped.startswith("eval gate: the canary gpu1 regressed and was rolled back")
    assert summary.drained == [] and "gpu1" not in r.out_of_service  # serving again, back in the gateways
    assert play.exit_code == 1 and play.results["gpu1"].failed and not play.results["gpu2"].failed
    info = play.results["gpu1"].get(RolloutInfo)
    assert info.rolled_back and info.serving == "/opt/vllm/vllm-0.31.0" and info.waiting_for == "the eval gate"
    line = gate_lines(play)[0]
    assert "FAILED: score 1.00 -> 0.50 (drop 0.50)" in line and "divergence 0.84" in line
    assert "capital-france: passed -> failed (reply 'Lyon.')" in line and "add-small" in line
    assert summary.lines[1] == f"gpu2: not restarted: {summary.stopped}"
    assert report_dict(play)["gate"]["hosts"]["gpu1"]["regressed"][0].startswith("capital-france")
    assert "eval gate: PASSED" not in out


def test_a_canary_that_cannot_be_evaluated_after_its_restart_goes_back(run_gated):
    evals = {("gpu1", "baseline"): report(), ("gpu1", "candidate"): ConnectionError("reset by peer")}
    r, play, summary, _ = run_gated({"gpu1": "tiny", "gpu2": "tiny"}, evals)
    assert ("rollback", "gpu1", "/opt/vllm/vllm-0.31.0", "0.31.0") in r.calls
    assert summary.stopped and play.exit_code == 1
    assert "could not evaluate the canary after its restart: ConnectionError: reset by peer" in gate_lines(play)[0]


def test_no_baseline_means_no_restart_and_the_canary_back_in_service(run_gated):
    evals = {("gpu1", "baseline"): RuntimeError("HTTP 503")}
    r, play, summary, _ = run_gated({"gpu1": "tiny", "gpu2": "tiny"}, evals)
    assert r.calls == [("baseline", "gpu1", True, "tiny")]  # drained for it, nothing restarted
    assert summary.stopped == "eval gate: no baseline on gpu1: the canary was not restarted"
    assert summary.drained == [] and play.exit_code == 1
    assert "gpu1" in play.active  # failed, yet still serving: later steps (smoke, put back) still see it


def test_a_baseline_whose_items_errored_is_no_baseline(run_gated):
    """A key changed since the fleet was deployed: the baseline is all HTTP 401; judged against
    it, any candidate would pass ("score 0.00 -> 0.00")."""
    evals = {("gpu1", "baseline"): report(failing=tuple(IDS), error="HTTP 401: invalid API key")}
    r, play, summary, _ = run_gated({"gpu1": "tiny", "gpu2": "tiny"}, evals)
    assert r.calls == [("baseline", "gpu1", True, "tiny")]  # nothing restarted
    assert summary.stopped == "eval gate: no baseline on gpu1: the canary was not restarted"
    assert summary.drained == [] and play.exit_code == 1
    why = play.results["gpu1"].steps[-1].message
    assert "4 of 4 item(s) have no usable reply (first: capital-france: error HTTP 401: invalid API key)" in why


def test_an_aborted_run_rolls_held_canaries_back_instead_of_undraining_them(run_gated):
    """max_fail_percentage 0: a1's restart fails, the play aborts, b1 (restarted, never judged)
    goes back to its old version, it does not return to the gateways on the new one."""
    models = {"a1": "m1", "a2": "m1", "b1": "m2", "b2": "m2"}
    evals = {(h, "baseline"): report(m) for h, m in (("a1", "m1"), ("b1", "m2"))}
    r, play, summary, _ = run_gated(models, evals, failing=("a1",), max_fail_percentage=0)
    assert play.aborted and summary.batches[0] == ["a1", "b1"]
    rollbacks = {c[1] for c in r.calls if c[0] == "rollback"}
    assert rollbacks == {"a1", "b1"} and not [c for c in r.calls if c[0] == "candidate"]
    info = play.results["b1"].get(RolloutInfo)
    assert info.rolled_back and info.serving == "/opt/vllm/vllm-0.31.0"
    assert summary.serving["b1"] == "/opt/vllm/vllm-0.31.0" and summary.drained == []
    verdict = report_dict(play)["gate"]["hosts"]["b1"]
    assert verdict["passed"] is False and verdict["line"].startswith("eval gate: not judged: ")
    assert "rolled back and serving again" in verdict["line"]


def test_a_saved_baseline_is_reused_instead_of_recorded(run_gated, tmp_path):
    saved = report()
    r, play, summary, _ = run_gated(
        {"gpu1": "tiny", "gpu2": "tiny"}, {("gpu1", "candidate"): report()}, saved=(saved, "/srv/gate/base.json")
    )
    assert [c[0] for c in r.calls] == ["restart", "candidate", "restart"]
    assert summary.stopped is None
    assert gate_lines(play)[0].endswith("; baseline /srv/gate/base.json (from the gate file)")
    assert not (tmp_path / "run-gate-baseline-gpu1.json").exists()


def test_several_models_in_the_canary_batch_are_judged_per_host(run_gated):
    models = {"gpu1": "tiny", "gpu2": "tiny", "gpu3": "other", "gpu4": "other"}
    evals = {
        ("gpu1", "baseline"): report(),
        ("gpu1", "candidate"): report(),
        ("gpu3", "baseline"): report("other"),
        ("gpu3", "candidate"): report("other", failing=("count-three",)),
    }
    r, play, summary, _ = run_gated(models, evals)
    assert summary.batches[0] == ["gpu1", "gpu3"]
    assert [c for c in r.calls if c[0] == "rollback"] == [("rollback", "gpu3", "/opt/vllm/vllm-0.31.0", "0.31.0")]
    assert not [c for c in r.calls if c[1] in ("gpu2", "gpu4")]
    assert summary.serving["gpu1"] == "/opt/vllm/vllm-0.32.0" and summary.drained == []
    assert summary.stopped.startswith("eval gate: the canary gpu3 regressed")
    verdicts = report_dict(play)["gate"]["hosts"]
    assert verdicts["gpu1"]["passed"] and not verdicts["gpu3"]["passed"]
