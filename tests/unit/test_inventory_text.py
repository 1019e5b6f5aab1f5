"""Values Python can hold but not print or encode, and names that would break a message's one
line: each is one error naming the file (and line), never a traceback later."""

from __future__ import annotations

from pathlib import Path

import pytest

from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import InventoryError
from vfleet.engine.inventory import load_inventory, parse_set_args
from vfleet.engine.inventory.ini import ini_value

HUGE = "1" * 5000


def errors(path: Path, overrides=None) -> list[str]:
    with pytest.raises(InventoryError) as e:
        load_inventory(path, overrides, schema=SCHEMA)
    msgs = str(e.value).splitlines()
    assert all(m.startswith(str(path.parent)) or m.startswith("--set") for m in msgs), msgs
    return msgs


def yaml_inventory(tmp_path: Path, vars_text: str, name: str = "hosts.yml") -> Path:
    path = tmp_path / name
    path.write_text(f"all:\n  vars:\n{vars_text}  hosts:\n    gpu01: {{}}\n")
    return path


@pytest.mark.parametrize("value", [HUGE, "-" + HUGE, "0x" + "f" * 5000, "0" + "7" * 6000, "0b" + "1" * 20000])
@pytest.mark.parametrize("var", ["max_num_seqs", "my_own_setting"])
def test_an_integer_too_long_to_print_is_one_line_with_the_file(tmp_path, var, value):
    path = yaml_inventory(tmp_path, f"    {var}: {value}\n")
    (msg,) = errors(path)
    assert msg == (
        f"{path}: line 3: an integer too long to use (more than 4000 digits); no setting takes one: check the value"
    )


def test_a_long_but_printable_integer_reaches_the_schema(tmp_path):
    (msg,) = errors(yaml_inventory(tmp_path, "    max_num_seqs: " + "9" * 4000 + "\n"))
    assert "vars.max_num_seqs: expected an integer from 1 to 1048576 or null, got 999" in msg
    assert len(msg) < 250


def test_a_huge_integer_in_group_vars_names_that_file(tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text(f"max_num_seqs: {HUGE}\n")
    path = yaml_inventory(tmp_path, "    model_name: tiny\n")
    (msg,) = errors(path)
    assert msg.startswith(f"{tmp_path}/group_vars/all.yml: line 1: an integer too long")


def test_a_huge_integer_through_set_is_refused_without_a_traceback():
    from vfleet.engine.errors import VfleetError

    with pytest.raises(VfleetError, match="--set max_num_seqs: the value is not valid YAML"):
        parse_set_args([f"max_num_seqs={HUGE}"])


@pytest.mark.parametrize(
    "line", [f"gpu01 max_num_seqs={HUGE}", "gpu01 max_num_seqs=0x" + "f" * 5000, f"gpu01 my_own=[{HUGE}]"]
)
def test_a_huge_integer_in_an_ini_inventory(tmp_path, line):
    path = tmp_path / "hosts.ini"
    path.write_text(f"[vllm]\n{line}\n")
    msgs = errors(path) if "my_own" not in line else None
    if msgs:
        (msg,) = msgs
        assert (
            msg.startswith(
                f"{path}: line 2: host 'gpu01': vars.max_num_seqs: expected an integer from 1 to 1048576 or null, got '"
            )
            and len(msg) < 250
        )
    else:  # an unknown variable keeps the text, which prints
        inv = load_inventory(path, schema=SCHEMA)
        assert isinstance(inv.hosts["gpu01"].vars["my_own"], str)


def test_ini_value_keeps_the_text_of_what_cannot_be_held():
    assert ini_value("0x" + "f" * 5000) == "0x" + "f" * 5000
    assert ini_value("'a\\udc80'") == "'a\\udc80'"
    assert ini_value("['ok', 3]") == ["ok", 3]


@pytest.mark.parametrize("where", ["value", "key", "host", "group", "list item"])
def test_a_lone_surrogate_is_one_line_with_the_line(tmp_path, where):
    text = {
        "value": 'all:\n  vars:\n    model_name: "a\\udc80"\n  hosts: {gpu01: {}}\n',
        "key": 'all:\n  vars:\n    "x\\udc80": 1\n  hosts: {gpu01: {}}\n',
        "host": 'all:\n  hosts:\n    "gpu\\udc80": {}\n',
        "group": 'all:\n  children:\n    "g\\udc80": {hosts: {gpu01: {}}}\n',
        "list item": 'all:\n  vars:\n    vllm_extra_args: ["--x", "\\udc80"]\n  hosts: {gpu01: {}}\n',
    }[where]
    path = tmp_path / "hosts.yml"
    path.write_text(text)
    (msg,) = errors(path)
    assert msg == (
        f"{path}: line 3: a lone surrogate escape (like \\udc80) is not text; write the character itself, or remove it"
    )


def test_a_lone_surrogate_in_an_ini_value_is_refused_by_the_schema(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[vllm]\ngpu01 model_name='a\\udc80'\n")
    (msg,) = errors(path)
    assert msg.startswith(f"{path}: line 2: host 'gpu01': vars.model_name: expected")


@pytest.mark.parametrize(
    "name, why",
    [
        ('"x\\ny"', "has the control character U+000A"),
        ('"x\\u202ey"', "has the control character U+202E"),
        ('"' + "v" * 300 + '"', "is longer than 255 characters"),
    ],
)
def test_a_variable_name_that_would_break_the_line_is_an_error(tmp_path, name, why):
    path = yaml_inventory(tmp_path, f"    {name}: 1\n")
    (msg,) = errors(path)
    assert msg.startswith(f"{path}: line 3: group 'all': variable name '") and why in msg
    assert "\n" not in msg


@pytest.mark.parametrize("name", ['"g\\nh"', '"g\\x1bh"', '"' + "g" * 300 + '"'])
def test_a_group_name_that_would_break_the_line_is_an_error(tmp_path, name):
    path = tmp_path / "hosts.yml"
    path.write_text(f"all:\n  children:\n    {name}:\n      hosts: {{gpu01: {{}}}}\n")
    msgs = errors(path)
    assert any(f"{path}: line 3: group name" in m for m in msgs) and all("\n" not in m for m in msgs)


def test_a_host_name_longer_than_dns_allows(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text(f"all:\n  hosts:\n    {'h' * 254}: {{}}\n")
    (msg,) = errors(path)
    assert "is longer than 253 characters" in msg and len(msg) < 600


def test_an_unknown_group_key_is_quoted(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text('all:\n  "ho\\tsts": {}\n  hosts: {gpu01: {}}\n')
    (msg,) = errors(path)
    assert "unknown key 'ho\\tsts'" in msg
