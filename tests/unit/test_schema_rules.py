"""Rules every row of the variable table obeys, nested schemas too, so a new variable inherits
them: every pattern is a full ASCII match, every number has both bounds, every string a
maxLength and no control characters, every path variable a path kind, and every failure is
one line that never shows a secret or a whole long value."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from vfleet.config.unit_names import RESERVED_SERVICE_NAMES, RESERVED_SERVICE_PREFIXES
from vfleet.config.variables import SCHEMA, VARIABLES
from vfleet.engine.pathrules import SYSTEM_DIRS
from vfleet.engine.varschema import VariableSpec, VarSchema

ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


def nodes(schema: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema, with a readable place for assertion messages."""
    yield where, schema
    for key in ("items", "additionalProperties", "propertyNames", "not"):
        if isinstance(schema.get(key), dict):
            yield from nodes(schema[key], f"{where}.{key}")
    for key, sub in schema.get("properties", {}).items():
        yield from nodes(sub, f"{where}.{key}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(schema.get(key, [])):
            yield from nodes(sub, f"{where}.{key}[{i}]")


def types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    return {t} if isinstance(t, str) else set(t or [])


def companion_schemas() -> list[tuple[str, dict[str, Any]]]:
    return [(n, SCHEMA._validator(n).schema) for n in sorted(SCHEMA.known_names - set(SCHEMA.specs))]


ALL_NODES = [(place, node) for v in VARIABLES for place, node in nodes(v.json_schema, v.name)] + [
    (place, node) for name, schema in companion_schemas() for place, node in nodes(schema, name)
]


def check_node(node: dict[str, Any], value: Any) -> list[str]:
    return VarSchema([VariableSpec("x", node)]).check("x", value)


def test_the_walk_sees_nested_schemas():
    places = {p for p, _ in ALL_NODES}
    assert {
        "vllm_env.propertyNames",
        "vllm_site_packages.items",
        "api_key_env",
        "gateway_tenants.items.key_file",
    } <= places


@pytest.mark.parametrize(
    "place, node", [(p, n) for p, n in ALL_NODES if "pattern" in n], ids=lambda x: x if isinstance(x, str) else ""
)
def test_every_pattern_is_a_full_ascii_match(place, node):
    assert node.get("examples"), f"{place}: a pattern needs an example (docs and this test use it)"
    alone = {"pattern": node["pattern"]}  # the pattern keyword by itself, without the text rule
    for good in node["examples"]:
        assert check_node(node, good) == [], place
        for bad in (good + "\n", good.translate(ARABIC_INDIC) if any(c.isdigit() for c in good) else "\n"):
            assert check_node(alone, bad), f"{place}: the pattern alone accepted {bad!r}"
        for bad in (good + "\n", "\n" + good, good + "\r\n", good + " \n", good + "\x00"):
            assert check_node(node, bad), f"{place} accepted {bad!r}"
        if any(c.isdigit() for c in good):
            assert check_node(node, good.translate(ARABIC_INDIC)), f"{place}: Arabic-Indic digits"
        if any(c.isalpha() for c in good):
            swapped = "".join("é" if c.isalpha() else c for c in good)
            assert check_node(node, swapped), f"{place} accepted {swapped!r}"


@pytest.mark.parametrize(
    "place, node",
    [(p, n) for p, n in ALL_NODES if types(n) & {"integer", "number"}],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_every_number_has_both_bounds(place, node):
    if "enum" in node:  # a list of values is its own bound
        assert all(v is None or abs(v) < 2**31 for v in node["enum"])
        return
    assert "minimum" in node or "exclusiveMinimum" in node, f"{place} has no lower bound"
    assert "maximum" in node or "exclusiveMaximum" in node, f"{place} has no upper bound"
    assert check_node(node, 10**30) and check_node(node, -(10**30))


@pytest.mark.parametrize(
    "place, node", [(p, n) for p, n in ALL_NODES if "string" in types(n)], ids=lambda x: x if isinstance(x, str) else ""
)
def test_every_string_is_bounded_and_refuses_control_characters(place, node):
    assert 0 < node.get("maxLength", 0) <= 4096, f"{place} has no maxLength"
    good = (node.get("examples") or ["/srv/models/x" if "path" in node else "x"])[0]
    assert check_node(node, good) == [], place
    for bad in (good + "\x1b[31m", good + "\u202e", good + "\u2028", good + "\x7f", good + "\ud800"):
        msgs = check_node(node, bad)
        assert msgs and "control character" in msgs[0], (place, bad, msgs)
    assert check_node(node, "a" * (node["maxLength"] + 1)), place


@pytest.mark.parametrize(
    "place, node",
    [(p, n) for p, n in ALL_NODES if types(n) & {"array", "object"}],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_every_list_and_mapping_is_bounded(place, node):
    if "array" in types(node):
        assert node.get("maxItems"), f"{place} has no maxItems"
    if "object" in types(node):
        assert node.get("maxProperties"), f"{place} has no maxProperties"


# --------------------------------------------------------------------------- path variables
PATH_KINDS = {
    "model_dir": "host_dir",
    "model_path": "host_dir",
    "vllm_root": "host_dir",
    "vllm_env_file": "host_dir",
    "chat_template": "host_dir",
    "vllm_python": "host_file",
    "weights_peer_ssh_key": "host_file",
    "known_hosts_file": "controller",
    "ssh_key_file": "controller",
    "ansible_ssh_private_key_file": "controller",
    "ansible_private_key_file": "controller",
    "vllm_wheelhouse": "controller",
    "model_source": "source",
    "model_name": "relative",
    "vllm_venv_name": "name",
    "api_key_file": "controller",
    "hf_token_file": "controller",
}


def path_kind(name: str) -> str | None:
    schema = SCHEMA._validator(name).schema
    return next((n.get("path") for _, n in nodes(schema, name) if "path" in n), None)


@pytest.mark.parametrize("name, kind", sorted(PATH_KINDS.items()))
def test_path_variables_name_their_kind(name, kind):
    assert path_kind(name) == kind


def test_variables_named_like_paths_have_a_path_kind():
    """A new *_dir, *_path, *_file, *_root, *_template or *_key variable gets a path rule."""
    endings = ("_dir", "_path", "_file", "_root", "_template", "_key", "_wheelhouse", "_python")
    for name in sorted(SCHEMA.known_names):
        spec = SCHEMA.specs.get(name)
        if name.endswith(endings) and not (spec and spec.secret):
            assert path_kind(name), f"{name} has no path kind"
    assert path_kind("vllm_site_packages") == "host_dir"


HOST_DIRS = [n for n, k in PATH_KINDS.items() if k == "host_dir"]


@pytest.mark.parametrize("path", sorted(SYSTEM_DIRS | {"/usr/local", "/usr/share", "/usr/lib"}))
def test_no_host_dir_variable_takes_a_system_folder(path):
    for name in HOST_DIRS:
        (msg,) = SCHEMA.check(name, path)
        assert "system folder" in msg, msg
    assert SCHEMA.check("vllm_site_packages", [path])


@pytest.mark.parametrize(
    "path",
    [
        "/srv/models",
        "/opt/vllm",
        "/var/lib/vllm",
        "/usr/local/models",
        "/etc/vllm/vllm.env",
        "/home/deploy/models",
        "/data",
    ],
)
def test_a_folder_below_a_system_folder_is_fine(path):
    for name in HOST_DIRS:
        assert SCHEMA.check(name, path) == [], name


@pytest.mark.parametrize("name", HOST_DIRS + ["vllm_python", "weights_peer_ssh_key"])
@pytest.mark.parametrize(
    "path, why",
    [
        ("/srv/models/../../etc", "'..'"),
        ("/srv/./models", "'.'"),
        ("/srv//models", "'//'"),
        ("/srv/models/", "ends with '/'"),
        ("srv/models", "not absolute"),
        ("~/models", "not absolute"),
        ("/srv/modèles", "not printable ASCII"),
        (" /srv/models", "not absolute"),
        ("/srv/models ", "space"),
    ],
)
def test_host_paths_are_absolute_normalized_ascii(name, path, why):
    (msg,) = SCHEMA.check(name, path)
    assert why in msg and "\n" not in msg, msg


@pytest.mark.parametrize(
    "value, ok",
    [
        ("qwen2.5-7b", True),
        ("Qwen/Qwen2.5-7B-Instruct", True),
        ("tiny", True),
        ("../etc", False),
        ("/srv/x", False),
        ("a/../b", False),
        ("a//b", False),
        ("a/", False),
        (".versions", False),
        (".staging/x", False),
        ("a/.hidden", False),
        ("-rf", False),
        ("a b", False),
        ("x" * 129, False),
    ],
)
def test_model_name_is_a_folder_inside_model_dir(value, ok):
    assert (SCHEMA.check("model_name", value) == []) is ok


@pytest.mark.parametrize(
    "value, ok",
    [
        ("vllm-0.11.0", True),
        ("venv", True),
        ("a/b", False),
        ("..", False),
        (".", False),
        ("current", False),
        ("previous", False),
        ("wheelhouse", False),
        ("-x", False),
        ("", False),
    ],
)
def test_venv_name_is_one_plain_folder(value, ok):
    assert (SCHEMA.check("vllm_venv_name", value) == []) is ok


@pytest.mark.parametrize(
    "value, ok",
    [
        ("/data/models/qwen", True),
        ("models/qwen", True),
        ("~/models/qwen", True),
        ("gpu01:/srv/weights/qwen", True),
        ("-e ssh", False),
        ("--rsh=x:/y", False),
        ("gpu01:/srv/../etc", False),
        ("gpu01:srv/w", False),
        ("/data/../etc", False),
        ("../models", False),
        ("/data/models/", False),
        ("-gpu:/x", False),
        ("a b:/x", False),
    ],
)
def test_model_source(value, ok):
    assert (SCHEMA.check("model_source", value) == []) is ok


@pytest.mark.parametrize(
    "value, ok",
    [
        ("~/.ssh/id_ed25519", True),
        ("secrets/key", True),
        ("./key", True),
        ("../keys/id", True),
        ("/etc/vfleet/known_hosts", True),
        ("-oProxyCommand=x", False),
        ("keys/../../x", False),
        ("keys//id", False),
        ("keys/", False),
    ],
)
def test_controller_paths(value, ok):
    for name in ("ssh_key_file", "known_hosts_file", "vllm_wheelhouse", "api_key_file"):
        assert (SCHEMA.check(name, value) == []) is ok, name


# ------------------------------------------------------------------------------ unit names
@pytest.mark.parametrize(
    "name", sorted(RESERVED_SERVICE_NAMES) + [p + "x" for p in RESERVED_SERVICE_PREFIXES if not p.endswith("@")]
)
def test_service_name_is_never_a_distribution_unit(name):
    msgs = SCHEMA.check("service_name", name)
    assert msgs and "pick a name of your own, e.g. vllm-<model>" in msgs[-1], msgs


@pytest.mark.parametrize(
    "name, ok",
    [
        ("vllm", True),
        ("vllm-qwen", True),
        ("vllm_b", True),
        ("vllm@a", True),
        ("vllm@", False),
        ("vllm.", False),
        ("-x", False),
        ("a b", False),
        ("x" * 241, False),
    ],
)
def test_service_name_shape(name, ok):
    assert (SCHEMA.check("service_name", name) == []) is ok


# ------------------------------------------------------------------------ one-line messages
HOSTILE = [
    "x\ny",
    "x\r\ny",
    "\u2028",
    "a" * 5000,
    10**40,
    -(10**40),
    10**400,
    1.5,
    float("nan"),
    True,
    ["a\nb"] * 500,
    {"a\nb": "c\nd"},
    {"K": ["x"] * 300},
    "\udc80",
    "\x1b]0;t\x07",
]


@pytest.mark.parametrize("spec", VARIABLES, ids=lambda v: v.name)
def test_every_failure_is_one_short_line(spec):
    for value in HOSTILE:
        for msg in SCHEMA.check(spec.name, value):
            assert msg.startswith(f"vars.{spec.name}") and len(msg.splitlines()) == 1, msg
            assert len(msg) < 800 and "a" * 100 not in msg, msg


@pytest.mark.parametrize("name", ["api_key", "hf_token"])
def test_secret_values_never_shown_whatever_the_failure(name):
    for value in ("sk-LEAK\n", "sk-LEAK" * 1000, ["sk-LEAK"], {"sk-LEAK": 1}, "sk-LEAK\u202e"):
        msgs = SCHEMA.check(name, value)
        assert msgs and all("LEAK" not in m for m in msgs), msgs


def test_a_wrong_typed_value_is_named_by_its_kind_and_cut():
    (msg,) = SCHEMA.check("vllm_extra_args", {"k": "v" * 500})
    assert (
        msg.startswith("vars.vllm_extra_args: expected a list of non-empty strings, got a mapping {'k': 'vvv")
        and msg.endswith("...")
        and len(msg) < 140
    )


def test_an_odd_mapping_key_is_quoted_in_the_place():
    (msg,) = SCHEMA.check("vllm_env", {"A": 1, "B\nC": "x"})[-1:]
    assert "\n" not in msg


def test_coerce_leaves_a_long_digit_string_for_check_to_refuse():
    value = SCHEMA.coerce("max_num_seqs", "1" * 5000)
    assert value == "1" * 5000
    (msg,) = SCHEMA.check("max_num_seqs", value)
    assert msg.endswith("...") and len(msg) < 200
