"""Inventory loading: Ansible's format and precedence, --set, host ranges, secrets, connection
settings, and the inventories shipped in inventories/ (mistakes: test_inventory_errors).

Inventories are real files under tests/unit/data/inventories/; the tests run from that
folder so messages carry the short paths an operator would see.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.inventory_cases import DATA, errors_of
from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import Inventory, load_inventory, masked_vars, parse_set_args

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def in_data_dir(monkeypatch):
    monkeypatch.chdir(DATA)


# ------------------------------------------------------------------------------- --set
def test_parse_set_args_yaml_types_and_raw_text():
    out = parse_set_args(
        [
            "max_num_seqs=64",
            "vllm_version=0.10",
            "dtype=half",
            "host_key_checking=false",
            "max_model_len=",
            "model_name=a=b",
        ]
    )
    assert out == {
        "max_num_seqs": 64,
        "vllm_version": 0.1,
        "dtype": "half",
        "host_key_checking": False,
        "max_model_len": None,
        "model_name": "a=b",
    }
    assert out.raw["vllm_version"] == "0.10"


@pytest.mark.parametrize(
    "item, message",
    [
        ("max_num_seqs", "--set item 1 has no '=': expected NAME=VALUE (e.g. --set max_num_seqs=64)"),
        ("=5", "--set '': not a variable name (letters, digits and '_', e.g. api_key); the value is not shown"),
        (
            "bad key=1",
            "--set 'bad key': not a variable name (letters, digits and '_', e.g. api_key); the value is not shown",
        ),
        ("x=[1, 2", "--set x: the value is not valid YAML; quote it"),
    ],
)
def test_parse_set_args_errors(item, message):
    with pytest.raises(VfleetError) as exc:
        parse_set_args([item])
    assert str(exc.value) == message


def test_set_keeps_version_strings_and_types_numbers():
    inv = load_inventory("good/ranges.yaml", parse_set_args(["vllm_version=0.10", "max_num_seqs=64"]), schema=SCHEMA)
    h = inv.hosts["gpu01"]
    assert h.vars["vllm_version"] == "0.10"
    assert h.vars["max_num_seqs"] == 64
    assert h.sources["max_num_seqs"] == "--set"


def test_set_values_are_validated():
    errs = errors_of("good/ranges.yaml", parse_set_args(["max_num_seqs=0", "max_num_seq=3"]))
    assert errs == [
        "--set: unknown variable 'max_num_seq'; did you mean 'max_num_seqs'?",
        "--set: vars.max_num_seqs: expected an integer from 1 to 1048576 or null, got 0",
    ]


# -------------------------------------------------------------------------- precedence
@pytest.fixture
def prec() -> Inventory:
    return load_inventory("good/precedence/hosts.yaml", schema=SCHEMA)


def test_child_beats_parent_beats_all_and_host_beats_groups(prec):
    assert prec.hosts["gpu01"].vars["vllm_port"] == 1004  # host
    assert prec.hosts["gpu02"].vars["vllm_port"] == 1003  # child group h100
    assert prec.hosts["lonely"].vars["vllm_port"] == 1001  # all
    assert prec.hosts["gpu01"].vars["max_num_seqs"] == 2  # parent vllm over all


def test_equal_depth_is_alphabetical_later_wins(prec):
    g2 = prec.hosts["gpu02"].vars
    assert g2["max_num_seqs"] == 9  # alpha < vllm < zeta: zeta wins
    assert g2["vllm_host"] == "10.0.0.2"  # vllm beats alpha
    assert g2["model_name"] == "from-alpha"  # alpha (depth 1) beats all


def test_group_vars_files_apply_at_their_groups_level(prec):
    g1 = prec.hosts["gpu01"].vars
    assert g1["gpu_memory_utilization"] == 0.6  # group_vars/all.yml beats inline all
    assert g1["dtype"] == "half"  # ... but not the deeper group 'vllm'
    assert g1["tensor_parallel_size"] == 4  # group_vars/h100.yml beats inline h100
    assert g1["max_model_len"] == 2000  # group_vars/vllm/ files merged in name order
    assert g1["model_dir"] == "/from/01"
    assert (
        prec.hosts["gpu01"]
        .sources["tensor_parallel_size"]
        .startswith("good/precedence/group_vars/h100.yml: line 1: group 'h100'")
    )


def test_host_vars_file_beats_inline_host_vars(prec):
    g3 = prec.hosts["gpu03"]
    assert g3.vars["shutdown_timeout"] == 6
    assert (g3.address, g3.user, g3.port) == ("192.0.2.3", "admin", 22)


def test_set_beats_everything():
    inv = load_inventory("good/precedence/hosts.yaml", parse_set_args(["vllm_port=2000"]), schema=SCHEMA)
    assert {h.vars["vllm_port"] for h in inv.hosts.values()} == {2000}


def test_dicts_are_replaced_not_merged(prec):
    assert prec.hosts["gpu01"].vars["vllm_env"] == {"A": "parent"}
    assert prec.hosts["lonely"].vars["vllm_env"] == {"A": "all", "B": "all"}


def test_defaults_fill_the_rest(prec):
    v = prec.hosts["gpu01"].vars
    assert v["command_timeout"] == 600 and v["vllm_package"] == "vllm"
    assert prec.hosts["gpu01"].sources["command_timeout"] == "default"


def test_groups_ungrouped_and_local(prec):
    assert list(prec.hosts) == ["gpu01", "gpu02", "gpu03", "lonely", "localhost"]
    assert prec.hosts["gpu02"].groups == ["all", "alpha", "vllm", "zeta", "h100"]
    assert prec.hosts["lonely"].groups == ["all", "ungrouped"]
    assert prec.groups["ungrouped"].hosts == ["lonely", "localhost"]
    assert prec.hosts["localhost"].connection == "local"
    assert prec.hosts["gpu01"].connection == "ssh"
    assert prec.groups["vllm"].children == ["h100"]
    assert prec.groups["h100"].vars["tensor_parallel_size"] == 4


def test_graph(prec):
    assert prec.graph() == (
        "@all:\n"
        "  |--@alpha:\n"
        "  |  |--gpu02\n"
        "  |--@ungrouped:\n"
        "  |  |--localhost\n"
        "  |  |--lonely\n"
        "  |--@vllm:\n"
        "  |  |--@h100:\n"
        "  |  |  |--gpu01\n"
        "  |  |  |--gpu02\n"
        "  |  |  |--gpu03\n"
        "  |--@zeta:\n"
        "  |  |--gpu02\n"
    )


def test_to_list_json(prec):
    out = prec.to_list_json()
    json.dumps(out)
    assert out["all"] == {"children": ["ungrouped", "vllm", "alpha", "zeta"]}
    assert out["vllm"] == {"children": ["h100"]}
    assert out["h100"] == {"hosts": ["gpu01", "gpu02", "gpu03"]}
    hv = out["_meta"]["hostvars"]["gpu01"]
    assert hv["vllm_port"] == 1004 and "command_timeout" not in hv  # defaults left out


def test_select(prec):
    assert [h.name for h in prec.select(None)] == list(prec.hosts)
    assert [h.name for h in prec.select("vllm:!gpu02")] == ["gpu01", "gpu03"]
    assert [h.name for h in prec.select("vllm:&zeta")] == ["gpu02"]
    assert [h.name for h in prec.select("gpu0*")] == ["gpu01", "gpu02", "gpu03"]
    with pytest.raises(
        VfleetError,
        match=r"--limit 'vlm' matches no host or group in "
        r"good/precedence/hosts.yaml; known groups: all, alpha, "
        r"h100, ungrouped, vllm, zeta; did you mean 'vllm'\?",
    ):
        prec.select("vlm")


# ------------------------------------------------------------------------------- ranges
def test_ranges_in_host_names():
    inv = load_inventory("good/ranges.yaml", schema=SCHEMA)
    assert list(inv.hosts) == [
        "gpu01",
        "gpu02",
        "gpu03",
        "node-a",
        "node-b",
        "node-c",
        "h1",
        "h5",
        "h9",
        "edge08.lab",
        "edge09.lab",
        "edge10.lab",
        "olda",
        "oldb",
    ]
    assert inv.hosts["gpu03"].vars["vllm_port"] == 9000
    assert inv.hosts["gpu03"].groups == ["all", "gpu", "spare"]
    assert inv.hosts["edge09.lab"].port == 2222  # Ansible's 'name:port' host key
    assert inv.hosts["gpu01"].port == 22


# ------------------------------------------------------------------------------ secrets
def test_secrets_from_file_env_and_inline(monkeypatch):
    monkeypatch.setenv("VFLEET_TEST_HF_TOKEN", "hf_from_env")
    inv = load_inventory("good/secrets/hosts.yaml", schema=SCHEMA)
    assert inv.hosts["s1"].vars["api_key"] == "sk-from-file"  # stripped, relative path
    assert inv.hosts["s2"].vars["hf_token"] == "hf_from_env"
    assert inv.hosts["s3"].vars["api_key"] == "inline-key"
    shown = masked_vars(inv.hosts["s2"].vars, schema=SCHEMA)
    assert shown["api_key"] == "***" and shown["hf_token"] == "***"
    assert shown["api_key_file"] == "key.txt"
    dumped = json.dumps(inv.to_list_json())
    assert "sk-from-file" not in dumped and "hf_from_env" not in dumped


def test_masked_vars_hides_password_like_user_vars():
    assert masked_vars({"db_password": "x", "vllm_port": 1, "api_key": None}, schema=SCHEMA) == {
        "db_password": "***",
        "vllm_port": 1,
        "api_key": None,
    }


# ----------------------------------------------------------------- shipped inventories
@pytest.mark.parametrize(
    "name, hosts",
    [
        ("v100.yaml", ["v100-01"]),
        ("h100.yaml", ["h100-01", "h100-02", "gw-01"]),
        ("example-ansible/hosts.yml", ["gpu01", "gpu02", "gpu03"]),
    ],
)
def test_shipped_inventories_load(name, hosts):
    inv = load_inventory(REPO / "inventories" / name, schema=SCHEMA)
    assert list(inv.hosts) == hosts


def test_example_ansible_inventory():
    inv = load_inventory(REPO / "inventories" / "example-ansible" / "hosts.yml", schema=SCHEMA)
    g2, g3 = inv.hosts["gpu02"], inv.hosts["gpu03"]
    assert g2.address == "192.0.2.11" and g2.user == "ops"  # host_vars file
    assert g3.port == 2222 and g3.vars["dtype"] == "float16"  # group_vars/l4.yml
    assert g3.vars["max_num_seqs"] == 64  # group_vars/vllm/ folder
    assert g3.vars["ansible_become"] is True  # Ansible's own vars pass
    assert inv.hosts["gpu01"].vars["connect_timeout"] == 20  # group_vars/all.yml


# ---------------------------------------------------------------------------- connection
def test_connection_settings_and_aliases():
    inv = load_inventory("good/connection.yaml", schema=SCHEMA)
    h = inv.hosts
    assert (h["box1"].port, h["box2"].port) == (2201, 2200)
    assert h["box1"].user == "ops" and h["box1"].connection == "ssh"
    assert h["box3"].connection == "local"
    assert h["box4"].connection == "ssh"  # paramiko means ssh
    assert h["box4"].address == "10.0.0.4"
    assert h["box4"].key_file == str(Path("~/.ssh/id_ed25519").expanduser())
    assert h["box2"].address == "box2" and h["box2"].key_file is None
    assert h["localhost"].connection == "local"
    assert h["localhost2"].connection == "ssh"  # explicit setting wins


def test_host_repr_hides_vars():
    inv = load_inventory("good/connection.yaml", schema=SCHEMA)
    assert "vars" not in repr(inv.hosts["box1"])


def test_yaml_anchors_and_merge_keys():
    inv = load_inventory("good/anchors.yaml", schema=SCHEMA)
    assert inv.hosts["gpu01"].vars["max_num_seqs"] == 32
    assert inv.hosts["gpu02"].vars["max_num_seqs"] == 8
    assert inv.hosts["gpu02"].vars["dtype"] == "float16"
