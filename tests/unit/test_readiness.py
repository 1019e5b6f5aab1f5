"""Readiness parsing: systemd's properties and the HTTP probe's verdict come back from one SSH
round trip; a growing NRestarts turns 'loading' into a crash. Everything the probe needs
(port, served name, key, interpreter, unit, timeout) comes from the host's HostConfig.

Most tests fake the connection (a parser/rule test); one runs the probe's real command line
and script locally against a fake vLLM HTTP server. The lab deploy and rollout tests run the
same code against real vLLM."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.unit.configs import host_config
from tests.unit.json_handler import JsonHandler
from vfleet.engine.runner import HostFailed
from vfleet.roles.service import _readiness as readiness


class ScriptedHost:
    """A HostContext stand-in whose `run` answers from a list of stdouts, in order."""

    def __init__(self, *outputs: str, vars: dict | None = None):
        self.outputs = list(outputs)
        self.commands: list[tuple[str, str | None]] = []
        self.name = "gpu01"
        self.config = host_config({"api_key": "sk-secret", **(vars or {})}, name=self.name)

    def run(self, cmd: str, stdin: str | None = None, timeout: float | None = None, **_):
        self.commands.append((cmd, stdin))
        out = self.outputs.pop(0) if len(self.outputs) > 1 else self.outputs[0]
        return SimpleNamespace(stdout=out, stderr="", exited=0, ok=True)

    def progress(self, *args) -> None:
        pass


@pytest.mark.parametrize(
    "stdout, expect",
    [
        ("ActiveState=active\nNRestarts=0\nready\n", "ready"),
        ("ActiveState=activating\nNRestarts=0\nloading\n", "loading"),
        ("ActiveState=failed\nNRestarts=3\nloading\n", "dead (failed)"),
        ("ActiveState=inactive\nNRestarts=0\nunhealthy 503\n", "dead (inactive)"),
        ("ActiveState=active\nNRestarts=0\nno-model listed=other\n", "no-model listed=other"),
    ],
)
def test_probe_reads_systemd_and_http_verdict_from_one_round_trip(stdout, expect):
    host = ScriptedHost(stdout)
    assert readiness.probe(host) == expect
    assert len(host.commands) == 1
    cmd, stdin = host.commands[0]
    assert "sk-secret" not in cmd and "sk-secret" in stdin  # the key travels on stdin only


def test_probe_parameters_come_from_the_host_config():
    host = ScriptedHost("ActiveState=active\nNRestarts=0\nready\n")
    readiness.probe(host)
    cmd, stdin = host.commands[0]
    assert json.loads(stdin) == {"port": 8000, "model": "tiny", "key": "sk-secret"}
    assert cmd.startswith("systemctl show -p ActiveState,NRestarts -- vllm.service; ")
    assert "/usr/bin/python3 -c " in cmd

    host = ScriptedHost(
        "ActiveState=active\nNRestarts=0\nready\n",
        vars={"service_name": "vllm-b", "vllm_port": 8123, "vllm_python": "/opt/py/bin/python3"},
    )
    readiness.probe(host)
    cmd, stdin = host.commands[0]
    assert json.loads(stdin)["port"] == 8123
    assert "-- vllm-b.service;" in cmd and "/opt/py/bin/python3 -c " in cmd
    # an explicit unit wins over the config's
    readiness.probe(host, "other.service")
    assert "-- other.service;" in host.commands[-1][0]


def test_probe_looks_for_the_served_model_name():
    """A host with its own served name: vLLM lists that name, not model_name."""
    host = ScriptedHost("ActiveState=active\nNRestarts=0\nready\n", vars={"served_model_name": "tiny-chat"})
    assert host.config.model_name == "tiny"
    readiness.probe(host)
    assert json.loads(host.commands[0][1])["model"] == "tiny-chat"


def test_probe_without_an_api_key_sends_none():
    host = ScriptedHost("ActiveState=active\nNRestarts=0\nready\n")
    host.config = host_config({}, name="gpu01")
    readiness.probe(host)
    assert json.loads(host.commands[0][1])["key"] is None


def test_wait_ready_fails_fast_when_systemd_restarted_the_crashed_unit():
    host = ScriptedHost(
        "ActiveState=activating\nNRestarts=4\nloading\n",
        "ActiveState=activating\nNRestarts=5\nloading\n",
        "journal line\n",
    )
    with pytest.raises(HostFailed, match="the unit died") as e:
        readiness.wait_ready(host, timeout=30)
    assert "journal line" in str(e.value) and "gpu01" in str(e.value)
    assert len([c for c, _ in host.commands if "NRestarts" in c]) == 2
    assert any("journalctl -u vllm.service" in c for c, _ in host.commands)


def test_wait_ready_names_the_triage_class_from_the_journal_it_reads_once():
    """The failure line carries the class and its short next step, read from the same journal
    tail the message always fetched: one journalctl, no extra round trip."""
    log = (Path(__file__).parent / "data" / "triage" / "oom-after-loading-1.log").read_text()
    host = ScriptedHost("ActiveState=failed\nNRestarts=0\nloading\n", log)
    with pytest.raises(HostFailed) as e:
        readiness.wait_ready(host, timeout=30)
    message = str(e.value)
    assert message.startswith(
        "vLLM on gpu01: the unit died; out of memory after loading (KV cache allocation or "
        "CUDA graph capture): lower gpu_memory_utilization by 0.02-0.05 first, then max_model_len"
    )
    assert message.split("; journal: ", 1)[1].endswith("^^^^^^^^^^^^^^^^^^^^^^^^^^^^^")
    assert len([c for c, _ in host.commands if "journalctl" in c]) == 1
    assert e.value.data["triage"]["class"] == "oom-after-loading"
    assert e.value.data["journal"].startswith("INFO 08-20 03:09:59")


def test_wait_ready_returns_once_ready():
    host = ScriptedHost("ActiveState=activating\nNRestarts=1\nloading\n", "ActiveState=active\nNRestarts=1\nready\n")
    assert readiness.wait_ready(host, timeout=30) >= 0


def test_wait_ready_timeout_defaults_to_the_configs_ready_timeout():
    host = ScriptedHost("ActiveState=activating\nNRestarts=0\nloading\n", vars={"ready_timeout": 1})
    with pytest.raises(HostFailed, match=r"not ready after 1s \(last: loading\)"):
        readiness.wait_ready(host)


# --- the probe's real command line and script, run locally against a fake vLLM --------


class _FakeVllm(http.server.ThreadingHTTPServer):
    daemon_threads = True


def _start_fake_vllm(served: str, key: str | None, health: int = 200):
    class H(JsonHandler):
        def do_GET(self):
            if self.path == "/health":
                self.send_json(health, {})
            elif self.path == "/v1/models":
                if key and self.headers.get("Authorization") != f"Bearer {key}":
                    self.send_json(401, {"error": "Unauthorized"})
                else:
                    self.send_json(200, {"object": "list", "data": [{"id": served, "object": "model"}]})
            else:
                self.send_json(404, {})

    srv = _FakeVllm(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


class LocalHost:
    """A HostContext stand-in that runs the probe's command with a local shell; `systemctl`
    is a stub on PATH that reports the unit active."""

    def __init__(self, cfg, bindir: Path):
        self.name = cfg.name
        self.config = cfg
        self.env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}

    def run(self, cmd: str, stdin: str | None = None, timeout: float | None = None, **_):
        r = subprocess.run(
            ["sh", "-c", cmd], input=stdin, capture_output=True, text=True, timeout=timeout, env=self.env
        )
        return SimpleNamespace(stdout=r.stdout, stderr=r.stderr, exited=r.returncode, ok=r.returncode == 0)

    def progress(self, *args) -> None:
        pass


@pytest.fixture
def stub_systemctl(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stub = bindir / "systemctl"
    stub.write_text("#!/bin/sh\nprintf 'ActiveState=active\\nNRestarts=0\\n'\n")
    stub.chmod(0o755)
    return bindir


def _local(stub_systemctl: Path, srv, **vars) -> LocalHost:
    cfg = host_config(
        {"vllm_python": sys.executable, "vllm_port": srv.server_address[1], "api_key": "sk-probe", **vars}, name="gpu01"
    )
    return LocalHost(cfg, stub_systemctl)


def test_real_probe_is_ready_for_a_host_with_its_own_served_name(stub_systemctl):
    srv = _start_fake_vllm("tiny-chat", key="sk-probe")
    try:
        host = _local(stub_systemctl, srv, served_model_name="tiny-chat")
        assert readiness.probe(host) == "ready"
        assert readiness.wait_ready(host, timeout=10) >= 0
        # looking for model_name instead (the old bug) never becomes ready
        assert readiness.probe(_local(stub_systemctl, srv)) == "no-model listed=tiny-chat"
        # the key is sent (as a Bearer header): a wrong one does not list the model
        wrong = _local(stub_systemctl, srv, served_model_name="tiny-chat", api_key="sk-wrong")
        assert readiness.probe(wrong).startswith("no-model")
    finally:
        srv.shutdown()


def test_real_probe_loading_and_unhealthy(stub_systemctl):
    srv = _start_fake_vllm("tiny", key=None, health=503)
    try:
        assert readiness.probe(_local(stub_systemctl, srv)) == "unhealthy 503"
    finally:
        srv.shutdown()
    srv.server_close()
    # nothing listens on the port any more: vLLM still loading
    assert readiness.probe(_local(stub_systemctl, srv)) == "loading"
