"""Inventory mistakes: each is one clear line naming the file, the line and the fix (a value
set once in a group is reported once, several problems together in file order, a secret's value
never shown); an InventoryError is a VfleetError. The INI file once refused here now loads.

Inventories are real files under tests/unit/data/inventories/; the tests run from that
folder so messages carry the short paths an operator would see.
"""

from __future__ import annotations

import pytest

from tests.unit.inventory_cases import DATA, errors_of
from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import load_inventory


@pytest.fixture(autouse=True)
def in_data_dir(monkeypatch):
    monkeypatch.chdir(DATA)


# ----------------------------------------------------------------------- one mistake each
@pytest.mark.parametrize(
    "path, message",
    [
        (
            "bad/yaml_syntax.yaml",
            "bad/yaml_syntax.yaml: line 5: YAML syntax error: expected <block end>, but found '<block mapping start>'",
        ),
        (
            "bad/top_list.yaml",
            "bad/top_list.yaml: expected a mapping of groups at the top level (an Ansible YAML "
            "inventory starting with 'all:'), got a list",
        ),
        ("bad/nope.yaml", "bad/nope.yaml: no such file"),
        ("bad", "bad: is a directory; give the inventory file (e.g. bad/hosts.yml)"),
        (
            "bad/empty.yaml",
            "bad/empty.yaml: the file is empty; expected an Ansible YAML inventory starting with 'all:'",
        ),
        (
            "bad/group_list.yaml",
            "bad/group_list.yaml: line 3: all.children.vllm: expected a mapping with keys "
            "hosts/children/vars, got a list",
        ),
        (
            "bad/unknown_group_key.yaml",
            "bad/unknown_group_key.yaml: line 4: all.children.vllm: unknown key 'host' (a group takes "
            "hosts, children, vars); did you mean 'hosts'?",
        ),
        (
            "bad/hosts_list.yaml",
            "bad/hosts_list.yaml: line 2: all.hosts: expected a mapping of host names to their "
            "variables, got a list (write 'gpu01:' not '- gpu01')",
        ),
        (
            "bad/host_scalar.yaml",
            "bad/host_scalar.yaml: line 3: all.hosts.gpu01: expected a mapping of variables (or nothing), got a number",
        ),
        (
            "bad/top_hosts.yaml",
            "bad/top_hosts.yaml: line 1: top level: 'hosts' would be a group named 'hosts'; put it under 'all:'",
        ),
        (
            "bad/duplicate_group.yaml",
            "bad/duplicate_group.yaml: line 6: duplicate key 'vllm' (the earlier one would be silently lost)",
        ),
        (
            "bad/bad_range.yaml",
            "bad/bad_range.yaml: line 3: all.hosts: host range 'gpu[01-04]': expected [start:end] or [start:end:step]",
        ),
        (
            "bad/range_reversed.yaml",
            "bad/range_reversed.yaml: line 3: all.hosts: host range 'gpu[10:01]': start after end",
        ),
        (
            "bad/wrong_type.yaml",
            "bad/wrong_type.yaml: line 4: host 'gpu01': vars.tensor_parallel_size: expected an "
            "integer from 1 to 1024, got 'two'",
        ),
        (
            "bad/bad_enum.yaml",
            "bad/bad_enum.yaml: line 3: group 'all': vars.dtype: expected one of: auto, float16, "
            "half, bfloat16, float32, got 'bf16'",
        ),
        (
            "bad/typo.yaml",
            "bad/typo.yaml: line 5: group 'vllm': unknown variable 'max_num_seq'; did you mean 'max_num_seqs'?",
        ),
        (
            "bad/bad_port.yaml",
            "bad/bad_port.yaml: line 4: host 'gpu01': vars.ansible_port: expected an integer from 1 "
            "to 65535, got 70000",
        ),
        ("bad/cycle.yaml", "bad/cycle.yaml: group 'b': children form a cycle: a -> b -> a"),
        (
            "bad/version_number.yaml",
            "bad/version_number.yaml: line 3: group 'all': vars.vllm_version: expected a string like "
            "'0.5.4' or '0.32.0', got 0.1 (a number: put it in quotes)",
        ),
        (
            "bad/nested_type.yaml",
            "bad/nested_type.yaml: line 4: host 'gpu01': vars.vllm_env.NCCL_P2P_DISABLE: expected a "
            "string, got 1 (a number: put it in quotes)",
        ),
        (
            "bad/host_vars_list/hosts.yaml",
            "bad/host_vars_list/host_vars/gpu01.yml: expected a mapping of variables for host 'gpu01', got a list",
        ),
        (
            "bad/secret_file_missing/hosts.yaml",
            "bad/secret_file_missing/hosts.yaml: line 3: group 'all': vars.api_key_file: cannot read "
            "secret file 'bad/secret_file_missing/secrets/nope.txt' for api_key of host 'gpu01': "
            "no such file",
        ),
        (
            "bad/secret_env_missing.yaml",
            "bad/secret_env_missing.yaml: line 4: host 'gpu01': vars.api_key_env: environment "
            "variable 'VFLEET_TEST_SURELY_UNSET' is not set or empty (needed for api_key of host "
            "'gpu01')",
        ),
        ("bad/secret_twice.yaml", "bad/secret_twice.yaml: line 4: host 'gpu01': set only one of api_key, api_key_file"),
    ],
)
def test_each_mistake_has_one_clear_line(path, message, monkeypatch):
    monkeypatch.delenv("VFLEET_TEST_SURELY_UNSET", raising=False)
    assert errors_of(path) == [message]


def test_ini_inventory_loads():
    # Once refused with a conversion hint; INI is now read (tests/unit/test_inventory_ini.py).
    inv = load_inventory("bad/ini_format.ini", schema=SCHEMA)
    assert inv.group_hosts("vllm") == ["gpu01", "gpu02"]


def test_group_value_reported_once_not_per_host():
    # gpu_memory_utilization: 1.5 is set once in group 'vllm' of 16 hosts: one line, naming
    # the group where the fix goes.
    assert errors_of("bad/gpu_mem_range.yaml") == [
        "bad/gpu_mem_range.yaml: line 5: group 'vllm': vars.gpu_memory_utilization: expected "
        "a number > 0 and <= 1, got 1.5"
    ]


def test_all_problems_reported_together_in_file_order():
    assert errors_of("bad/several.yaml") == [
        "bad/several.yaml: line 4: host 'gpu01': vars.dtype: expected one of: auto, float16, "
        "half, bfloat16, float32, got 'bf16'",
        "bad/several.yaml: line 5: host 'gpu01': vars.vllm_port: expected an integer from 1 to 65535, got 0",
        "bad/several.yaml: line 7: host 'gpu02': unknown variable 'max_num_sqs'; did you mean 'max_num_seqs'?",
    ]


def test_secret_value_never_in_errors():
    (msg,) = errors_of("bad/secret_wrong_type.yaml")
    assert msg == (
        "bad/secret_wrong_type.yaml: line 4: host 'gpu01': vars.api_key: expected a "
        "non-empty string, got a number (value hidden)"
    )
    assert "12345" not in msg


def test_inventory_error_is_a_vfleet_error_with_lines():
    with pytest.raises(VfleetError) as exc:
        load_inventory("bad/several.yaml", schema=SCHEMA)
    assert len(str(exc.value).splitlines()) == 3
