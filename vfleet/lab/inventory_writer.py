"""The Ansible-format inventory `lab.up` writes for the hosts it started.

WHY Ansible's format: the rest of vfleet (and Ansible itself, for comparisons) reads the
lab exactly as it reads a real fleet; only the addresses and the key differ."""

from __future__ import annotations

from pathlib import Path

import yaml

from vfleet.lab.state import HostRecord, LabState


def build(state: LabState, hosts: list[HostRecord], gateways: int) -> dict:
    """all.vars (user, key, known_hosts) + groups vllm (first N-G) and gateways (last G)."""
    split = len(hosts) - gateways
    entry = lambda r: {"ansible_host": r.ip, "gpu_profile": r.profile}  # noqa: E731
    ssh_args = f"-o UserKnownHostsFile={state.known_hosts} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"
    return {
        "all": {
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(state.key),
                "known_hosts_file": str(state.known_hosts),
                "ansible_ssh_common_args": ssh_args,
            },
            "children": {
                "vllm": {"hosts": {r.name: entry(r) for r in hosts[:split]}},
                "gateways": {"hosts": {r.name: entry(r) for r in hosts[split:]}},
            },
        }
    }


def write(state: LabState, hosts: list[HostRecord], gateways: int, path: Path | None = None) -> Path:
    """Write the inventory (atomically) and return its path."""
    path = Path(path or state.inventory)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "# Written by `invoke lab.up` (vfleet/lab/inventory_writer.py); rewritten at each up.\n"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(header + yaml.safe_dump(build(state, hosts, gateways), sort_keys=False))
    tmp.replace(path)
    return path
