"""mtail on a gateway (vfleet/roles/monitoring/_mtail.py, vfleet_gateway.mtail): the program run by
the real mtail (`--one_shot`) over a sample access log, counting per tenant, model, status and
error; the plan from fake facts (pyinfra's way); the program check rejecting a broken program;
and the per-tenant recording rules (usage_rules.py) through the real `promtool test rules`."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.gateway_cases import gw
from tests.unit.test_monitor_rules import TH, V1, promtool
from vfleet.config.access_log import ACCESS_LOG, ERROR_KINDS, FIELDS, UNBOUNDED_MODEL_ERRORS
from vfleet.engine.facts import FileState, UnitState
from vfleet.engine.runner import HostFailed
from vfleet.roles.monitoring._mtail import (
    CHECK,
    DEFAULTS_FILE,
    PACKAGE,
    PROGRAM_NAME,
    PROGRAM_PATH,
    PROGRAMS_DIR,
    UNIT,
    defaults_text,
    plan,
    program_text,
)
from vfleet.roles.monitoring._rules import rules_yaml

GW = gw()


def _line(tenant: str, model: str, status: int, error: str, request_time: float, ttfb: str = "0.010") -> str:
    """One line as the gateway's log_format writes it (keys in FIELDS' order, escape=json, no spaces)."""
    assert error in ("", *ERROR_KINDS)
    line = json.dumps(
        {
            "time": "2026-12-02T20:40:01+00:00",
            "msec": 1796244001.123,
            "tenant": tenant,
            "model": model,
            "answered_by": model if status < 400 else "",
            "status": status,
            "error": error,
            "upstream": "10.0.0.5:8000" if status < 400 else "",
            "request_time": request_time,
            "ttfb": ttfb,
            "method": "POST",
            "path": "/v1/chat/completions",
            "bytes": 1234,
        },
        separators=(",", ":"),
    )
    assert tuple(json.loads(line)) == FIELDS
    return line


def mtail_one_shot(progs: Path, log: Path) -> dict[str, list[dict]]:
    """The real mtail over `log` from start to end; its metric store as JSON (never skipped)."""
    exe = shutil.which("mtail")
    if exe is None:
        pytest.fail("mtail not found: `apt-get install -y mtail` (Debian's package; the Makefile's APT lists)")
    p = subprocess.run(
        [exe, "--one_shot", "--one_shot_format", "json", "--port", "0", "--progs", str(progs), "--logs", str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _values(store: dict, name: str) -> dict[tuple, float]:
    out = {}
    for metric in store.get(name, []):
        for lv in metric["LabelValues"]:
            value = lv["Value"]
            out[tuple(lv.get("Labels") or ())] = value.get("Value", value)
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("mtail")
    (tmp / "progs").mkdir()
    (tmp / "progs" / PROGRAM_NAME).write_text(program_text())
    lines = [
        _line("search", "qwen-7b", 200, "", 0.4),
        _line("search", "qwen-7b", 200, "", 0.2, "0.001, 0.030"),
        *[_line("search", "qwen-7b", 429, "rate_limited", 0.0, "") for _ in range(3)],
        _line("search", "qwen-7b", 429, "concurrency_limited", 0.0, ""),
        _line("batch", "qwen-1.5b", 200, "", 1.5),
        _line("batch", "qwen-1.5b", 502, "upstream", 0.1),
        _line("vfleet", "qwen-7b", 200, "", 0.3),
        _line("", 'made"up-1', 401, "unauthorized", 0.0, ""),
        _line("", "made-up-2", 401, "unauthorized", 0.0, ""),
        _line("search", "secret-model", 404, "model_not_found", 0.0, ""),
        "not json",
        '{"time":"x"}',
    ]
    (tmp / "access.log").write_text("\n".join(lines) + "\n")
    return mtail_one_shot(tmp / "progs", tmp / "access.log")


def test_requests_are_counted_per_tenant_model_status_and_error(store):
    # labels in the program's order: tenant, model, status, error
    assert _values(store, "vfleet_gateway_requests_total") == {
        ("search", "qwen-7b", "200", ""): 2,
        ("search", "qwen-7b", "429", "rate_limited"): 3,
        ("search", "qwen-7b", "429", "concurrency_limited"): 1,
        ("batch", "qwen-1.5b", "200", ""): 1,
        ("batch", "qwen-1.5b", "502", "upstream"): 1,
        ("vfleet", "qwen-7b", "200", ""): 1,
        # a model the client made up is no label: one series, however many names are tried
        ("", "", "401", "unauthorized"): 2,
        ("search", "", "404", "model_not_found"): 1,
    }


def test_request_times_and_unread_lines(store):
    times = {labels: v for labels, v in _values(store, "vfleet_gateway_request_seconds").items()}
    search = times[("search", "qwen-7b")]
    assert search["Count"] == 6 and search["Sum"] == pytest.approx(0.6)
    assert times[("batch", "qwen-1.5b")]["Count"] == 2 and times[("batch", "qwen-1.5b")]["Sum"] == pytest.approx(1.6)
    assert list(_values(store, "vfleet_gateway_log_lines_unread_total").values()) == [2]


def test_the_program_collapses_exactly_the_errors_the_config_names():
    alternatives = re.search(r"\$error =~ /\^\(\?:([a-z_|]+)\)\$/", program_text()).group(1)
    assert tuple(alternatives.split("|")) == UNBOUNDED_MODEL_ERRORS and set(UNBOUNDED_MODEL_ERRORS) <= set(ERROR_KINDS)


def test_the_program_check_rejects_a_broken_program(tmp_path):
    (tmp_path / PROGRAM_NAME).write_text(program_text())
    ok = subprocess.run(
        CHECK.replace(PROGRAMS_DIR, str(tmp_path)), shell=True, capture_output=True, text=True, timeout=60
    )
    assert ok.returncode == 0, ok.stderr
    (tmp_path / PROGRAM_NAME).write_text(program_text().replace("} else {", "} else ", 1))
    bad = subprocess.run(
        CHECK.replace(PROGRAMS_DIR, str(tmp_path)), shell=True, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode != 0 and "compile failed" in bad.stderr


def have(text: str) -> FileState:
    return FileState("file", hashlib.sha256(text.encode()).hexdigest(), "644", "root", "root")


def facts(
    *,
    installed=True,
    enabled="enabled",
    active="active",
    args: str | None = None,
    program: str | None = None,
    reads_logs: bool = True,
) -> dict:
    return {
        "mtail": installed,
        "unit": UnitState(enabled, active),
        "defaults": have(defaults_text(GW) if args is None else args),
        "program": have(program_text() if program is None else program),
        "reads_logs": reads_logs,
    }


def steps(changes) -> list[tuple[str, str]]:
    return [(c.action, c.target) for c in changes]


def test_defaults_name_the_access_log_and_the_port():
    text = defaults_text(gw({"monitoring_gateway_mtail_port": 3999}))
    assert f"\nLOGS={ACCESS_LOG}\n" in text and "\nPORT=3999\n" in text and "\nHOST=" in text
    assert "\nPORT=3903\n" in defaults_text(GW)


def test_bare_host_installs_writes_checked_files_enables_and_restarts():
    bare = {
        "mtail": False,
        "unit": UnitState("disabled", "inactive"),
        "defaults": FileState("file", "x"),
        "program": FileState("missing"),
        "reads_logs": False,
    }
    changes = plan(GW, bare)
    assert steps(changes) == [
        ("package", PACKAGE),
        ("mtail args", DEFAULTS_FILE),
        ("user", "mtail"),
        ("mtail program", PROGRAM_PATH),
        ("service", UNIT),
        ("service", UNIT),
    ]
    # nginx's logs are 0640 www-data:adm: Debian's mtail user reads them as a member of adm
    assert changes[2].command == "usermod -a -G adm mtail"
    assert CHECK in changes[3].command
    assert "enable" in changes[4].command and changes[5].command == f"systemctl restart {UNIT}"


def test_converged_host_changes_nothing_and_changes_restart_or_reload():
    assert plan(GW, facts()) == []
    port = plan(gw({"monitoring_gateway_mtail_port": 3999}), facts())
    assert steps(port)[-1] == ("service", UNIT) and "restart" in port[-1].command
    program = plan(GW, facts(program="old program\n"))
    assert steps(program) == [("mtail program", PROGRAM_PATH), ("service", UNIT)]
    assert program[-1].command == f"systemctl reload {UNIT}"
    joins = plan(GW, facts(reads_logs=False))  # joining a group needs a new process: a restart
    assert steps(joins) == [("user", "mtail"), ("service", UNIT)] and "restart" in joins[-1].command


def test_a_masked_unit_is_left_alone():
    with pytest.raises(HostFailed, match="mtail.service is masked"):
        plan(GW, facts(enabled="masked"))


def _usage(host: str, tenant: str, status: str, error: str) -> str:
    return (
        f'vfleet_gateway_requests_total{{job="gateway_usage", instance="{host}:3903", host="{host}", '
        f'prog="vfleet_gateway.mtail", tenant="{tenant}", model="m", status="{status}", error="{error}"}}'
    )


def test_recording_rules_give_each_tenants_request_and_429_rates(tmp_path):
    """Two gateways: `noisy` sends 60+120 requests a minute, 120 of them refused with 429;
    `quiet` sends 30 a minute, none refused (its 429 rate has no series)."""
    (tmp_path / "r.yml").write_text(rules_yaml(V1, TH))
    series = [
        {"series": _usage("gw1", "noisy", "200", ""), "values": "0+30x10"},
        {"series": _usage("gw2", "noisy", "200", ""), "values": "0+30x10"},
        {"series": _usage("gw1", "noisy", "429", "rate_limited"), "values": "0+120x10"},
        {"series": _usage("gw1", "quiet", "200", ""), "values": "0+30x10"},
    ]
    test = {
        "rule_files": ["r.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": "tenant:vfleet_gateway_requests:rate5m",
                        "eval_time": "10m",
                        "exp_samples": [
                            {"labels": 'tenant:vfleet_gateway_requests:rate5m{tenant="noisy"}', "value": 3},
                            {"labels": 'tenant:vfleet_gateway_requests:rate5m{tenant="quiet"}', "value": 0.5},
                        ],
                    },
                    {
                        "expr": "tenant:vfleet_gateway_requests_429:rate5m",
                        "eval_time": "10m",
                        "exp_samples": [
                            {"labels": 'tenant:vfleet_gateway_requests_429:rate5m{tenant="noisy"}', "value": 2}
                        ],
                    },
                ],
            }
        ],
    }
    (tmp_path / "t.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = promtool("test", "rules", "t.yml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
