"""The generic schema machinery: plain-words errors from jsonschema, did-you-mean, and the
vfleet variable table built on it."""

from __future__ import annotations

import pytest

from vfleet.config.variables import SCHEMA, VARIABLES, markdown_table
from vfleet.engine.schema_words import describe
from vfleet.engine.varschema import ENV_NAME_PATTERN, VariableSpec, VarSchema, looks_secret


@pytest.mark.parametrize(
    "schema, words",
    [
        ({"type": "integer", "minimum": 1}, "an integer >= 1"),
        ({"type": ["integer", "null"], "minimum": 1}, "an integer >= 1 or null"),
        ({"type": "integer", "minimum": 1, "maximum": 65535}, "an integer from 1 to 65535"),
        ({"type": "number", "exclusiveMinimum": 0, "maximum": 1}, "a number > 0 and <= 1"),
        ({"enum": ["a", "b"]}, "one of: a, b"),
        ({"type": "array", "items": {"type": "string"}}, "a list of strings"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "a mapping of names to strings"),
        ({"type": "string", "pattern": "x", "examples": ["20r/s"]}, "a string like '20r/s'"),
        ({"type": "boolean"}, "true or false"),
    ],
)
def test_describe(schema, words):
    assert describe(schema) == words


def test_check_reports_path_expected_and_got():
    s = VarSchema([VariableSpec("pins", {"type": "array", "items": {"type": "string"}}, [])])
    assert s.check("pins", ["a", 3]) == ["vars.pins[1]: expected a string, got 3 (a number: put it in quotes)"]
    assert s.check("pins", ["a"]) == []
    assert s.check("unknown_is_not_checked", 1) == []


def test_bool_is_not_an_integer():
    assert SCHEMA.check("tensor_parallel_size", True) == [
        "vars.tensor_parallel_size: expected an integer from 1 to 1024, got true"
    ]


def test_secret_value_never_in_message():
    msgs = SCHEMA.check("api_key", ["sk-very-secret"])
    assert msgs == ["vars.api_key: expected a non-empty string, got a list (value hidden)"]
    assert "sk-very-secret" not in msgs[0]


def test_secret_companions_are_known_and_checked():
    assert {"api_key_file", "api_key_env", "hf_token_file", "hf_token_env"} <= SCHEMA.known_names
    assert SCHEMA.check("api_key_file", 5) == [
        "vars.api_key_file: expected a non-empty string (a normalized path on the controller), got 5"
    ]


@pytest.mark.parametrize(
    "key, hint",
    [
        ("max_num_seq", "max_num_seqs"),
        ("tensor_paralel_size", "tensor_parallel_size"),
        ("gpu_memory_utilisation", "gpu_memory_utilization"),
        ("vllm_verison", "vllm_version"),
        ("my_own_template_var", None),  # not vfleet-looking: left alone
        ("max_num_seqs", None),  # known
    ],
)
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


# ------------------------------------------------------------- coercion and strict types
def _schema() -> VarSchema:
    return VarSchema(
        [
            VariableSpec("port", {"type": "integer", "minimum": 1, "maximum": 65535}),
            VariableSpec("flag", {"type": "boolean"}),
            VariableSpec("ratio", {"type": "number", "exclusiveMinimum": 0, "maximum": 1}),
            VariableSpec("limit", {"type": ["integer", "null"]}),
            VariableSpec("name", {"type": "string"}),
            VariableSpec(
                "env",
                {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "propertyNames": {"pattern": ENV_NAME_PATTERN},
                },
            ),
            VariableSpec(
                "labels",
                {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "title": "label (lower-case letters)"}},
            ),
        ]
    )


@pytest.mark.parametrize(
    "name, value, coerced",
    [
        ("port", "2222", 2222),
        ("port", " 22 ", 22),
        ("port", "22.0", "22.0"),
        ("port", "-1", "-1"),
        ("limit", "8", 8),
        ("name", "8", "8"),
        ("flag", "yes", True),
        ("flag", "OFF", False),
        ("flag", "t", True),
        ("flag", "0", False),
        ("flag", 1, True),
        ("flag", 0.0, False),
        ("flag", "maybe", "maybe"),
        ("flag", 2, 2),
        ("ratio", "0.5", "0.5"),
        ("unknown", "1", "1"),
    ],
)
def test_coerce_takes_ansibles_coercions_only(name, value, coerced):
    out = _schema().coerce(name, value)
    assert out == coerced and type(out) is type(coerced)


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("port", 4.0, "vars.port: expected an integer from 1 to 65535, got 4.0 (write 4, without the decimal point)"),
        ("port", True, "vars.port: expected an integer from 1 to 65535, got true"),
        ("ratio", float("nan"), "vars.ratio: expected a number > 0 and <= 1, got nan (not a finite number)"),
        ("ratio", float("inf"), "vars.ratio: expected a number > 0 and <= 1, got inf (not a finite number)"),
        (
            "env",
            {"NCCL_DEBUG=INFO; touch": "x"},
            "vars.env: key 'NCCL_DEBUG=INFO; touch' is not a valid environment variable name "
            "(letters, digits and '_', not starting with a digit)",
        ),
        ("labels", {"Bad": 1}, "vars.labels: key 'Bad' is not a valid label (lower-case letters)"),
        ("env", {"HF_TOKEN": 7}, "vars.env.HF_TOKEN: expected a string, got a number (value hidden)"),
    ],
)
def test_check_refuses_type_holes(name, value, message):
    assert _schema().check(name, value) == [message]


def test_whole_numbers_still_pass_for_numbers():
    assert _schema().check("ratio", 1) == [] and _schema().check("port", 22) == []


def test_hint_uses_aliases_then_a_looser_match():
    s = VarSchema(_schema().specs.values(), aliases={"ssh_port_number": "port"})
    assert s.hint("ssh_port_number") == "port"
    assert s.hint("flg") == "flag"  # 0.86: also an error-level suggestion
    assert s.suggest("ratioo") == "ratio" and s.hint("ratio") is None
    assert s.hint("zzz") is None


@pytest.mark.parametrize(
    "name, secret",
    [
        ("api_key", True),
        ("HF_TOKEN", True),
        ("openai_api_key", True),
        ("db_password", True),
        ("apikey", True),
        ("aws_credentials", True),
        ("ansible_become_pass", True),
        ("api_key_file", False),
        ("hf_token_env", False),
        ("max_num_batched_tokens", False),
        ("gateway_rate_burst", False),
        ("keyboard", False),
        ("monkey", False),
        ("apiToken", True),
        ("clientSecret", True),
        ("maxTokens", False),
    ],
)
def test_looks_secret_uses_whole_name_parts(name, secret):
    assert looks_secret(name) is secret
