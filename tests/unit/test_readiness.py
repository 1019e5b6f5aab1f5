"""Readiness parsing: systemd's properties and the HTTP probe's verdict come back from one SSH
round trip; a growing NRestarts turns 'loading' into a crash. The connection is faked (this is
a parser/rule test); the lab deploy and rollout tests run the same code against real vLLM."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from fleet.runner import HostFailed
from roles import readiness


class ScriptedHost:
    """A HostContext stand-in whose `run` answers from a list of stdouts, in order."""

    def __init__(self, *outputs: str):
        self.outputs = list(outputs)
        self.commands: list[tuple[str, str | None]] = []
        self.name = "gpu01"
        self.vars = {"model_name": "tiny", "api_key": "sk-secret", "service_name": "vllm"}

    def run(self, cmd: str, stdin: str | None = None, timeout: float | None = None, **_):
        self.commands.append((cmd, stdin))
        out = self.outputs.pop(0) if len(self.outputs) > 1 else self.outputs[0]
        return SimpleNamespace(stdout=out, stderr="", exited=0, ok=True)

    def progress(self, *args) -> None:
        pass


@pytest.mark.parametrize("stdout, expect", [
    ("ActiveState=active\nNRestarts=0\nready\n", "ready"),
    ("ActiveState=activating\nNRestarts=0\nloading\n", "loading"),
    ("ActiveState=failed\nNRestarts=3\nloading\n", "dead (failed)"),
    ("ActiveState=inactive\nNRestarts=0\nunhealthy 503\n", "dead (inactive)"),
    ("ActiveState=active\nNRestarts=0\nno-model listed=other\n", "no-model listed=other"),
])
def test_probe_reads_systemd_and_http_verdict_from_one_round_trip(stdout, expect):
    host = ScriptedHost(stdout)
    assert readiness.probe(host) == expect
    assert len(host.commands) == 1
    cmd, stdin = host.commands[0]
    assert "sk-secret" not in cmd and "sk-secret" in stdin  # the key travels on stdin only


def test_wait_ready_fails_fast_when_systemd_restarted_the_crashed_unit():
    host = ScriptedHost("ActiveState=activating\nNRestarts=4\nloading\n",
                        "ActiveState=activating\nNRestarts=5\nloading\n",
                        "journal line\n")
    with pytest.raises(HostFailed, match="the unit died"):
        readiness.wait_ready(host, timeout=30)
    assert len([c for c, _ in host.commands if "NRestarts" in c]) == 2


def test_wait_ready_returns_once_ready():
    host = ScriptedHost("ActiveState=activating\nNRestarts=1\nloading\n",
                        "ActiveState=active\nNRestarts=1\nready\n")
    assert readiness.wait_ready(host, timeout=30) >= 0
