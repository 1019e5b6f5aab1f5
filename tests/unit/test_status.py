"""`vfleet status` without a host: rows built from the probes' answers as the host prints
them (the engine's section format), drift from rendered hashes, the verdict over --watch
rounds, the screen, and the whole command on a local connection with a real /metrics server."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from pathlib import Path

import pytest
import yaml

from tests.unit.cli_run import vfleet_cli
from tests.unit.configs import host_config
from vfleet.engine.fact_protocol import Output, sections
from vfleet.roles.status import _drift as drift_mod
from vfleet.roles.status._collect import Watch, answers, build_round, probes_for
from vfleet.roles.status._screen import HOST_COLUMNS, gateway_cells, host_cells, screen

DATA = Path(__file__).parent / "data"
METRICS = (DATA / "bench" / "metrics_vllm_new.txt").read_text()
PARSERS = {c["name"]: c["output"] for c in yaml.safe_load((DATA / "status" / "parsers.yaml").read_text())}
BACKENDS = [("busy", "http://10.0.0.1:8000"), ("drained", "http://10.0.0.2:8000"), ("stopped", "http://10.0.0.3:8000")]


def metrics(
    running: float = 3,
    waiting: float = 2,
    kv: float = 0.4375,
    preemptions: float = 7,
    ttft_sum: float = 1.5,
    ttft_count: float = 10,
) -> str:
    """The captured /metrics of vLLM 0.11 with other numbers in it."""
    return (
        METRICS.replace("} 3.0", f"}} {running}", 1)
        .replace("} 2.0", f"}} {waiting}", 1)
        .replace("} 0.4375", f"}} {kv}")
        .replace("} 7.0", f"}} {preemptions}")
        .replace('_sum{engine="0",model_name="tiny"} 1.5', f'_sum{{engine="0",model_name="tiny"}} {ttft_sum}')
        .replace('_count{engine="0",model_name="tiny"} 10.0', f'_count{{engine="0",model_name="tiny"}} {ttft_count}')
    )


def cfg(name: str, **extra):
    return host_config({"max_num_seqs": 4, **extra}, name=name)


def files_ok(c) -> str:
    """The drift probe's answer of a host whose files are what deploy would write."""
    want = drift_mod.wanted(c, 252)
    return f"systemd=systemd 252 (252.39-1~deb12u2)\nunit={want.unit_sha}\nenv={want.env_sha}\n"


def host_wire(c, unit: str, metrics_text: str | None, drained_on_gw: bool = False) -> str:
    outs = {
        "unit": Output(PARSERS[unit]),
        "install": Output(f"venv={c.venv_path}\n" + json.dumps({"verified": {"version": c.vllm_version}})),
        "weights": Output("/srv/models/.versions/tiny-1a2b3c4d5e6f\n"),
        "metrics": Output(metrics_text or "", "curl: (7) Failed to connect", 0 if metrics_text else 7),
        "gpu_memory": Output("0, 78011, 81920\n"),
        "gpu_util": Output("0, 97\n"),
        "journal": Output(PARSERS["a crash and its automatic restart, then a deploy's restart"]),
        "files": Output(files_ok(c)),
    }
    return sections(outs)


def gateway_wire() -> str:
    return sections(
        {
            "nginx": Output("active\n"),
            "drained": Output("drained\n"),
            "backends": Output("busy 200\ndrained 200\nstopped 000\n"),
        }
    )


def fleet_round(watch: Watch, busy_metrics: str):
    busy, drained, stopped, gone = cfg("busy"), cfg("drained"), cfg("stopped"), cfg("gone")
    gw = host_config(name="gw", group="gateways")
    wires = {
        "busy": host_wire(busy, "running unit", busy_metrics),
        "drained": host_wire(drained, "running unit", metrics(0, 0, 0.0, 0)),
        "stopped": host_wire(stopped, "stopped unit", None),
        "gw": gateway_wire(),
    }
    configs = [busy, drained, stopped, gone, gw]
    facts = {c.name: answers(probes_for(c, BACKENDS), wires[c.name]) for c in configs if c.name in wires}
    return build_round(configs, facts, {"gone": "unreachable: gone (10.0.0.4:22): cannot connect"}, watch)


