"""Post-deploy verification with testinfra: plain pytest over the same inventory, run by
`vfleet verify`. Connects with the inventory's keys and known_hosts (host key checking on)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from fleet.inventory import Host

SUITE = Path(__file__).resolve().parent / "test_deployed.py"


def ssh_config(hosts: list[Host], no_host_key_checking: bool = False) -> str:
    lines = []
    for h in hosts:
        lines += [f"Host {h.name}", f"  HostName {h.address}", f"  Port {h.port}", "  BatchMode yes"]
        if h.user:
            lines.append(f"  User {h.user}")
        if h.key_file:
            lines += [f"  IdentityFile {os.path.expanduser(h.key_file)}", "  IdentitiesOnly yes"]
        if no_host_key_checking or not h.vars.get("host_key_checking", True):
            lines += ["  StrictHostKeyChecking no", "  UserKnownHostsFile /dev/null"]
        else:
            lines.append("  StrictHostKeyChecking yes")
            if h.vars.get("known_hosts_file"):
                lines.append(f"  UserKnownHostsFile {os.path.expanduser(h.vars['known_hosts_file'])}")
    return "\n".join(lines) + "\n"


def run_verify(hosts: list[Host], *, junitxml: str | None = None, no_host_key_checking: bool = False,
               extra_args: list[str] | None = None) -> int:
    """Run the testinfra suite against hosts; returns pytest's exit code."""
    with tempfile.TemporaryDirectory(prefix="vfleet-verify-") as tmp:
        cfg = Path(tmp) / "ssh_config"
        cfg.write_text(ssh_config(hosts, no_host_key_checking))
        facts = Path(tmp) / "hosts.json"
        facts.write_text(json.dumps({h.name: {"groups": h.groups, "vars": {k: v for k, v in h.vars.items()
                                                                         if k not in ("api_key", "hf_token")}}
                                     for h in hosts}, default=str))
        args = [sys.executable, "-m", "pytest", str(SUITE), "-p", "no:cacheprovider", "-q", "-rA",
                f"--hosts={','.join('ssh://' + h.name for h in hosts)}", f"--ssh-config={cfg}",
                "--rootdir", tmp, "-o", "addopts=", "-o", "testpaths="]
        if junitxml:
            args.append(f"--junitxml={junitxml}")
        args += extra_args or []
        env = dict(os.environ, VFLEET_VERIFY_HOSTS=str(facts))
        return subprocess.call(args, env=env, cwd=tmp)
