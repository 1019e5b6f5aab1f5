"""Steps pass typed records, and the --report JSON stays what it was: each record's to_dict()
is the section the report had under its key, in the place it was first set."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from vfleet.cli.deploy_steps import CurlHint
from vfleet.cli.preflight import AuditSource
from vfleet.clients import smoke
from vfleet.config.replicas import Replica
from vfleet.config.variables import SCHEMA
from vfleet.engine.inventory import load_inventory
from vfleet.engine.report import report_dict
from vfleet.engine.runner import HostFailed, Play, RunOptions
from vfleet.roles.replica._allreduce import AllReduceResult
from vfleet.roles.replica._deploy import Placement
from vfleet.roles.replica._facts import Route
from vfleet.roles.rollout._records import Converged, RestoredUntried, RolloutSummary
from vfleet.roles.weights._totals import WeightsBySource, WeightsTotals


@pytest.fixture
def play(tmp_path: Path) -> Play:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "all:\n  hosts:\n    gpu01:\n      ansible_connection: local\n    gw:\n      ansible_connection: local\n"
    )
    hosts = list(load_inventory(inv, schema=SCHEMA).hosts.values())
    return Play("deploy", hosts, RunOptions(), console=Console(file=io.StringIO()))


def _extra(d: dict) -> dict:
    """A report without what every report has: the sections steps added."""
    common = {"task", "started_at", "elapsed_s", "check", "aborted", "hosts", "summary"}
    return {k: v for k, v in d.items() if k not in common}


def test_run_sections_in_the_order_first_set_with_the_old_values(play):
    first = WeightsTotals(controller_bytes_sent=10, waves=1, copies=1)
    play.note(first)
    play.note(Converged(["gpu01"]))
    play.note(WeightsBySource({"/m/a": first, "/m/b": None}))  # replaces "weights" where it was
    play.note(RolloutSummary([["gpu01"]], "batch 1: stopped", [], {"gpu01": "/opt/vllm/a"}, ["gpu01"], ["l"]))
    play.note(CurlHint("curl -s http://gw:80/v1/chat/completions"))
    play.note(AuditSource(None))
    got = _extra(report_dict(play))
    assert json.dumps(got) == json.dumps(
        {
            "weights": {
                "per_model_source": {"/m/a": {"controller_bytes_sent": 10, "waves": 1, "copies": 1}, "/m/b": {}}
            },
            "converged": ["gpu01"],
            "rollout": {
                "batches": [["gpu01"]],
                "stopped": "batch 1: stopped",
                "converged": [],
                "serving": {"gpu01": "/opt/vllm/a"},
                "drained": ["gpu01"],
                "lines": ["l"],
                "expected_s": None,
                "took_s": None,
            },
            "curl": "curl -s http://gw:80/v1/chat/completions",
            "source": "live",
        }
    )
    assert AuditSource("snaps").to_dict() == "snapshot:snaps"
    assert play.get(WeightsTotals) is first and play.get(CurlHint).command.startswith("curl")


def test_host_sections_with_the_old_values(play):
    r = play.results["gpu01"]
    replica = Replica("r1", ("gpu01", "gpu02"), 1, 2, 1, "mp", "")
    r.note(Placement(replica, Route("10.0.0.2", "eth0", "10.0.0.1")))
    r.data["restarts"] = 1  # a plain value (the service step's) keeps its place among records
    r.note(RestoredUntried())
    r.note(AllReduceResult({"ok": True, "backend": "gloo"}))
    host = report_dict(play)["hosts"]["gpu01"]
    assert list(host)[-4:] == ["replica", "restarts", "restored_untried", "replica_allreduce"]
    assert host["replica"] == {
        "name": "r1",
        "head": "gpu01",
        "workers": ["gpu02"],
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 2,
        "gpus_per_host": 1,
        "backend": "mp",
        "route": {"dev": "eth0", "src": "10.0.0.1"},
    }
    assert (host["restored_untried"], host["replica_allreduce"]) == (True, {"ok": True, "backend": "gloo"})


def test_smoke_results_by_label_with_each_checks_fields(play, monkeypatch):
    checks = [
        ("/health", lambda c, t: (True, "HTTP 200", {})),
        (smoke.STREAMED, lambda c, t: (True, "3 chunks", {"chunks": 3, "ttft_s": 0.05})),
        ("api key required", lambda c, t: (True, "no api_key", {"skipped": True})),
    ]
    monkeypatch.setattr(smoke, "checks_for", lambda t: checks)
    ctx = play.contexts["gw"]
    target = smoke.Target("gateway", "http://gw:80", "tiny", None)
    smoke.run_smoke(ctx, target, label="gateway tiny")
    checks[0] = ("/health", lambda c, t: (False, "HTTP 502", {}))
    with pytest.raises(HostFailed):
        smoke.run_smoke(ctx, target)  # kept too: the report shows what failed
    assert report_dict(play)["hosts"]["gw"]["smoke"] == {
        "gateway tiny": {
            "/health": {"ok": True, "message": "HTTP 200"},
            "streamed completion": {"ok": True, "message": "3 chunks", "chunks": 3, "ttft_s": 0.05},
            "api key required": {"ok": True, "message": "no api_key", "skipped": True},
        },
        "gateway": {
            "/health": {"ok": False, "message": "HTTP 502"},
            "streamed completion": {"ok": True, "message": "3 chunks", "chunks": 3, "ttft_s": 0.05},
            "api key required": {"ok": True, "message": "no api_key", "skipped": True},
        },
    }
    assert play.results["gw"].get(smoke.SmokeResults).ttfts() == [("gateway tiny", 0.05), ("gateway", 0.05)]
