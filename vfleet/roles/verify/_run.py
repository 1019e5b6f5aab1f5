"""Runs the testinfra suite (test_deployed.py) over the inventory's hosts, with an ssh_config of
their keys and known_hosts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from vfleet.config.fleet import Fleet
from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import Host

SUITE = Path(__file__).resolve().parent / "test_deployed.py"
# ssh_config has no escape for control characters, and a quote or space in a value would
# end it: a newline plus "ProxyCommand ..." would run a command on the controller.
_SSH_SAFE = re.compile(r"[A-Za-z0-9_.:@%+/~=-]+")


def _ssh_value(what: str, host: str, value: object) -> str:
    text = str(value)
    if not _SSH_SAFE.fullmatch(text):
        raise VfleetError(
            f"host '{host}': {what} {text!r} cannot be written to an ssh_config "
            "(only letters, digits and ._:@%+/~=- are allowed)"
        )
    return text


def ssh_config(hosts: list[Host], no_host_key_checking: bool = False) -> str:
    """An ssh_config for testinfra; every value checked to be one plain ssh_config word."""
    lines = []
    for h in hosts:
        v = h.vars
        lines += [
            f"Host {_ssh_value('name', h.name, h.name)}",
            f"  HostName {_ssh_value('address', h.name, h.address)}",
            f"  Port {int(h.port)}",
            "  BatchMode yes",
        ]
        if h.user:
            lines.append(f"  User {_ssh_value('user', h.name, h.user)}")
        if h.key_file:
            lines += [
                f"  IdentityFile {_ssh_value('key file', h.name, os.path.expanduser(h.key_file))}",
                "  IdentitiesOnly yes",
            ]
        if no_host_key_checking or not v.get("host_key_checking", True):
            lines += ["  StrictHostKeyChecking no", "  UserKnownHostsFile /dev/null"]
        else:
            lines.append("  StrictHostKeyChecking yes")
            if v.get("known_hosts_file"):
                known = os.path.expanduser(v["known_hosts_file"])
                lines.append(f"  UserKnownHostsFile {_ssh_value('known_hosts_file', h.name, known)}")
    return "\n".join(lines) + "\n"


def expected_state(cfg: HostConfig) -> dict:
    """What the suite checks on a host, from its HostConfig (no secret in it)."""
    return {
        "serves": cfg.serves,
        "is_gateway": cfg.is_gateway,
        "unit": cfg.unit,
        "vllm_port": cfg.vllm_port,
        "gateway_port": cfg.gateway_port,
        "current_link": cfg.current_link,
        "vllm_version": cfg.vllm_version,
        "model_path": cfg.model_path,
        "env_file": cfg.env_file,
    }


def run_verify(
    fleet: Fleet,
    hosts: list[Host],
    *,
    junitxml: str | None = None,
    no_host_key_checking: bool = False,
    extra_args: list[str] | None = None,
) -> int:
    """Run the testinfra suite against hosts (the fleet's configs say what each should hold);
    returns pytest's exit code."""
    with tempfile.TemporaryDirectory(prefix="vfleet-verify-") as tmp:
        cfg = Path(tmp) / "ssh_config"
        cfg.write_text(ssh_config(hosts, no_host_key_checking))
        facts = Path(tmp) / "hosts.json"
        facts.write_text(json.dumps({h.name: expected_state(fleet.config(h)) for h in hosts}))
        args = [
            sys.executable,
            "-m",
            "pytest",
            str(SUITE),
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            f"--hosts={','.join('ssh://' + h.name for h in hosts)}",
            f"--ssh-config={cfg}",
            "--rootdir",
            tmp,
            "-o",
            "addopts=",
            "-o",
            "testpaths=",
        ]
        if junitxml:
            args.append(f"--junitxml={junitxml}")
        args += extra_args or []
        env = dict(os.environ, VFLEET_VERIFY_HOSTS=str(facts))
        return subprocess.call(args, env=env, cwd=tmp)
