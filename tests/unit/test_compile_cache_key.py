"""The compile-cache key (vfleet/roles/compile_cache/_key.py) from data, no host: equal for two
identical hosts, and for each field a change that makes it differ, with the one line a host
skipped or a cache dropped gets; the unit's paths rendered identically; no secret stored."""

from __future__ import annotations

import dataclasses
import re

import pytest

from tests.unit.configs import host_config
from vfleet.config.vllm_facts import flag_available
from vfleet.roles.compile_cache._key import FIELDS, CacheKey, difference, drop_line, engine_words, host_key, skip_line
from vfleet.roles.service._render import render_unit, unit_environment

BASE = {
    "vllm_version": "0.20.0",
    "model_name": "llama",
    "model_source": "/srv/src/llama",
    "api_key": "sk-one",
    "vllm_env": {"VLLM_USE_AOT_COMPILE": "1"},
}
GPU, MODEL = "NVIDIA H200", "llama-0123456789ab"


def cfg(name: str = "gpu01", **changed: object):
    """gpu01's config with `changed` (a value None: the variable left unset)."""
    merged = {**BASE, **changed}
    return host_config({k: v for k, v in merged.items() if v is not None}, name=name)


def key(name: str = "gpu01", gpu: str = GPU, model: str = MODEL, **changed: object) -> CacheKey:
    return host_key(cfg(name, **changed), gpu_model=gpu, model=model)


def test_identical_hosts_have_one_key() -> None:
    a, b = key("gpu01"), key("gpu02")
    assert a == b and a.digest == b.digest and difference(a, b) is None


# (what changes on the other host, the field named, words the line must hold)
CASES = [
    (
        {"gpu": "NVIDIA H100 80GB HBM3"},
        "gpu_model",
        "gpu_model differs (NVIDIA H200 in gpu01, NVIDIA H100 80GB HBM3 on gpu02)",
    ),
    (
        {"changed": {"vllm_version": "0.21.0"}},
        "vllm_version",
        "vllm_version differs (0.20.0 in gpu01, 0.21.0 on gpu02)",
    ),
    (
        {"model": "llama-fedcba987654"},
        "model",
        "model differs (llama-0123456789ab in gpu01, llama-fedcba987654 on gpu02)",
    ),
    (
        {"changed": {"max_model_len": 16384}},
        "argv",
        "argv differs ('--max-model-len 32768' in gpu01, '--max-model-len 16384' on gpu02)",
    ),
    (
        {"changed": {"vllm_env": {"VLLM_USE_AOT_COMPILE": "0"}}},
        "env",
        "env VLLM_USE_AOT_COMPILE differs ('1' in gpu01, '0' on gpu02)",
    ),
    (
        {"changed": {"api_key": "sk-two"}},
        "env",
        "env VLLM_API_KEY differs (one secret value in gpu01, another on gpu02)",
    ),
    (
        {"changed": {"service_name": "vllm-b"}},
        "cache_root",
        "cache_root differs (/var/cache/vllm/vllm in gpu01, /var/cache/vllm-b/vllm on gpu02)",
    ),
    (
        {"changed": {"vllm_venv_name": "vllm-0.20.0-b"}},
        "venv",
        "venv differs (/opt/vllm/vllm-0.20.0 in gpu01, /opt/vllm/vllm-0.20.0-b on gpu02)",
    ),
]


@pytest.mark.parametrize("change,field,detail", CASES, ids=[c[1] + "-" + str(i) for i, c in enumerate(CASES)])
def test_a_key_that_differs_names_its_field_in_one_line(change: dict, field: str, detail: str) -> None:
    base = key("gpu01", max_model_len=32768) if field == "argv" else key("gpu01")
    changed = change.get("changed", {})
    if field == "argv":
        changed = {"max_model_len": 16384}
    other = key("gpu02", gpu=change.get("gpu", GPU), model=change.get("model", MODEL), **changed)
    got = difference(base, other, have_is="gpu01", want_is="on gpu02")
    assert got == (field, detail)
    line = skip_line("gpu02", "gpu01", *got)
    assert line == f"gpu02: compile cache of gpu01 not copied: {detail}: gpu02 compiles its own ({field})"
    assert "\n" not in line and "sk-one" not in line and "sk-two" not in line
    # the digest names folders and is made of the stored form: two secrets look alike there
    assert (base.digest != other.digest) != ("secret" in detail)


def test_every_field_is_checked() -> None:
    assert {c[1] for c in CASES} == set(FIELDS) - {"home"}
    a = key()
    b = dataclasses.replace(a, home="HOME=/home/x XDG_CACHE_HOME=/home/x/.cache")
    assert difference(a, b)[0] == "home"


def test_paths_render_identically_and_are_what_the_unit_says() -> None:
    a, b = cfg("gpu01"), cfg("gpu02")
    assert unit_environment(a) == unit_environment(b)
    env = dict(unit_environment(a))
    assert env["VLLM_CACHE_ROOT"] == a.vllm_cache_root == "/var/cache/vllm/vllm"
    assert env["XDG_CACHE_HOME"] == a.cache_dir and env["HOME"] == a.state_dir
    line = re.search(r"^Environment=(.*)$", render_unit(a, flag_available), re.M).group(1)
    assert line == " ".join(f"{k}={v}" for k, v in unit_environment(a))
    assert key().cache_root == a.vllm_cache_root and key().home == f"HOME={a.state_dir} XDG_CACHE_HOME={a.cache_dir}"


def test_listen_address_does_not_split_the_key() -> None:
    assert engine_words(["vllm", "serve", "/m", "--host", "10.0.0.1", "--port=8001", "--dtype", "bf16"]) == (
        "vllm",
        "serve",
        "/m",
        "--dtype",
        "bf16",
    )
    assert key("gpu01") == key("gpu02", vllm_host="10.0.0.2", vllm_port=8001)


def test_stored_form_holds_no_secret_and_reads_back() -> None:
    a = key()
    stored = a.stored()
    assert stored["env"]["VLLM_API_KEY"] == "secret" and "sk-one" not in str(stored)
    back = CacheKey.from_stored(stored)
    assert back.digest == a.digest
    assert difference(back, a) is None  # a stored secret matches any secret
    assert difference(back, key(api_key=None))[0] == "env"  # ...but not none
    line = drop_line("gpu01", *difference(back, key(vllm_version="0.21.0")))
    assert line == (
        "gpu01: compile cache dropped: vllm_version differs (0.20.0 in the cache, 0.21.0 here): "
        "gpu01 compiles its own (vllm_version)"
    )
