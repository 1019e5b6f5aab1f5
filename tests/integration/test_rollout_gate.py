"""The eval gate (vfleet/roles/rollout/_gate.py) on the lab, 2 vLLM hosts and a gateway, under a
steady load of chat requests through the gateway:

- a no-op upgrade (same venv, same weights) passes the gate at the canary and rolls both hosts;
- a degrading weights change (`deploy --batch 1 --gate`, model_source a copy of the lab's model
  with perturbed weights) is stopped at the canary: lab1 is rolled back and answers as its
  baseline did, lab2 is untouched (same weights link, its vLLM never restarted), no request of
  the load is dropped, the run exits 1 and its last lines name the items that regressed.

The gate file asks 24 tokens per reply at concurrency 1: quick enough on the lab's CPU vLLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.integration.deploy_env import write_deploy_inventory
from tests.integration.faults_env import on_host
from tests.integration.test_rollout import under_load
from vfleet.lab.model.variants import STRONG_SCALE

pytestmark = pytest.mark.integration

GATE = {"seed": 0, "max_tokens": 24, "concurrency": 1}
# Noise added to the weights (vfleet.lab.model.variants.perturb_weights): STRONG_SCALE, measured to
# keep 5-7 of the 24 built-in answers (docs/lab-vllm-notes.md), while the model still produces text.
DEGRADE_SCALE = STRONG_SCALE
MODEL_LINK = "readlink /srv/models/tiny"
STARTED = "systemctl show -p ExecMainStartTimestampMonotonic --value vllm.service"


def gate_file(dest: Path) -> Path:
    path = dest / "eval.yaml"
    path.write_text(yaml.safe_dump(GATE))
    return path


# Soak (make soak): a rolling restart of both hosts plus two evals of the canary under load, ~6 min on the lab.
@pytest.mark.soak
def test_a_no_op_upgrade_passes_the_gate_and_rolls_every_host(deployed, tmp_path):
    code, report, out, load = under_load(
        deployed["inv"], "upgrade", tmp_path / "up.json", "--batch", "1", "--gate", str(gate_file(tmp_path))
    )
    assert code == 0, out[-3000:]
    assert load["requests"] >= 10 and load["failed"] == 0 and load["truncated"] == 0, load
    assert list(report["gate"]["hosts"]) == ["lab1"]  # the canary alone is judged
    verdict = report["gate"]["hosts"]["lab1"]
    assert verdict["passed"] and verdict["score_drop"] <= 0.03, verdict
    assert verdict["divergence"] is not None and 0 <= verdict["divergence"] <= 0.10, verdict  # measured
    assert "divergence not measured" not in verdict["line"], verdict
    assert report["gate"]["settings"]["max_tokens"] == 24
    assert report["rollout"]["stopped"] is None and report["rollout"]["drained"] == []
    assert [len(b) for b in report["rollout"]["batches"]] == [1, 1]
    for host in ("lab1", "lab2"):
        assert report["hosts"][host]["rollout"]["restart_s"] > 0, report["hosts"][host]["rollout"]
    baseline = tmp_path / "up-gate-baseline-lab1.json"  # beside --report, reusable as `baseline:`
    assert verdict["baseline"] == str(baseline) and json.loads(baseline.read_text())["items"]
    assert (tmp_path / "up-gate-candidate-lab1.json").exists()
    assert f"baseline saved in {baseline}" in out


# Soak (make soak): copying and perturbing the model, a canary restart, its rollback and two evals under load, ~6 min.
@pytest.mark.soak
@pytest.mark.ci
def test_degraded_weights_are_stopped_at_the_canary_and_rolled_back(deployed, tmp_path):
    from vfleet.clients.eval.compare import Thresholds, compare
    from vfleet.clients.eval.evalset import load_evalset
    from vfleet.clients.eval.report import EvalReport
    from vfleet.clients.eval.runner import EvalSettings, run_eval
    from vfleet.clients.eval.targets import host_target
    from vfleet.config.fleet import Fleet
    from vfleet.config.variables import SCHEMA
    from vfleet.engine.inventory import load_inventory
    from vfleet.lab.demo import ensure_model
    from vfleet.lab.model.variants import perturb_weights

    live = deployed["inv"]
    perturbed = tmp_path / "tiny-perturbed"
    perturb_weights(ensure_model(), perturbed, DEGRADE_SCALE, 7)
    inv = write_deploy_inventory(deployed["lab"], tmp_path / "degraded", extra={"model_source": str(perturbed)})
    links = {h: on_host(live, h, MODEL_LINK) for h in ("lab1", "lab2")}
    lab2_started = on_host(live, "lab2", STARTED)

    code, report, out, load = under_load(
        inv, "deploy", tmp_path / "deploy.json", "--batch", "1", "--skip-preflight", "--gate", str(gate_file(tmp_path))
    )
    assert code == 1, out[-3000:]
    assert load["requests"] >= 10 and load["failed"] == 0 and load["truncated"] == 0, load
    assert report["rollout"]["stopped"].startswith("eval gate: the canary lab1 regressed"), report["rollout"]
    assert report["rollout"]["drained"] == []  # lab1 serves again, back in the gateway
    info = report["hosts"]["lab1"]["rollout"]
    assert info["rolled_back"] and info["error"].startswith("eval gate: FAILED"), info
    verdict = report["gate"]["hosts"]["lab1"]
    assert not verdict["passed"] and verdict["regressed"], verdict
    line = next(ln for ln in out.splitlines() if ln.startswith("lab1: eval gate: FAILED"))
    assert "regressed" in line and verdict["regressed"][0].split(":")[0] in line, line
    # lab2: never evaluated nor restarted, its files put back, its process the one it had
    assert "rollout" not in report["hosts"]["lab2"] and report["hosts"]["lab2"]["restored_untried"] is True
    assert on_host(live, "lab2", STARTED) == lab2_started
    assert {h: on_host(live, h, MODEL_LINK) for h in ("lab1", "lab2")} == links
    # lab1 answers as its baseline did: the old weights are what it serves
    cfg = Fleet.of(load_inventory(live, schema=SCHEMA)).config("lab1")
    baseline = EvalReport.load(verdict["baseline"])
    now = run_eval(host_target(cfg), load_evalset(None), EvalSettings(**GATE), reference=baseline)
    again = compare(baseline, now, Thresholds())
    assert again.passed and again.divergence is not None, again.line()
