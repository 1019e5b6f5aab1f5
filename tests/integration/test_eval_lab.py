"""`vfleet eval` against the real vLLM (CPU build) of the shared deployed fleet: a report with
the server's own token ids and logprobs, a no-op comparison (the same host twice: divergence
near 0, eval.compare passes) and a divergence figure between two hosts. Eight items of the
built-in set, 24 tokens each: well under a minute of lab time.

The lab model is trained to answer the built-in set, but how well is not this test's business:
it asserts the structure and the no-op, never a score."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tests.integration.deploy_env import vfleet

pytestmark = pytest.mark.integration

SUBSET = (
    "capital-france",
    "capital-japan",
    "add-small",
    "multiply",
    "opposite-hot",
    "echo-word",
    "json-city",
    "yes-no",
)


@pytest.fixture(scope="module")
def evalset(tmp_path_factory):
    lines = resources.files("vfleet.clients.eval").joinpath("data", "builtin.jsonl").read_text().splitlines()
    chosen = [ln for ln in lines if ln.strip() and json.loads(ln)["id"] in SUBSET]
    assert len(chosen) == len(SUBSET)
    path = tmp_path_factory.mktemp("eval") / "subset.jsonl"
    path.write_text("\n".join(chosen) + "\n")
    return path


def _eval(deployed, out, *more):
    p = vfleet("eval", "--inventory", str(deployed["inv"]), "--max-tokens", "24", "--out", str(out), *more, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    return p


def test_eval_records_tokens_and_the_same_host_twice_is_a_no_op(deployed, evalset, tmp_path):
    _eval(deployed, tmp_path, "--host", "lab1", "--evalset", str(evalset), "--name", "a")
    a = json.loads((tmp_path / "a.json").read_text())
    assert [i["id"] for i in a["items"]] == [i for i in SUBSET]
    for item in a["items"]:
        assert item["error"] is None, item
        assert item["token_ids"] and all(isinstance(t, int) for t in item["token_ids"])
        assert len(item["logprobs"]) == len(item["token_ids"]) == len(item["top_logprobs"])
        assert all(lp <= 0 for lp in item["logprobs"]) and all(item["top_logprobs"])
        assert item["passed"] in (True, False) and item["finish_reason"] in ("stop", "length")
    assert 0 <= a["summary"]["score"] <= 1 and a["summary"]["divergence"] is None
    assert a["measured"]["vllm_version"] == "0.32.0" and a["target"]["label"] == "lab1"
    assert "sk-lab" not in (tmp_path / "a.json").read_text()

    _eval(
        deployed,
        tmp_path,
        "--host",
        "lab1",
        "--evalset",
        str(evalset),
        "--name",
        "b",
        "--reference",
        str(tmp_path / "a.json"),
    )
    b = json.loads((tmp_path / "b.json").read_text())
    assert b["summary"]["divergence"] is not None and abs(b["summary"]["divergence"]) < 0.05, b["summary"]
    assert all(i["scored_tokens"] for i in b["items"] if i["reply"])
    c = vfleet("eval.compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), timeout=120)
    assert c.returncode == 0, c.stdout + c.stderr
    assert "eval gate: PASSED" in c.stdout and "nats/token" in c.stdout, c.stdout  # divergence measured
    assert "not measured" not in c.stdout, c.stdout


def test_another_host_against_a_reference_gives_a_divergence(deployed, evalset, tmp_path):
    _eval(deployed, tmp_path, "--host", "lab1", "--evalset", str(evalset), "--name", "lab1")
    _eval(
        deployed,
        tmp_path,
        "--host",
        "lab2",
        "--evalset",
        str(evalset),
        "--name",
        "lab2",
        "--reference",
        str(tmp_path / "lab1.json"),
    )
    r = json.loads((tmp_path / "lab2.json").read_text())
    assert r["settings"]["reference"]["label"] == "lab1" and r["target"]["label"] == "lab2"
    assert isinstance(r["summary"]["divergence"], float)
    assert any(i["divergence"] is not None and i["scored_tokens"] > 0 for i in r["items"])
