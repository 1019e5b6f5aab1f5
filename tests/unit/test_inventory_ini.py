"""Ansible's INI inventory format, by ansible-core's rules (plugins/inventory/ini.py).

The first test loads ansible-core's own documented example and checks what ansible-core
makes of it (its code, which literal_evals :vars values too, whatever the prose says).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import InventoryError
from vfleet.engine.inventory import load_inventory
from vfleet.engine.inventory.ini import ini_value

DATA = Path(__file__).parent / "data" / "inventories"


@pytest.fixture(autouse=True)
def in_data_dir(monkeypatch):
    monkeypatch.chdir(DATA)


def test_ansible_core_example():
    inv = load_inventory("ini/ansible_example.ini", schema=SCHEMA)
    assert list(inv.hosts) == ["host1", "host2", "tomcat1", "tomcat2", "tomcat3", "jenkins1"]
    h = {name: host.vars for name, host in inv.hosts.items()}
    assert inv.hosts["host2"].port == 222
    assert h["host1"]["http_port"] == 8080 and h["tomcat1"]["http_port"] == 8080
    assert h["host1"]["myvar"] == 23 and h["tomcat2"]["myvar"] == 34
    assert h["tomcat3"]["mysecret"] == "03#pa33w0rd"
    assert h["jenkins1"]["has_java"] is True and h["host1"]["has_java"] is False
    assert inv.groups["web"].children == ["apache", "nginx"]
    assert inv.hosts["tomcat1"].groups == ["all", "web", "apache"]


def test_vfleet_fleet_in_ini_without_suffix():
    inv = load_inventory("ini/hosts", schema=SCHEMA)
    assert list(inv.hosts) == ["lonely", "gpu01", "gpu02", "gpu03", "gpu04", "gw01"]
    g4 = inv.hosts["gpu04"]
    assert g4.port == 2222 and g4.vars["become"] is True  # 'yes': Ansible's boolean
    assert g4.vars["label"] == "rack 4"  # shlex quoting
    assert g4.vars["vllm_extra_args"] == ["--enforce-eager"]  # a Python literal
    assert g4.vars["vllm_version"] == "0.10"  # quoted: stays a string
    assert g4.vars["tensor_parallel_size"] == 4  # group_vars/h100.yml
    assert inv.hosts["gpu01"].user == "ops"
    assert inv.hosts["lonely"].groups == ["all", "ungrouped"]
    assert inv.groups["ungrouped"].hosts == ["lonely"]  # gpu01 is in h100
    assert inv.hosts["gw01"].vars["gateway_port"] == 8080
    assert inv.hosts["gpu02"].sources["model_name"] == "ini/hosts: line 13: group 'vllm'"
    listed = inv.to_list_json()  # sections nobody adopts hang under 'all'
    assert listed["all"] == {"children": ["ungrouped", "vllm", "gateways"]}
    assert listed["vllm"] == {"children": ["h100"]}


def test_host_lines_without_sections():
    inv = load_inventory("ini/plain_hosts", schema=SCHEMA)
    assert [(h.name, h.port) for h in inv.hosts.values()] == [("gpu01", 22), ("gpu02", 2200)]
    assert inv.hosts["gpu01"].groups == ["all", "ungrouped"]


def test_every_mistake_is_one_line_with_its_line_number():
    with pytest.raises(InventoryError) as exc:
        load_inventory("ini/bad.ini", schema=SCHEMA)
    assert exc.value.errors == [
        "ini/bad.ini: line 2: host 'host1': word 2 has no '=': expected key=value after the "
        "host name (quote values that hold spaces)",
        "ini/bad.ini: line 3: cannot split the host line: No closing quotation (check the quotes)",
        "ini/bad.ini: line 4: section [web:hostz] has unknown type 'hostz'; use [group], "
        "[group:children] or [group:vars]",
        "ini/bad.ini: line 6: invalid section header '[web server]': write [group], "
        "[group:children] or [group:vars], with no spaces",
        "ini/bad.ini: line 8: [web:children] names group 'nosuch', which is declared nowhere; add a [nosuch] section",
        "ini/bad.ini: line 9: section [db:vars] is for group 'db', which is declared nowhere; add a [db] section",
        "ini/bad.ini: line 12: host 'gw01': vars.vllm_version: expected a string like "
        "'0.5.4' or '0.32.0', got 0.1 (a number: put it in quotes)",
    ]


def test_a_yaml_suffix_is_never_read_as_ini(tmp_path):
    (tmp_path / "hosts.yml").write_text("[vllm]\ngpu01\n")
    with pytest.raises(InventoryError, match="hosts.yml: line 2: YAML syntax error"):
        load_inventory(tmp_path / "hosts.yml", schema=SCHEMA)


def test_children_may_come_before_their_section(tmp_path):
    (tmp_path / "inv.ini").write_text(
        "[top:children]\nmid\n[mid:children]\nleaf\n[leaf]\nh1\n[mid:vars]\nmax_num_seqs=4\n"
    )
    inv = load_inventory(tmp_path / "inv.ini", schema=SCHEMA)
    assert inv.hosts["h1"].groups == ["all", "top", "mid", "leaf"]
    assert inv.hosts["h1"].vars["max_num_seqs"] == 4


@pytest.mark.parametrize(
    "text, value",
    [
        ("22", 22),
        ("0x10", 16),
        ("1.5", 1.5),
        ("True", True),
        ("None", None),
        ("yes", "yes"),
        ("'22'", "22"),
        ("[1, 2]", [1, 2]),
        ("(1, 2)", [1, 2]),
        ("{'a': 1}", {"a": 1}),
        ("1j", "1j"),
        ("...", "..."),
        ("a b", "a b"),
        ("8080 # comment", 8080),
        ("b'x'", "x"),
        ("{1, 2}", [1, 2]),
    ],
)
def test_values_are_python_literals_or_text(text, value):
    assert ini_value(text) == value


def test_a_long_chain_of_children_loads(tmp_path):
    lines = [f"[g{i}:children]\ng{i + 1}" for i in range(300)]
    (tmp_path / "chain.ini").write_text("\n".join(lines) + "\n[g300]\nh1\n")
    inv = load_inventory(tmp_path / "chain.ini", schema=SCHEMA)
    assert inv.hosts["h1"].groups[:3] == ["all", "g0", "g1"] and len(inv.hosts["h1"].groups) == 302
    assert [h.name for h in inv.select("g150")] == ["h1"]
