"""Hostile or careless input: every case loads or fails with one line, never a traceback,
a hang, a flood of memory, or a secret in the message."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from vfleet.config.variables import SCHEMA, VARIABLES
from vfleet.engine.errors import InventoryError, VfleetError
from vfleet.engine.inventory import MAX_HOSTS, load_inventory, masked_vars, parse_set_args
from vfleet.engine.varschema import VarSchema


def write(tmp_path: Path, text: str, name: str = "hosts.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def errors_of(path: Path, schema: VarSchema = SCHEMA) -> list[str]:
    with pytest.raises(InventoryError) as exc:
        load_inventory(path, schema=schema)
    return exc.value.errors


def nested_groups(levels: int) -> str:
    lines, indent = ["all:"], "  "
    for i in range(levels):
        lines += [f"{indent}children:", f"{indent}  g{i}:"]
        indent += "    "
        lines.append(f"{indent}vars: {{max_num_seqs: {i + 1}}}")
    lines += [f"{indent}hosts:", f"{indent}  deep01:"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------- nesting
def test_two_hundred_nested_groups_load(tmp_path):
    inv = load_inventory(write(tmp_path, nested_groups(200)), schema=SCHEMA)
    host = inv.hosts["deep01"]
    assert host.vars["max_num_seqs"] == 200  # the deepest group wins
    assert len(host.groups) == 201 and host.groups[-1] == "g199"
    assert inv.graph().count("\n") == 1 + 200 + 1 + 1  # all, groups, host, ungrouped
    assert len(inv.select("g150")) == 1


def test_nesting_beyond_the_cap_is_one_line(tmp_path):
    (msg,) = errors_of(write(tmp_path, "all:\n  vars:\n    x: " + "[" * 600 + "]" * 600 + "\n"))
    assert msg.startswith(f"{tmp_path}/hosts.yml: line 3: nested more than 500 levels")


# ---------------------------------------------------------------------------- alias bomb
def test_alias_bomb_is_refused(tmp_path):
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        text += f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]\n"
    (msg,) = errors_of(write(tmp_path, text))
    assert msg.startswith(f"{tmp_path}/hosts.yml: line ")
    assert "YAML aliases expand to more than 100000 values" in msg and "\n" not in msg


def test_ordinary_anchors_still_load(tmp_path):
    text = "all:\n  vars: &v {max_num_seqs: 3}\n  children:\n" + "".join(
        f"    g{i}:\n      vars: *v\n      hosts: {{h{i}:}}\n" for i in range(50)
    )
    inv = load_inventory(write(tmp_path, text), schema=SCHEMA)
    assert inv.hosts["h49"].vars["max_num_seqs"] == 3


# -------------------------------------------------------------------------------- ranges
def test_hundred_thousand_hosts_load(tmp_path):
    path = write(
        tmp_path, "all:\n  vars: {model_name: m}\n  children:\n    vllm:\n      hosts:\n        gpu[000001:100000]:\n"
    )
    inv = load_inventory(path, schema=SCHEMA)  # how fast: benchmarks/inventory_scale.py
    assert len(inv.hosts) == MAX_HOSTS == 100_000
    assert inv.hosts["gpu100000"].vars["model_name"] == "m"
    assert len(inv.select("vllm:!gpu000001")) == 99_999


def test_a_range_past_the_cap_is_refused_before_expanding(tmp_path):
    (msg,) = errors_of(write(tmp_path, "all:\n  hosts:\n    gpu01:\n    gpu[0:10000000]:\n"))
    assert msg == (
        f"{tmp_path}/hosts.yml: line 4: all.hosts: 'gpu[0:10000000]' would make "
        "more than 100000 hosts (10000001 from this pattern); split the fleet into "
        "several inventories"
    )


def test_the_cap_counts_all_ranges_together(tmp_path):
    errs = errors_of(write(tmp_path, "all:\n  hosts:\n    a[1:60000]:\n    b[1:60000]:\n"))
    assert errs == [
        f"{tmp_path}/hosts.yml: line 4: all.hosts: 'b[1:60000]' would make more "
        "than 100000 hosts (60000 from this pattern); split the fleet into several "
        "inventories"
    ]


def test_a_huge_limit_range_is_refused(tmp_path):
    inv = load_inventory(write(tmp_path, "all:\n  hosts:\n    gpu1:\n"), schema=SCHEMA)
    with pytest.raises(VfleetError, match="expands to more than 1000000 names"):
        inv.select("gpu[0:99999999]")


# --------------------------------------------------------------------------------- types
@pytest.mark.parametrize(
    "var, value, message",
    [
        (
            "tensor_parallel_size",
            "4.0",
            "vars.tensor_parallel_size: expected an integer from 1 to 1024, got "
            "4.0 (write 4, without the decimal point)",
        ),
        (
            "ansible_port",
            "2222.0",
            "vars.ansible_port: expected an integer from 1 to 65535, got "
            "2222.0 (write 2222, without the decimal point)",
        ),
        (
            "gpu_memory_utilization",
            ".nan",
            "vars.gpu_memory_utilization: expected a number > 0 and <= 1, got nan (not a finite number)",
        ),
        (
            "gpu_memory_utilization",
            "-.inf",
            "vars.gpu_memory_utilization: expected a number > 0 and <= 1, got -inf (not a finite number)",
        ),
        ("host_key_checking", "maybe", "vars.host_key_checking: expected true or false, got 'maybe'"),
        ("ansible_ssh_port", "2222.5", "vars.ansible_ssh_port: expected an integer from 1 to 65535, got 2222.5"),
    ],
)
def test_type_holes_are_closed(tmp_path, var, value, message):
    path = write(tmp_path, f"all:\n  hosts:\n    gpu01:\n      {var}: {value}\n")
    assert errors_of(path) == [f"{tmp_path}/hosts.yml: line 4: host 'gpu01': {message}"]


def test_ansible_coercions_are_applied_to_the_merged_vars(tmp_path):
    path = write(
        tmp_path,
        "all:\n  vars:\n    host_key_checking: 'false'\n    become: 'Yes'\n"
        "    weights_fanout: 1\n  hosts:\n    gpu01:\n"
        "      ansible_port: '2222'\n    gpu02:\n      ansible_ssh_port: '2200'\n",
    )
    inv = load_inventory(path, schema=SCHEMA)
    g1 = inv.hosts["gpu01"]
    assert g1.port == 2222 and g1.vars["ansible_port"] == 2222
    assert g1.vars["host_key_checking"] is False and g1.vars["become"] is True
    assert g1.vars["weights_fanout"] is True
    assert inv.hosts["gpu02"].port == 2200


def test_string_variables_are_not_coerced(tmp_path):
    path = write(tmp_path, "all:\n  vars: {model_name: '123'}\n  hosts: {gpu01:}\n")
    assert load_inventory(path, schema=SCHEMA).hosts["gpu01"].vars["model_name"] == "123"


# ------------------------------------------------------------------------------- !vault
def test_vault_values_get_a_clear_message(tmp_path):
    path = write(
        tmp_path,
        "all:\n  vars:\n    api_key: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n      6162\n  hosts: {gpu01:}\n",
    )
    assert errors_of(path) == [
        f"{tmp_path}/hosts.yml: line 3: vault-encrypted values (!vault) are not supported; "
        "decrypt the secret into a file and point NAME_file at it, or export it and name it "
        "with NAME_env"
    ]


# ---------------------------------------------------------------------- group/host clash
def test_group_and_host_of_one_name_warn_and_the_group_wins(tmp_path):
    path = write(tmp_path, "all:\n  hosts:\n    gpu01:\n  children:\n    gpu01:\n      hosts:\n        gpu02:\n")
    inv = load_inventory(path, schema=SCHEMA)
    assert inv.warnings == [
        f"{tmp_path}/hosts.yml: group and host both named 'gpu01': "
        "--limit gpu01 selects the group (as Ansible does); rename one of "
        "them"
    ]
    assert [h.name for h in inv.select("gpu01")] == ["gpu02"]  # Ansible: groups first


# ------------------------------------------------------------------- names and addresses
@pytest.mark.parametrize(
    "name, why",
    [
        ('"gpu 01"', "contains whitespace"),
        ('"gpu01\\n  ProxyCommand x"', "contains whitespace"),
        ('"gpu\\x0001"', "contains a control character"),
        ('"-oProxyCommand=x"', "starts with '-' (it would read as a command-line option)"),
    ],
)
def test_unsafe_host_names_are_refused(tmp_path, name, why):
    (msg,) = errors_of(write(tmp_path, f"all:\n  hosts:\n    {name}:\n"))
    assert msg.startswith(f"{tmp_path}/hosts.yml: line 3: all.hosts: host name ")
    assert why in msg and "\n" not in msg


@pytest.mark.parametrize("var", ["ansible_host", "ssh_host", "ansible_ssh_host", "ansible_user"])
def test_unsafe_addresses_are_refused(tmp_path, var):
    path = write(tmp_path, f'all:\n  hosts:\n    gpu01:\n      {var}: "10.0.0.1\\nHost *"\n')
    (msg,) = errors_of(path)
    assert msg == (
        f"{tmp_path}/hosts.yml: line 4: host 'gpu01': vars.{var}: "
        "'10.0.0.1\\nHost *' contains whitespace; give a plain host name, address "
        "or user name"
    )


# ------------------------------------------------------------------------------- secrets
def secret_inventory(tmp_path: Path, key_file: str) -> Path:
    return write(tmp_path, f"all:\n  vars:\n    api_key_file: {key_file}\n  hosts: {{gpu01:}}\n")


def test_a_fifo_secret_does_not_block(tmp_path):
    os.mkfifo(tmp_path / "key")
    signal.alarm(10)  # a regression would hang: fail instead
    try:
        (msg,) = errors_of(secret_inventory(tmp_path, "key"))
    finally:
        signal.alarm(0)
    assert msg.endswith(f"cannot read secret file '{tmp_path}/key' for api_key of host 'gpu01': not a regular file")


def test_a_folder_named_as_secret_file_is_one_line(tmp_path):
    (tmp_path / "keys").mkdir()
    (msg,) = errors_of(secret_inventory(tmp_path, "keys"))
    assert msg.endswith(f"cannot read secret file '{tmp_path}/keys' for api_key of host 'gpu01': not a regular file")


def test_a_large_secret_file_is_refused(tmp_path):
    (tmp_path / "key").write_text("x" * (64 * 1024 + 1))
    (msg,) = errors_of(secret_inventory(tmp_path, "key"))
    assert msg.endswith("larger than 64 KiB; a secret is one line")


def test_a_two_line_secret_is_refused_without_showing_it(tmp_path):
    (tmp_path / "key").write_text("sk-first\nsk-second\n")
    (tmp_path / "key").chmod(0o600)
    (msg,) = errors_of(secret_inventory(tmp_path, "key"))
    assert msg.endswith("it holds more than one line; a secret is one line")
    assert "sk-" not in msg


def test_a_readable_secret_file_is_a_warning(tmp_path):
    (tmp_path / "key").write_text("sk-abc\n")
    (tmp_path / "key").chmod(0o644)
    inv = load_inventory(secret_inventory(tmp_path, "key"), schema=SCHEMA)
    assert inv.hosts["gpu01"].vars["api_key"] == "sk-abc"
    assert inv.warnings == [
        f"{tmp_path}/hosts.yml: line 3: group 'all': vars.api_key_file: "
        f"secret file '{tmp_path}/key' is readable by group or others "
        "(mode 0644); chmod 600 it"
    ]
    (tmp_path / "key").chmod(0o600)
    assert load_inventory(secret_inventory(tmp_path, "key"), schema=SCHEMA).warnings == []


def test_a_two_line_secret_env_is_refused_without_showing_it(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLEET_TEST_KEY", "sk-one\nsk-two")
    path = write(tmp_path, "all:\n  vars: {api_key_env: VFLEET_TEST_KEY}\n  hosts: {gpu01:}\n")
    (msg,) = errors_of(path)
    assert "more than one line" in msg and "sk-" not in msg


@pytest.mark.parametrize("item", ["api-key=sk-live-123", "sk-live-123", "a key=sk-live-123", "api_key=[sk-live-123"])
def test_set_errors_never_echo_the_value(item):
    with pytest.raises(VfleetError) as exc:
        parse_set_args([item])
    assert "sk-live-123" not in str(exc.value)


def test_bad_secret_types_never_show_the_value(tmp_path):
    path = write(
        tmp_path, "all:\n  vars:\n    vllm_env: {HF_TOKEN: 12345, OPENAI_API_KEY: [9876]}\n  hosts: {gpu01:}\n"
    )
    errs = errors_of(path)
    assert len(errs) == 2 and not any("12345" in e or "9876" in e for e in errs)


# ------------------------------------------------------------------------------- masking
def test_masking_by_name_at_any_depth():
    shown = masked_vars(
        {
            "vllm_env": {"HF_TOKEN": "hf_x", "NCCL_DEBUG": "INFO"},
            "openai_api_key": "sk-x",
            "db_passwd": "p",
            "extra": [{"aws_secret": "s"}],
            "api_key_file": "secrets/key",
            "hf_token_env": "HF",
            "gateway_rate_burst": 40,
            "max_num_batched_tokens": 8192,
            "apikey": "k",
            "ansible_become_pass": "p",
            "empty_token": None,
            "api_key": "sk-y",
        },
        schema=SCHEMA,
    )
    assert shown == {
        "vllm_env": {"HF_TOKEN": "***", "NCCL_DEBUG": "INFO"},
        "openai_api_key": "***",
        "db_passwd": "***",
        "extra": [{"aws_secret": "***"}],
        "api_key_file": "secrets/key",
        "hf_token_env": "HF",
        "gateway_rate_burst": 40,
        "max_num_batched_tokens": 8192,
        "apikey": "***",
        "ansible_become_pass": "***",
        "empty_token": None,
        "api_key": "***",
    }


def test_list_json_masks_nested_secrets(tmp_path):
    path = write(tmp_path, "all:\n  vars:\n    vllm_env: {HF_TOKEN: hf_secret}\n  hosts: {gpu01:}\n")
    dumped = json.dumps(load_inventory(path, schema=SCHEMA).to_list_json())
    assert "hf_secret" not in dumped and '"HF_TOKEN": "***"' in dumped


# --------------------------------------------------------------------------------- typos
def test_distant_typos_and_aliases_are_warnings(tmp_path):
    schema = VarSchema(
        VARIABLES, aliases={"tp_size": "tensor_parallel_size", "port": "vllm_port", "model": "model_name"}
    )
    path = write(
        tmp_path, "all:\n  vars:\n    tp_size: 2\n    port: 8000\n    model: m\n    my_own_var: 1\n  hosts: {gpu01:}\n"
    )
    inv = load_inventory(path, schema=schema)
    where = f"{tmp_path}/hosts.yml"
    assert inv.warnings == [
        f"{where}: line 3: group 'all': unknown variable 'tp_size' (nothing reads it); did "
        "you mean 'tensor_parallel_size'?",
        f"{where}: line 4: group 'all': unknown variable 'port' (nothing reads it); did you mean 'vllm_port'?",
        f"{where}: line 5: group 'all': unknown variable 'model' (nothing reads it); did you mean 'model_name'?",
    ]
    assert errors_of(write(tmp_path, "all:\n  vars: {vllm_hots: x}\n  hosts: {gpu01:}\n"), schema) == [
        f"{where}: line 2: group 'all': unknown variable 'vllm_hots'; did you mean 'vllm_host'?"
    ]


def test_aliases_must_point_at_known_variables():
    with pytest.raises(ValueError, match="aliases point at unknown variables: nope"):
        VarSchema(VARIABLES, aliases={"x": "nope"})


def test_a_nul_in_a_secret_path_is_one_line(tmp_path):
    # the schema refuses the control character and the secret reader the NUL: each one line
    msgs = errors_of(secret_inventory(tmp_path, '"a\\0b"'))
    assert any(m.endswith("for api_key of host 'gpu01': the path holds a NUL character") for m in msgs) and all(
        "\n" not in m for m in msgs
    )


def test_vars_files_are_only_looked_up_by_listed_names(tmp_path):
    # A group named like a path must not read files outside group_vars/.
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "outside.yml").write_text("max_num_seqs: 1\n")
    path = write(tmp_path, "all:\n  children:\n    ../outside:\n      hosts: {gpu01:}\n")
    assert load_inventory(path, schema=SCHEMA).hosts["gpu01"].sources["max_num_seqs"] == "default"