def test_a_host_under_load_a_drained_one_a_stopped_one_and_one_that_does_not_answer():
    rnd = fleet_round(Watch(), metrics(running=4))  # at its max_num_seqs of 4, 2 waiting
    rows = {h.name: dict(zip(HOST_COLUMNS, host_cells(h))) for h in rnd.hosts}
    busy, drained, stopped, gone = rows["busy"], rows["drained"], rows["stopped"], rows["gone"]
    assert (busy["UNIT"], busy["SINCE"], busy["RUN"], busy["WAIT"], busy["KV"]) == (
        "active/running",
        "2h33m",
        "4",
        "2",
        "44%",
    )
    assert busy["GATEWAYS"] == "in" and busy["VLLM"] == "0.32.0" and busy["VENV"] == "vllm-0.32.0"
    assert busy["WEIGHTS"] == "tiny-1a2b3c4d5e6f" and busy["STARTS 1h"] == "3 (2 exits)"
    assert busy["GPU MEM"] == "76/80G" and busy["GPU UTIL"] == "1x 97%"
    assert busy["VERDICT"] == "max_num_seqs too small"
    assert busy["DRIFT"] == "none*"  # files and venv as wanted; no manifest on this controller to compare weights
    assert drained["GATEWAYS"] == "gw:drained" and drained["VERDICT"] == "idle"
    assert (stopped["UNIT"], stopped["SINCE"], stopped["RUN"], stopped["GATEWAYS"]) == (
        "inactive/dead",
        "34m",
        "-",
        "gw:down",
    )
    assert stopped["VERDICT"] == "unknown"
    assert gone["UNIT"] == "no answer" and set(list(gone.values())[2:]) == {"-"}
    # the drained host answers /health but takes no traffic: not counted up
    assert gateway_cells(rnd.gateways[0]) == ["gw", "active", "1", "stopped", "drained"]
    assert (rnd.gateways[0].up, rnd.gateways[0].down) == (["busy"], ["stopped"])
    report = rnd.to_dict()
    assert report["hosts"]["gone"]["error"].startswith("unreachable") and rnd.unanswered == ["gone"]
    assert report["hosts"]["busy"]["numbers"] == {
        "waiting": 2.0,
        "running": 4.0,
        "max_num_seqs": 4,
        "kv_cache_usage": 0.4375,
    }
    assert report["summary"]["verdicts"] == {"max_num_seqs too small": 1, "idle": 1, "unknown": 1}
    json.dumps(report)  # every field is JSON


def test_the_screen_names_the_numbers_behind_a_verdict_and_why_a_host_is_missing():
    from rich.console import Console

    con = Console(width=400, record=True)
    con.print(screen(fleet_round(Watch(), metrics(running=4))))
    text = con.export_text()
    assert "gone: no answer: unreachable: gone (10.0.0.4:22): cannot connect" in text
    assert "busy: max_num_seqs too small (waiting 2, running 4, max_num_seqs 4, KV 44%): " in text


def test_watch_rounds_judge_the_preemptions_and_ttft_of_the_window_between_them():
    watch = Watch()
    first = fleet_round(watch, metrics(running=4, waiting=0, kv=0.5, preemptions=7, ttft_sum=1.5, ttft_count=10))
    assert first.hosts[0].verdict.kind == "healthy"  # counters since start say nothing of now
    # 10 answers at 0.5 s, then 10 at 1.0 s: the window's mean TTFT doubled, the engine at max_num_seqs
    second = fleet_round(watch, metrics(running=4, waiting=0, kv=0.5, preemptions=7, ttft_sum=6.5, ttft_count=20))
    third = fleet_round(watch, metrics(running=4, waiting=0, kv=0.5, preemptions=7, ttft_sum=16.5, ttft_count=30))
    assert second.hosts[0].verdict.kind == "healthy"  # one window: no trend yet
    assert third.hosts[0].verdict.kind == "queueing"
    assert third.hosts[0].verdict.numbers == {
        "running": 4.0,
        "waiting": 0.0,
        "max_num_seqs": 4,
        "ttft_s": 1.0,
        "ttft_before_s": 0.5,
    }
    fourth = fleet_round(watch, metrics(running=4, waiting=1, kv=0.95, preemptions=9, ttft_sum=26.5, ttft_count=40))
    assert fourth.hosts[0].verdict.line().startswith("memory-bound (waiting 1, running 4, KV 95%, preemptions 2)")


