"""The eval report: score and divergence from its items, a JSON round trip, an atomic save,
and one line naming the file for anything that is not a report."""

from __future__ import annotations

import json
import os

import pytest

from vfleet.clients.eval.report import EvalReport, ItemResult
from vfleet.engine.errors import VfleetError


def item(id_: str, passed: bool | None, divergence: float | None = None, **more) -> ItemResult:
    return ItemResult(
        id=id_,
        reply=f"reply {id_}",
        token_ids=[1, 2],
        logprobs=[-0.5, -0.25],
        top_logprobs=[{"1": -0.5}, {"2": -0.25}],
        finish_reason="stop",
        passed=passed,
        why="" if passed else "wrong",
        divergence=divergence,
        **more,
    )


def report(*items: ItemResult, **measured) -> EvalReport:
    return EvalReport(
        target={"label": "lab1", "url": "http://127.0.0.1:8000", "model": "tiny"},
        settings={"seed": 0, "max_tokens": 24},
        measured=dict(measured),
        items=list(items),
        created="2026-12-02T16:00:00+00:00",
    )


def test_score_counts_only_items_with_an_expectation_and_divergence_is_their_mean():
    r = report(item("a", True, 0.1), item("b", False, 0.3), item("c", None), item("d", False, error="HTTP 400: x"))
    assert r.score == pytest.approx(1 / 3) and r.divergence == pytest.approx(0.2) and r.errors == 1
    assert report(item("c", None)).score is None and report(item("a", True)).divergence is None


def test_round_trip_and_atomic_save(tmp_path):
    r = report(item("a", True, 0.05, scored_tokens=2), item("b", None), vllm_version="0.32.0", model="tiny")
    r.notes.append("note: something")
    path = tmp_path / "sub" / "eval.json"
    r.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["eval.json"]  # no temp file left behind
    data = json.loads(path.read_text())
    assert data["task"] == "eval" and data["summary"]["score"] == 1.0 and data["summary"]["judged"] == 1
    back = EvalReport.load(str(path))
    assert back == r
    # a save replaces the file by rename: a reader holding the old one still reads it whole
    before = os.stat(path).st_ino
    r.save(path)
    assert os.stat(path).st_ino != before


@pytest.mark.parametrize(
    "content,words",
    [
        ("{broken", "not valid JSON"),
        ('{"task": "eval", "x": NaN}', "NaN is not a JSON number"),
        ('{"task": "bench", "levels": []}', "not a `vfleet eval` report"),
        ("[1, 2]", "not a `vfleet eval` report"),
        (
            '{"task": "eval", "items": [{"id": "a"}], "target": {}, "settings": {}, "created": "x"}',
            "not a `vfleet eval` report",
        ),
    ],
)
def test_a_foreign_file_is_one_line_naming_it(tmp_path, content, words):
    p = tmp_path / "r.json"
    p.write_text(content)
    with pytest.raises(VfleetError) as exc:
        EvalReport.load(str(p))
    assert str(exc.value).startswith(str(p)) and words in str(exc.value)
    with pytest.raises(VfleetError, match="(?i)no such file"):
        EvalReport.load(str(tmp_path / "absent.json"))


def _tampered(tmp_path, path: str, value) -> str:
    """A saved report with the field at `path` (keys/indexes by "/") set to `value`; the error line."""
    good = report(item("a", True, 0.05), item("b", False, 0.01))
    data = good.to_dict()
    *parents, last = [int(k) if k.isdigit() else k for k in path.split("/")]
    node = data
    for k in parents:
        node = node[k]
    node[last] = value
    p = tmp_path / "r.json"
    p.write_text(json.dumps(data))
    with pytest.raises(VfleetError) as exc:
        EvalReport.load(str(p))
    assert "\n" not in str(exc.value) and str(exc.value).startswith(str(p))
    return str(exc.value)


@pytest.mark.parametrize(
    "path,value,words",
    [
        ("items/0/divergence", "bad", "items/0/divergence: expected number or null, found a string"),
        ("items/1/reply", 5, "items/1/reply: expected string, found an integer"),
        ("items/0/id", ["x"], "items/0/id: expected string, found a list"),
        ("items/0/token_ids", [1, "2"], "items/0/token_ids/1: expected integer, found a string"),
        ("items/0/passed", "yes", "items/0/passed: expected boolean or null, found a string"),
        ("items", [], "items: no items"),
        ("target", "x", "target: expected object, found a string"),
    ],
)
def test_a_tampered_report_is_one_line_naming_the_field(tmp_path, path, value, words):
    assert words in _tampered(tmp_path, path, value)


def test_a_report_larger_than_the_cap_is_refused_unread(tmp_path, monkeypatch):
    from vfleet.clients.eval import report as report_module

    monkeypatch.setattr(report_module, "MAX_BYTES", 100)
    p = tmp_path / "r.json"
    report(item("a", True), item("b", True)).save(p)
    with pytest.raises(VfleetError, match="more than the"):
        EvalReport.load(str(p))


def test_divergence_is_the_mean_of_absolute_item_divergences_with_the_signed_mean_beside_it():
    r = report(item("a", True, 0.2, divergence_signed=-0.2), item("b", True, 0.1, divergence_signed=0.1))
    assert r.divergence == pytest.approx(0.15) and r.divergence_signed == pytest.approx(-0.05)
    assert r.to_dict()["summary"]["divergence_signed"] == pytest.approx(-0.05)


def test_a_report_with_errored_or_empty_items_is_no_baseline():
    assert report(item("a", True), item("b", None)).baseline_problem() is None
    errored = report(item("a", False, error="HTTP 401: invalid key"), item("b", False, error="HTTP 401: x"))
    assert errored.baseline_problem() == ("2 of 2 item(s) have no usable reply (first: a: error HTTP 401: invalid key)")
    empty = item("b", True)
    empty.token_ids = []
    assert report(item("a", True), empty).baseline_problem() == (
        "1 of 2 item(s) have no usable reply (first: b: no reply tokens)"
    )
