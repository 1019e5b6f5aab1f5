"""prometheus-nginx-exporter on a gateway (vfleet/roles/monitoring/_exporter.py): the plan from fake facts
(pyinfra's way: a bare host, a converged one, new ARGS, a stopped exporter, a masked unit), the
fact commands run on this machine (which has Debian's package, as the lab needs), and the real
exporter, started with exactly the ARGS the plan writes, reading the real nginx running the
rendered gateway on loopback: nginx_up 1, requests counted, nginx_up 0 once nginx is gone."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from tests.unit.gateway_cases import BACKENDS, gw
from tests.unit.test_gateway_render import _free_port, _nginx_prefix
from vfleet.engine.facts import FileState, UnitState
from vfleet.engine.runner import HostFailed
from vfleet.roles.gateway import _render as gr
from vfleet.roles.gateway._files import render_files
from vfleet.roles.monitoring._exporter import DEFAULTS_FILE, PACKAGE, UNIT, defaults_text, facts_for, plan

GW = gw()


def have(text: str) -> FileState:
    return FileState("file", hashlib.sha256(text.encode()).hexdigest(), "644", "root", "root")


def facts(*, installed=True, enabled="enabled", active="active", args: str | None = None) -> dict:
    return {
        "exporter": installed,
        "unit": UnitState(enabled, active),
        "defaults": have(defaults_text(GW) if args is None else args),
    }


def steps(changes) -> list[tuple[str, str]]:
    return [(c.action, c.target) for c in changes]


def test_args_read_the_loopback_stub_status_and_listen_on_the_exporter_port():
    cfg = gw({"monitoring_gateway_status_port": 8181, "monitoring_gateway_exporter_port": 9200})
    text = defaults_text(cfg)
    assert (
        "ARGS='-nginx.scrape-uri=http://127.0.0.1:8181/stub_status -web.listen-address=:9200 "
        "-nginx.retries=1000000 -nginx.retry-interval=5s'\n"
    ) in text
    # the renderer serves stub_status exactly there
    conf = gr.render_gateway(BACKENDS[:1], cfg)
    assert "listen 127.0.0.1:8181;" in conf and "location = /stub_status {" in conf
    status = conf[conf.index("location = /stub_status {") :]
    assert status.index("allow 127.0.0.1;") < status.index("deny all;") < status.index("}")


def test_bare_host_installs_configures_enables_and_restarts():
    bare = {"exporter": False, "unit": UnitState("not-found", "unknown"), "defaults": FileState("missing")}
    changes = plan(GW, bare)
    assert steps(changes) == [
        ("package", PACKAGE),
        ("exporter args", DEFAULTS_FILE),
        ("service", UNIT),
        ("service", UNIT),
    ]
    assert "apt-get install" in changes[0].command and "--no-install-recommends" in changes[0].command
    assert "enable" in changes[2].command and changes[3].command == f"systemctl restart {UNIT}"


def test_converged_host_changes_nothing():
    assert plan(GW, facts()) == []


def test_new_args_restart_a_running_exporter():
    changes = plan(GW, facts(args='ARGS=""\n'))
    assert steps(changes) == [("exporter args", DEFAULTS_FILE), ("service", UNIT)]
    assert changes[1].command == f"systemctl restart {UNIT}"


def test_a_stopped_exporter_is_started_once_not_restarted():
    changes = plan(GW, facts(active="failed", args='ARGS=""\n'))
    assert steps(changes) == [("exporter args", DEFAULTS_FILE), ("service", UNIT)]
    assert "systemctl start" in changes[1].command


def test_a_masked_unit_is_refused():
    with pytest.raises(HostFailed, match="masked"):
        plan(GW, facts(enabled="masked", active="inactive"))


def test_a_status_port_equal_to_the_gateway_port_is_one_clear_line():
    cfg = gw({"gateway_port": 8081, "monitoring_gateway_status_port": 8081})
    with pytest.raises(HostFailed, match="gw01: monitoring_gateway_status_port 8081 is gateway_port too"):
        plan(cfg, facts())
    with pytest.raises(gr.GatewayRenderError, match="give it a port of its own"):
        gr.render_gateway(BACKENDS[:1], cfg)


def test_facts_read_this_machine_as_installed():
    got = {}
    for name, fact in facts_for().items():
        out = subprocess.run(["sh", "-c", fact.command()], capture_output=True, text=True, timeout=30).stdout
        got[name] = fact.process(out.splitlines())
    assert got["exporter"] is True, f"`apt-get install {PACKAGE}` (the Makefile's APT_NO_RECOMMENDS lists it)"
    assert "package" not in [c.action for c in plan(GW, {**got, "unit": UnitState("enabled", "active")})]


def _metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith(("nginx_up", "nginx_http_requests_total", "nginx_connections_active"))
    }


def _wait(probe, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return probe()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.skipif(not shutil.which("nginx"), reason="needs nginx")
def test_real_exporter_with_the_planned_args_reads_the_rendered_gateway(tmp_path):
    ports = {
        k: _free_port() for k in ("gateway_port", "monitoring_gateway_status_port", "monitoring_gateway_exporter_port")
    }
    cfg = gw({**ports, "gateway_listen_address": "127.0.0.1"})
    conf = _nginx_prefix(tmp_path, render_files(BACKENDS[:1], cfg))
    nginx = subprocess.Popen(["nginx", "-p", str(tmp_path), "-c", str(conf)], stderr=subprocess.PIPE)
    # the exporter as Debian's unit starts it: ARGS from the defaults file, split at whitespace
    (tmp_path / "defaults").write_text(defaults_text(cfg))
    exporter = subprocess.Popen(
        ["sh", "-c", f". {tmp_path}/defaults; exec {PACKAGE} $ARGS"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    public = f"http://127.0.0.1:{ports['gateway_port']}"
    try:
        _wait(lambda: urllib.request.urlopen(public + "/health", timeout=1))
        # stub_status is not on the public listener
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(public + "/stub_status", timeout=5)
        assert e.value.code == 404
        before = _wait(lambda: _metrics(ports["monitoring_gateway_exporter_port"]))
        assert before["nginx_up"] == 1 and before["nginx_connections_active"] >= 1
        for _ in range(5):
            urllib.request.urlopen(public + "/health", timeout=5)
        after = _metrics(ports["monitoring_gateway_exporter_port"])
        assert after["nginx_http_requests_total"] >= before["nginx_http_requests_total"] + 5
        nginx.terminate()
        nginx.wait(timeout=10)
        assert _metrics(ports["monitoring_gateway_exporter_port"])["nginx_up"] == 0
    finally:
        for p in (exporter, nginx):
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