def test_drift_names_each_file_that_differs_and_what_it_could_not_compare(tmp_path):
    src = tmp_path / "tiny"
    src.mkdir()
    (src / "MANIFEST.sha256").write_text("00  config.json\n")
    c = cfg("busy", model_source=str(src))
    manifest = hashlib.sha256(b"00  config.json\n").hexdigest()
    want = drift_mod.wanted(c, 252)
    from vfleet.roles.status._parsers import FileHashes

    same = drift_mod.drift(
        c,
        want,
        FileHashes(252, want.unit_sha, want.env_sha),
        "enabled",
        c.venv_path,
        f"/srv/models/.versions/tiny-{manifest[:12]}",
    )
    assert same.label == "none" and same.unknown == ()
    other = drift_mod.drift(
        c,
        want,
        FileHashes(252, "0" * 64, "unreadable"),
        "disabled",
        "/opt/vllm/vllm-0.10.0",
        "/srv/models/.versions/tiny-000000000000",
    )
    assert other.changed == ("unit", "enabled", "venv", "weights")
    assert other.unknown == ("env: not readable by the connecting user",)
    assert drift_mod.drift(c, want, FileHashes(252, "missing", want.env_sha), "enabled", c.venv_path, None).changed == (
        "unit",
        "weights",
    )
    # the env file's NCCL_ lines are preflight's topology decision: left out on both sides
    with_nccl = cfg("busy", nccl_env={"NCCL_P2P_DISABLE": "1"})
    assert drift_mod.wanted(with_nccl, 252).env_sha == want.env_sha


def test_each_watch_round_reads_the_controllers_manifest_again(tmp_path):
    """A manifest written during --watch (the weights role copied the model) is compared from
    the next round on, not hidden by the first round's answer."""
    src = tmp_path / "tiny"
    src.mkdir()
    c = cfg("busy", model_source=str(src))
    facts = {"busy": answers(probes_for(c, BACKENDS), host_wire(c, "running unit", metrics()))}
    watch = Watch()
    first = build_round([c], facts, {}, watch).hosts[0].drift
    assert first.changed == () and "weights: no manifest on the controller to compare with" in first.unknown
    (src / "MANIFEST.sha256").write_text("00  config.json\n")  # its id is not the host's 1a2b3c4d5e6f
    assert build_round([c], facts, {}, watch).hosts[0].drift.changed == ("weights",)


