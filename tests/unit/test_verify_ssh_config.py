"""The ssh_config `vfleet verify` writes for testinfra, read back by the real `ssh -G`: every
inventory value is one ssh_config word, and one that is not (a newline + ProxyCommand, a
space, a quote) is refused before anything is written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import Host
from vfleet.roles.verify import ssh_config


def host(name: str = "gpu01", address: str = "10.0.0.7", **vars) -> Host:
    return Host(
        name=name,
        vars={"host_key_checking": True, **vars},
        groups=["all", "vllm"],
        address=address,
        user="ops",
        port=2222,
        key_file="/keys/id_ed25519",
        connection="ssh",
    )


def ssh_g(config: str, tmp_path: Path, name: str) -> dict[str, str]:
    path = tmp_path / "ssh_config"
    path.write_text(config)
    out = subprocess.run(["ssh", "-G", "-F", str(path), name], capture_output=True, text=True, check=True).stdout
    return {k: v for k, _, v in (line.partition(" ") for line in out.splitlines())}


def test_ssh_reads_back_exactly_the_inventory_values(tmp_path):
    cfg = ssh_config([host(known_hosts_file="/etc/vfleet/known_hosts")])
    got = ssh_g(cfg, tmp_path, "gpu01")
    assert got["hostname"] == "10.0.0.7" and got["port"] == "2222" and got["user"] == "ops"
    assert got["identityfile"] == "/keys/id_ed25519" and got["stricthostkeychecking"] == "true"
    assert got["userknownhostsfile"] == "/etc/vfleet/known_hosts"
    assert "proxycommand" not in got


def test_ipv6_address_is_one_word(tmp_path):
    assert ssh_g(ssh_config([host(address="fd00::7")]), tmp_path, "gpu01")["hostname"] == "fd00::7"


@pytest.mark.parametrize(
    "field, value",
    [
        ("address", "10.0.0.7\n  ProxyCommand touch /tmp/pwned"),
        ("address", "10.0.0.7 ProxyCommand=x"),
        ("name", "gpu01\nHost *"),
        ("address", '"10.0.0.7"'),
    ],
)
def test_values_that_are_not_one_word_are_refused(field, value, tmp_path):
    h = host(**{field: value})
    with pytest.raises(VfleetError, match="cannot be written to an ssh_config"):
        ssh_config([h])


def test_a_known_hosts_path_with_a_space_is_refused():
    with pytest.raises(VfleetError, match="known_hosts_file"):
        ssh_config([host(known_hosts_file="/etc/my hosts")])
