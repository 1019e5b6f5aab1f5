"""JSON/CSV shape, the PNG from level data, and bench.compare's output."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rich.console import Console

from vfleet.clients.bench import compare as cmp
from vfleet.clients.bench.knee import analyse
from vfleet.clients.bench.output import csv_columns, level_table, print_analysis, write_csv, write_json, write_png

DATA = Path(__file__).parent / "data" / "bench"


def result(name: str = "sweep_knee64.json", scale: float = 1.0) -> dict:
    lv = json.loads((DATA / name).read_text())["levels"]
    for x in lv:
        x["output_throughput"] *= scale
        x["server"] = {"running_max": x["value"], "waiting_max": 0, "kv_cache_usage_max": 0.5, "preemptions": 0}
    return {
        "task": "bench",
        "model": "m",
        "target": {"url": "http://127.0.0.1:1"},
        "levels": lv,
        "settings": {"slo": {"ttft_p95_s": 2.0, "e2e_p95_s": 12.0}},
        "analysis": analyse(lv, 1, 2.0, 12.0),
    }


def test_csv_one_row_a_level_with_every_metric(tmp_path):
    r = result()
    write_csv(tmp_path / "b.csv", r["levels"])
    rows = list(csv.DictReader((tmp_path / "b.csv").open()))
    assert len(rows) == 5 and list(rows[0]) == csv_columns()
    for key in ("ttft", "tpot", "itl", "e2e"):
        for p in ("mean", "p50", "p90", "p95", "p99"):
            assert f"{key}_{p}_ms" in rows[0]
    assert rows[3]["value"] == "64" and float(rows[3]["ttft_p95_ms"]) == 420.0
    assert rows[0]["server_running_max"] == "1" and rows[0]["errors"] == ""


def test_json_round_trip(tmp_path):
    r = result()
    write_json(tmp_path / "b.json", r)
    back = json.loads((tmp_path / "b.json").read_text())
    assert back["task"] == "bench" and back["analysis"]["concurrency"]["knee"]["value"] == 64


def test_png_written(tmp_path):
    assert write_png(tmp_path / "b.png", result()) == ["concurrency"]
    raw = (tmp_path / "b.png").read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 30_000


def test_terminal_table_and_analysis():
    r = result()
    con = Console(width=200, record=True)
    con.print(level_table(r["levels"]))
    print_analysis(con, r["analysis"])
    text = con.export_text()
    assert "c=64" in text and "2,390.0" in text
    assert "knee at 64" in text and "max_num_seqs per vLLM host: 64" in text
    assert "highest level meeting it: 64" in text


def test_compare_prints_change():
    a, b = result(), result(scale=1.2)
    b["levels"] = b["levels"][:4]
    c = cmp.compare(a, b)
    assert [row["label"] for row in c["levels"]] == ["c=1", "c=4", "c=16", "c=64"] and c["only_in_a"] == ["c=128"]
    m = c["levels"][0]["metrics"]["out tok/s"]
    assert abs(m["change"] - 0.2) < 1e-9 and m["better"] is True
    assert (
        c["levels"][0]["metrics"]["TTFT p95 ms"]["change"] == 0
        and c["levels"][0]["metrics"]["TTFT p95 ms"]["better"] is None
    )
    con = Console(width=100, record=True)
    con.print(cmp.table(c, "A.json", "B.json"))
    text = con.export_text()
    assert "+20.0%" in text and "out tok/s" in text and "c=64" in text


def test_compare_rejects_other_json(tmp_path):
    import pytest

    from vfleet.engine.errors import VfleetError

    p = tmp_path / "x.json"
    p.write_text(json.dumps({"task": "deploy", "hosts": {}}))
    with pytest.raises(VfleetError, match="not a `vfleet bench` result"):
        cmp.load(str(p))


def test_each_level_shows_its_verdict_with_the_numbers(tmp_path):
    """The server's numbers of each level judged (vfleet/clients/verdict.py): a level whose
    requests waited with the KV cache full is memory-bound, one whose engine ran far fewer
    than the client kept in flight is underfed, in the table and the CSV."""
    lv = result()["levels"]
    lv[-1]["server"] = {"running_max": 40, "waiting_mean": 6.5, "kv_cache_usage_max": 0.98, "preemptions": 4}
    lv[0]["server"] = {"running_max": 1, "waiting_mean": 0, "kv_cache_usage_max": 0.01, "preemptions": 0}
    lv[0]["mean_inflight"] = 8.0
    con = Console(width=400, record=True)
    con.print(level_table(lv))
    text = con.export_text()
    assert "memory-bound (waiting 6.5, running 40, KV 98%, preemptions 4)" in text
    assert "not enough load reaches the engine (running 1, offered 8)" in text
    write_csv(tmp_path / "b.csv", lv)
    rows = list(csv.DictReader((tmp_path / "b.csv").open()))
    assert rows[-1]["verdict"].startswith("memory-bound (waiting 6.5") and "lower max_model_len" in rows[-1]["verdict"]
