"""NCCL variables from files vfleet does not write (nccl_conf.py, parsers/nccl_sources.py): the
probe run for real under `sh`, and the check's verdicts on the lab's GPU profiles with the
sources of tests/unit/data/facts/nccl_sources_polluted.yaml."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.unit.preflight_cases import by_id, config, facts
from vfleet.roles.preflight import host_checks
from vfleet.roles.preflight._fact_table import facts_for
from vfleet.roles.preflight._nccl_conf import check_nccl_sources
from vfleet.roles.preflight._parsers import nccl_sources

LAB = Path(__file__).resolve().parents[2] / "vfleet" / "lab" / "profiles"
POLLUTED = yaml.safe_load((Path(__file__).parent / "data" / "facts" / "nccl_sources_polluted.yaml").read_text())
SOURCES = POLLUTED["expected"]
HOME_P2P_OFF = [{"kind": "home", "path": "/home/vllm/.nccl.conf", "vars": {"NCCL_P2P_DISABLE": "1"}}]


def _check(profile: str, sources: Any, **vars: Any):
    cfg = config({"vllm_version": "0.11.0", "dtype": "float16", **vars})
    return cfg, check_nccl_sources(cfg, facts(cfg, LAB / profile, nccl_sources=sources))


def test_polluted_host_fails_naming_each_file_and_variable() -> None:
    _, c = _check("v100-8-pcie", SOURCES, tensor_parallel_size=4)
    assert c.status == "fail"
    for words in (
        "NCCL_SOCKET_IFNAME=ib0 in /etc/systemd/system/vllm.service.d/override.conf",
        "NCCL_ALGO=Tree",
        "NCCL_PROTO=Simple in /opt/nccl/site.conf",
        "NCCL_IB_DISABLE=1 in /etc/default/nccl (an environment file a drop-in adds)",
    ):
        assert words in c.message, words
    # vllm_env sets NCCL_CONF_FILE: NCCL reads that file instead of ~/.nccl.conf (param.cc initEnvFunc)
    assert "NCCL_DEBUG" not in c.message and ".nccl.conf" not in c.message
    assert "remove NCCL_SOCKET_IFNAME from /etc/systemd/system/vllm.service.d/override.conf" in c.fix
    assert "nccl_env if it is meant (NCCL_SOCKET_IFNAME: 'ib0')" in c.fix
    # an environment file added by a drop-in overrides the unit's: declaring it would not help
    assert "remove NCCL_IB_DISABLE from /etc/default/nccl;" in c.fix + ";"


def test_p2p_off_in_home_conf_fails_on_nvlink() -> None:
    _, c = _check("a100-8-sxm", HOME_P2P_OFF, tensor_parallel_size=8)
    assert c.status == "fail" and "NCCL_P2P_DISABLE=1 in /home/vllm/.nccl.conf" in c.message
    _, c = _check("h200-1", HOME_P2P_OFF, tensor_parallel_size=1)
    assert c.status == "warn"  # one GPU: no transport to switch off yet


def test_inventory_declared_value_wins_over_conf_files_but_not_over_a_dropin_envfile() -> None:
    home = [{"kind": "home", "path": "/home/vllm/.nccl.conf", "vars": {"NCCL_DEBUG": "INFO"}}]
    _, c = _check("h200-1", home, nccl_env={"NCCL_DEBUG": "WARN"})
    assert c.status == "pass"
    envfile = [{"kind": "envfile", "path": "/etc/default/nccl", "vars": {"NCCL_DEBUG": "INFO"}}]
    _, c = _check("h200-1", envfile, nccl_env={"NCCL_DEBUG": "WARN"})
    assert c.status == "warn" and "NCCL_DEBUG=INFO in /etc/default/nccl" in c.message
    _, c = _check("h200-1", envfile, nccl_env={"NCCL_DEBUG": "INFO"})
    assert c.status == "pass"


def test_clean_and_unknown_hosts() -> None:
    cfg, c = _check("h200-1", [])
    assert c.status == "pass"
    assert _check("h200-1", None)[1] is None
    harmless = [{"kind": "home", "path": "/h/.nccl.conf", "vars": {"NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": "0"}}]
    assert _check("h200-1", harmless)[1].status == "pass"
    assert by_id(host_checks(cfg, facts(cfg, LAB / "h200-1", nccl_sources=[])), "nccl.sources").status == "pass"


def test_probe_reads_the_service_users_home_and_nccl_conf_file_under_sh(tmp_path: Path) -> None:
    """The probe as preflight sends it, run by `sh` with a stand-in getent naming a home in
    tmp_path (the unit's drop-in folders are absolute: absent here, so none is printed). NCCL
    takes the conf file's `export` line literally, as a variable named "export NCCL_...": it
    sets nothing, and the check says it has no effect; with NCCL_CONF_FILE set, NCCL skips the
    home file."""
    home, bin_ = tmp_path / "home", tmp_path / "bin"
    home.mkdir(), bin_.mkdir()
    (home / ".nccl.conf").write_text("NCCL_P2P_DISABLE=1\n=== home /spoofed\n")
    conf = tmp_path / "site nccl.conf"
    conf.write_text("export NCCL_SOCKET_IFNAME='eth9'\n")
    getent = bin_ / "getent"
    getent.write_text(f"#!/bin/sh\necho 'vllm:x:999:999::{home}:/usr/sbin/nologin'\n")
    getent.chmod(0o755)
    fact = facts_for(config({"vllm_env": {"NCCL_CONF_FILE": str(conf)}}))["nccl_sources"]
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}
    run = subprocess.run(["sh", "-c", fact.command()], capture_output=True, text=True, env=env, timeout=30)
    assert run.returncode == 0, run.stderr
    assert fact.parse(run.stdout) == [
        {"kind": "home", "path": f"{home}/.nccl.conf", "vars": {"NCCL_P2P_DISABLE": "1"}, "ignored": []},
        {"kind": "conffile", "path": str(conf), "vars": {}, "ignored": ["export NCCL_SOCKET_IFNAME='eth9'"]},
    ]
    _, c = _check("a100-8-sxm", fact.parse(run.stdout), tensor_parallel_size=8, vllm_env={"NCCL_CONF_FILE": str(conf)})
    assert c.status == "warn" and "'export NCCL_SOCKET_IFNAME='eth9'' in " in c.message and "has no effect" in c.message
    assert "NCCL_P2P_DISABLE" not in c.message  # the home file NCCL does not read here


def test_probe_follows_dropins_under_sh_but_not_commented_lines(tmp_path: Path) -> None:
    """The drop-in half of the probe, run by `sh` on drop-in folders in tmp_path: a drop-in, the
    environment file it adds, the NCCL_CONF_FILE its Environment= line names; a commented
    `#Environment=NCCL_CONF_FILE=...` is not followed."""
    etc, run_dir = tmp_path / "etc", tmp_path / "run"
    (etc / "vllm.service.d").mkdir(parents=True)
    (run_dir / "vllm.service.d").mkdir(parents=True)
    named, stale, envfile = tmp_path / "named.conf", tmp_path / "stale.conf", tmp_path / "nccl.env"
    named.write_text("NCCL_ALGO=Ring\n NCCL_PROTO=LL\n")
    stale.write_text("NCCL_DEBUG=INFO\n")
    envfile.write_text("NCCL_IB_DISABLE=1\n")
    (etc / "vllm.service.d" / "override.conf").write_text(
        f"[Service]\n#Environment=NCCL_CONF_FILE={stale}\nEnvironment=A=1 NCCL_CONF_FILE={named}\n"
    )
    (run_dir / "vllm.service.d" / "env.conf").write_text(f"[Service]\nEnvironmentFile=-{envfile}\n")
    cmd = nccl_sources.probe_command(
        "nobody-vfleet-test", "vllm.service", "/etc/vllm/vllm.env", dropin_dirs=(str(etc), str(run_dir))
    )
    run = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert nccl_sources.parse(run.stdout) == [
        {"kind": "dropin", "path": f"{etc}/vllm.service.d/override.conf", "vars": {"NCCL_CONF_FILE": str(named)}},
        {"kind": "dropin", "path": f"{run_dir}/vllm.service.d/env.conf", "vars": {}},
        {"kind": "envfile", "path": str(envfile), "vars": {"NCCL_IB_DISABLE": "1"}},
        {"kind": "conffile", "path": str(named), "vars": {"NCCL_ALGO": "Ring"}, "ignored": [" NCCL_PROTO=LL"]},
    ]


def test_nccl_conf_lines_follow_nccls_literal_rule() -> None:
    found, ignored = nccl_sources.nccl_conf_lines(
        ["# NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME='eth9'", "NCCL_ALGO=Ring=x", "NCCL_NET =IB", "NCCL_PROTO", "A=1"]
    )
    assert found == {"NCCL_SOCKET_IFNAME": "'eth9'", "NCCL_ALGO": "Ring=x"}  # quotes kept, first '=' splits
    assert ignored == ["NCCL_NET =IB"]
