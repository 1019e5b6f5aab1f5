"""The same lab hosts as each peer tool reads them: vfleet's YAML (a subset of the lab's),
Ansible's INI, pyinfra's inventory.py, plus the Ansible playbook of the race's commands.

Why generated from the lab inventory and not written by hand: every tool must see exactly the
same addresses, user, key and known_hosts (host keys checked by all three), so a difference in
wall time is the tool's, not its configuration's."""

from __future__ import annotations

from pathlib import Path

import yaml


def lab_hosts(inventory: Path) -> tuple[dict, list[tuple[str, str]]]:
    """(all.vars, [(name, address)]) of the lab inventory, hosts in lab order (lab1, lab2, ...)."""
    data = yaml.safe_load(inventory.read_text())["all"]
    hosts: list[tuple[str, str]] = []
    for group in (data.get("children") or {}).values():
        for name, hv in ((group or {}).get("hosts") or {}).items():
            hosts.append((name, hv["ansible_host"]))
    hosts.sort(key=lambda h: int("".join(c for c in h[0] if c.isdigit()) or 0))
    return data["vars"], hosts


def write_vfleet(dest: Path, lab_vars: dict, hosts: list[tuple[str, str]]) -> Path:
    """All hosts in group vllm (preflight audits that group)."""
    doc = {"all": {"vars": lab_vars, "children": {"vllm": {"hosts": {n: {"ansible_host": ip} for n, ip in hosts}}}}}
    path = dest / "vfleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def write_ansible(dest: Path, lab_vars: dict, hosts: list[tuple[str, str]]) -> Path:
    lines = ["[lab]"] + [f"{n} ansible_host={ip}" for n, ip in hosts] + ["", "[lab:vars]"]
    lines += [
        f"ansible_user={lab_vars['ansible_user']}",
        f"ansible_ssh_private_key_file={lab_vars['ansible_ssh_private_key_file']}",
        f"ansible_ssh_common_args='{lab_vars['ansible_ssh_common_args']}'",
        "ansible_python_interpreter=/usr/bin/python3",
    ]
    path = dest / "ansible.ini"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_pyinfra(dest: Path, lab_vars: dict, hosts: list[tuple[str, str]]) -> Path:
    data = {
        "ssh_user": lab_vars["ansible_user"],
        "ssh_key": lab_vars["ansible_ssh_private_key_file"],
        "ssh_known_hosts_file": lab_vars["known_hosts_file"],
        "ssh_strict_host_key_checking": "yes",
    }
    rows = [f"    ({n!r}, {{**DATA, 'ssh_hostname': {ip!r}}})," for n, ip in hosts]
    path = dest / "pyinfra_inventory.py"
    path.write_text(f"DATA = {data!r}\nlab = [\n" + "\n".join(rows) + "\n]\n")
    return path


def write_playbook(dest: Path, commands: list[str]) -> Path:
    """One `command` task per fact, no fact gathering: how an Ansible user writes it."""
    play = [
        {
            "hosts": "all",
            "gather_facts": False,
            "tasks": [{"name": c, "command": c, "changed_when": False} for c in commands],
        }
    ]
    path = dest / "facts.yml"
    path.write_text(yaml.safe_dump(play, sort_keys=False))
    return path


def write_pyinfra_deploy(dest: Path, script: str) -> Path:
    """pyinfra's server.shell with the same script (the operation, not `exec`)."""
    path = dest / "pyinfra_deploy.py"
    path.write_text(f"from pyinfra.operations import server\n\nserver.shell(name='facts', commands=[{script!r}])\n")
    return path


def write_deploy(dest: Path, lab_vars: dict, hosts: list[tuple[str, str]], template: Path) -> Path:
    """A deploy inventory over these hosts: the template's all.vars (the demo's vLLM, model and
    wheelhouse), the lab's connection vars, the last host as the gateway."""
    tvars = dict(yaml.safe_load(template.read_text())["all"]["vars"])
    tvars.update(lab_vars)
    entry = lambda ip: {"ansible_host": ip}  # noqa: E731
    doc = {
        "all": {
            "vars": tvars,
            "children": {
                "vllm": {"hosts": {n: entry(ip) for n, ip in hosts[:-1]}},
                "gateways": {"hosts": {n: entry(ip) for n, ip in hosts[-1:]}},
            },
        }
    }
    path = dest / "deploy.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
