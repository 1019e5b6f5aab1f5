"""The generic schema machinery: plain-words errors from jsonschema, did-you-mean, and the
vfleet variable table built on it."""
from __future__ import annotations

import pytest

from fleet.varschema import VariableSpec, VarSchema, describe
from roles.variables import SCHEMA, VARIABLES, markdown_table


@pytest.mark.parametrize("schema, words", [
    ({"type": "integer", "minimum": 1}, "an integer >= 1"),
    ({"type": ["integer", "null"], "minimum": 1}, "an integer >= 1 or null"),
    ({"type": "integer", "minimum": 1, "maximum": 65535}, "an integer from 1 to 65535"),
    ({"type": "number", "exclusiveMinimum": 0, "maximum": 1}, "a number > 0 and <= 1"),
    ({"enum": ["a", "b"]}, "one of: a, b"),
    ({"type": "array", "items": {"type": "string"}}, "a list of strings"),
    ({"type": "object", "additionalProperties": {"type": "string"}},
     "a mapping of names to strings"),
    ({"type": "string", "pattern": "x", "examples": ["20r/s"]}, "a string like '20r/s'"),
    ({"type": "boolean"}, "true or false"),
])
def test_describe(schema, words):
    assert describe(schema) == words


def test_check_reports_path_expected_and_got():
    s = VarSchema([VariableSpec("pins", {"type": "array", "items": {"type": "string"}}, [])])
    assert s.check("pins", ["a", 3]) == ["vars.pins[1]: expected a string, got 3 "
                                         "(a number: put it in quotes)"]
    assert s.check("pins", ["a"]) == []
    assert s.check("unknown_is_not_checked", 1) == []


def test_bool_is_not_an_integer():
    assert SCHEMA.check("tensor_parallel_size", True) == [
        "vars.tensor_parallel_size: expected an integer >= 1, got true"]


def test_secret_value_never_in_message():
    msgs = SCHEMA.check("api_key", ["sk-very-secret"])
    assert msgs == ["vars.api_key: expected a non-empty string, got a list (value hidden)"]
    assert "sk-very-secret" not in msgs[0]


def test_secret_companions_are_known_and_checked():
    assert {"api_key_file", "api_key_env", "hf_token_file", "hf_token_env"} <= SCHEMA.known_names
    assert SCHEMA.check("api_key_file", 5) == [
        "vars.api_key_file: expected a non-empty string, got 5"]


@pytest.mark.parametrize("key, hint", [
    ("max_num_seq", "max_num_seqs"),
    ("tensor_paralel_size", "tensor_parallel_size"),
    ("gpu_memory_utilisation", "gpu_memory_utilization"),
    ("vllm_verison", "vllm_version"),
    ("my_own_template_var", None),       # not vfleet-looking: left alone
    ("max_num_seqs", None),              # known
])
def test_suggest(key, hint):
    assert SCHEMA.suggest(key) == hint


def test_string_typed_detection():
    assert SCHEMA.is_string_typed("vllm_version")
    assert SCHEMA.is_string_typed("model_name")
    assert not SCHEMA.is_string_typed("max_num_seqs")
    assert not SCHEMA.is_string_typed("not_a_var")


def test_table_has_the_required_variables_and_valid_defaults():
    names = {v.name for v in VARIABLES}
    required = """ansible_host ansible_user ansible_port ansible_ssh_private_key_file
        ansible_connection ssh_host ssh_user ssh_port ssh_key_file connection known_hosts_file
        host_key_checking connect_timeout command_timeout max_fail_percentage vllm_package
        vllm_version vllm_python vllm_root vllm_wheelhouse vllm_extra_pins vllm_remove_packages
        vllm_user service_name vllm_port vllm_host model_source model_name model_dir dtype
        tensor_parallel_size max_model_len gpu_memory_utilization max_num_seqs shutdown_timeout
        ready_timeout vllm_extra_args vllm_env cpu_kvcache_space_gib api_key hf_token
        gateway_port gateway_rate_limit gateway_rate_burst gateway_client_max_body_size
        gateway_read_timeout gpu_profile""".split()
    assert set(required) <= names
    assert set(SCHEMA.secret_names) == {"api_key", "hf_token"}
    for v in VARIABLES:
        if v.default is not None:
            assert SCHEMA.check(v.name, v.default) == [], v.name


def test_duplicate_spec_is_a_bug():
    with pytest.raises(ValueError):
        VarSchema([VariableSpec("a", {"type": "string"}), VariableSpec("a", {"type": "string"})])


def test_markdown_table():
    table = markdown_table()
    assert table.startswith("| Variable | Accepts | Default | Meaning |\n|---|---|---|---|\n")
    assert "| `gpu_memory_utilization` | a number > 0 and <= 1 | `0.9` |" in table
    assert "`api_key_file`" in table and "`api_key_env`" in table
    assert table.count("\n") == len(VARIABLES) + 2