class _Vllm(http.server.BaseHTTPRequestHandler):
    """vLLM's /metrics (the captured text) and /health, on loopback."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = {"/metrics": METRICS.encode(), "/health": b""}.get(self.path)
        self.send_response(404 if body is None else 200)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


@pytest.fixture
def vllm_port():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Vllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_command_on_a_local_host_and_one_that_cannot_be_reached(tmp_path, vllm_port):
    """The real script through a real shell (local connection), a real HTTP /metrics; a host
    on a closed port is a row saying so, and the command exits 1 for it, not with a traceback."""
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {"vllm_version": "0.11.0", "model_name": "tiny"},
                    "children": {
                        "vllm": {
                            "hosts": {
                                "here": {
                                    "ansible_connection": "local",
                                    "ansible_host": "127.0.0.1",
                                    "vllm_host": "127.0.0.1",
                                    "vllm_port": vllm_port,
                                    "max_num_seqs": 3,
                                },
                                "gone": {"ansible_host": "127.0.0.1", "ansible_port": 1},
                            }
                        },
                        "gateways": {"hosts": {"gw": {"ansible_connection": "local"}}},
                    },
                }
            }
        )
    )
    report = tmp_path / "status.json"
    p = vfleet_cli("status", "--inventory", str(inv), "--no-host-key-checking", "--report", str(report))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    data = json.loads(report.read_text())
    here = data["hosts"]["here"]
    assert here["server"] == {"running": 3.0, "waiting": 2.0, "kv_cache_usage": 0.4375, "preemptions": 7.0}
    assert here["served"] == ["tiny"] and here["verdict"] == "max_num_seqs too small"
    assert data["gateways"]["gw"]["backends"] == {"here": 200, "gone": None}
    assert data["hosts"]["gone"]["error"].startswith("unreachable")
    assert "gone: no answer: unreachable" in p.stdout and "here: max_num_seqs too small" in p.stdout


def test_watch_redraws_until_ctrl_c_and_exits_0(tmp_path, vllm_port):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.unit.cli_run import ROOT

    inv = tmp_path / "inv.yaml"
    inv.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {"vllm_version": "0.11.0", "model_name": "tiny"},
                    "children": {
                        "vllm": {
                            "hosts": {
                                "here": {
                                    "ansible_connection": "local",
                                    "ansible_host": "127.0.0.1",
                                    "vllm_host": "127.0.0.1",
                                    "vllm_port": vllm_port,
                                }
                            }
                        }
                    },
                }
            }
        )
    )
    report = tmp_path / "status.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # -X faulthandler: a process that does not end on Ctrl-C (it happened once, in a fresh-clone
    # make test, not since in 37 tries) dumps every thread's stack on SIGABRT, shown below
    proc = subprocess.Popen(
        [
            sys.executable,
            "-X",
            "faulthandler",
            "-m",
            "vfleet.cli",
            "status",
            "-i",
            str(inv),
            "--watch",
            "1",
            "--report",
            str(report),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        taken = set()
        while len(taken) < 2 and time.monotonic() < deadline:  # two rounds written
            if report.exists():
                taken.add(json.loads(report.read_text())["taken_at"])
            time.sleep(0.2)
        assert len(taken) >= 2, "the report was not rewritten by a second round"
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            out, err = proc.communicate(timeout=30)
            raise AssertionError(
                f"status --watch still running 30 s after Ctrl-C; its threads:\n{err[-8000:]}"
            ) from None
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in out + err and "here" in out


def test_watch_ends_after_the_round_in_which_a_ctrl_c_was_swallowed(tmp_path, vllm_port, monkeypatch):
    """The fresh-clone hang above, made on purpose: code inside a round catches the
    KeyboardInterrupt of a Ctrl-C; --watch still ends after that round (its own stop flag)."""
    import signal

    from invoke import Context

    import vfleet.roles.status as status_face
    from vfleet.cli.status import status
    from vfleet.roles.model_source import _hub as hub

    inv = tmp_path / "inv.yaml"
    inv.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {"vllm_version": "0.11.0", "model_name": "tiny"},
                    "children": {
                        "vllm": {
                            "hosts": {
                                "here": {
                                    "ansible_connection": "local",
                                    "ansible_host": "127.0.0.1",
                                    "vllm_host": "127.0.0.1",
                                    "vllm_port": vllm_port,
                                }
                            }
                        }
                    },
                }
            }
        )
    )
    real, rounds = status_face.run_round, []

    def swallowing(*args, **kwargs):
        rounds.append(1)
        assert len(rounds) < 3, "--watch went on after a Ctrl-C"
        try:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C, caught by code inside the round
        except KeyboardInterrupt:
            pass
        return real(*args, **kwargs)

    monkeypatch.setattr(status_face, "run_round", swallowing)  # where `vfleet status` looks it up
    monkeypatch.setattr(hub, "_cache_only", False)  # status sets it for its process: put back after
    previous = signal.getsignal(signal.SIGINT)
    status(Context(), inventory=str(inv), watch="1", report=str(tmp_path / "status.json"))
    assert rounds == [1] and signal.getsignal(signal.SIGINT) is previous  # one round, handler put back
