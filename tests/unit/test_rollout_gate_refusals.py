"""What the eval gate (vfleet/roles/rollout/_gate.py) decides before anything changes, from
data, without a host: which fields of a host's live measured record a baseline keeps, the
refusals of a run (a multi-host replica, a completions-only host) or of a saved baseline (another
model, other decoding settings, items errored, edited or missing), each naming the host and the
fix, and where the gate's reports go (beside --report, or the current directory)."""

from __future__ import annotations

from tests.unit.configs import host_config
from tests.unit.rollout_gate_cases import HASHES, report
from vfleet.roles.rollout import _gate as gate_role
from vfleet.roles.rollout._gate import EvalGate, Evaluator, GateRecord, refusal, reports_prefix


def test_the_baseline_keeps_only_what_the_host_said_of_its_live_record():
    live = {
        "vllm_version": "0.31.0",
        "vllm_argv": ["vllm", "serve"],
        "model": "tiny",
        "dtype": "bfloat16",
        "quantization": None,
        "kv_cache_dtype": "auto",
        "planned_weights_gib": 15.0,
        "gpu_count": 1,
    }
    assert gate_role.baseline_measured(live) == {
        "vllm_version": "0.31.0",
        "vllm_argv": ["vllm", "serve"],
        "gpu_count": 1,
    }


def test_refusals_name_the_host_and_the_fix():
    tiny, chatless = host_config(name="gpu1"), host_config({"serve_completions_only": True}, name="gpu2")
    settings = {"seed": 0, "max_tokens": 24}
    assert refusal({"gpu1": tiny}, None, HASHES, settings) is None
    assert refusal({"gpu1": tiny}, report(), HASHES, settings) is None
    assert "part of a multi-host replica" in refusal({"gpu1": tiny}, None, HASHES, settings, {"gpu1", "gpu9"})
    assert refusal({"gpu2": chatless}, None, HASHES, settings).startswith("gpu2 serves /v1/completions only")
    other = refusal({"gpu1": tiny}, report("llama"), HASHES, settings)
    assert other == (
        "the baseline was recorded on model 'llama', gpu1 serves 'tiny': --limit the run to hosts "
        "of 'llama', or drop `baseline:`"
    )
    assert "no result for 1 item(s) of the eval set (first: new-item)" in refusal(
        {"gpu1": tiny}, report(), {**HASHES, "new-item": "h"}, settings
    )
    assert refusal({"gpu1": tiny}, report(max_tokens=64), HASHES, settings) == (
        "the baseline was recorded with other decoding settings (max_tokens 64 -> 24): make them equal"
    )


def test_a_saved_baseline_that_errored_was_edited_or_lacks_settings_is_refused():
    tiny, settings = host_config(name="gpu1"), {"seed": 0, "max_tokens": 24}
    errored = refusal({"gpu1": tiny}, report(error="HTTP 401: invalid API key"), HASHES, settings)
    assert errored.startswith(
        "the baseline is no baseline: 4 of 4 item(s) have no usable reply (first: "
        "capital-france: error HTTP 401: invalid API key)"
    )
    edited = refusal({"gpu1": tiny}, report(), {**HASHES, "add-small": "hash-of-the-new-prompt"}, settings)
    assert edited.startswith(
        "1 item(s) of the eval set differ from the baseline's (first: add-small: messages, "
        "expectation or max_tokens changed"
    )
    bare = report()
    bare.data["settings"] = {}
    assert refusal({"gpu1": tiny}, bare, HASHES, settings) == (
        "the baseline records no decoding settings: record a new one (drop `baseline:`)"
    )
    unset = report()
    del unset.data["settings"]["seed"]
    assert "(seed unset -> 0)" in refusal({"gpu1": tiny}, unset, HASHES, settings)


def test_the_reports_go_beside_the_run_report_or_into_the_current_directory(tmp_path, monkeypatch):
    assert reports_prefix("/var/runs/up.json", "upgrade") == "/var/runs/up-gate"
    monkeypatch.chdir(tmp_path)
    prefix = reports_prefix(None, "deploy")
    assert prefix.startswith(str(tmp_path / "vfleet-deploy-gate-2"))
    gate = EvalGate(Evaluator(None, None, None), GateRecord("g", "built-in", {}, {}), prefix)
    assert gate.path("baseline", "gpu1") == prefix + "-baseline-gpu1.json"
    assert gate.path("candidate", "a/b c") == prefix + "-candidate-a_b_c.json"
