"""A gateway's tenants and TLS files (vfleet/config/gateway_access.py), through the real loader:
a tenant list becomes typed values with its keys read once, and every hostile value is one line
naming the key and the fix, never a key."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.cli_run import vfleet_in_process
from tests.unit.configs import LAB_VARS, host_config
from vfleet.config import gateway_access
from vfleet.config.fleet import Fleet
from vfleet.config.gateway_access import GatewayTls, Tenant
from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import InventoryError
from vfleet.engine.inventory import load_inventory

KEY_A = "search-0123456789abcdef-AAAA"
KEY_B = "batch-0123456789abcdef-BBBB"
FLEET_KEY = "fleet-0123456789abcdef-KKKK"


def key_file(folder: Path, name: str, key: str, mode: int = 0o600) -> str:
    path = folder / f"{name}.key"
    path.write_text(key + "\n")
    path.chmod(mode)
    return str(path)


def write_inventory(
    folder: Path,
    gw_vars: dict[str, Any],
    *,
    gateways: tuple[str, ...] = ("gw1",),
    vllm_vars: dict[str, Any] | None = None,
) -> Path:
    data = {
        "all": {
            "children": {
                "vllm": {"hosts": {"gpu01": {**LAB_VARS, **(vllm_vars or {})}}},
                "gateways": {"hosts": {g: {} for g in gateways}, "vars": gw_vars},
            }
        }
    }
    path = folder / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def fleet(folder: Path, gw_vars: dict[str, Any], **kw: Any) -> Fleet:
    return Fleet.of(load_inventory(write_inventory(folder, gw_vars, **kw), schema=SCHEMA))


def problems(folder: Path, gw_vars: dict[str, Any], **kw: Any) -> list[str]:
    with pytest.raises(InventoryError) as exc:
        fleet(folder, gw_vars, **kw)
    return exc.value.errors


def one_problem(folder: Path, gw_vars: dict[str, Any], **kw: Any) -> str:
    (msg,) = problems(folder, gw_vars, **kw)
    assert len(msg.splitlines()) == 1 and "inventory.yaml" in msg, msg
    for key in (KEY_A, KEY_B, FLEET_KEY, KEY_A[:12]):
        assert key not in msg, msg
    return msg


# ---------------------------------------------------------------------------- typed values
def test_a_tenant_list_loads_into_typed_values(tmp_path, monkeypatch):
    monkeypatch.setenv("BATCH_KEY", KEY_B)
    cfg = host_config(
        {
            "gateway_tenants": [
                {
                    "name": "search",
                    "key_file": key_file(tmp_path, "search", KEY_A),
                    "rate": "10r/s",
                    "burst": 20,
                    "models": ["tiny", "Qwen/Qwen2.5-7B"],
                    "max_concurrent": 8,
                    "max_tokens": 512,
                },
                {"name": "batch", "key_env": "BATCH_KEY", "rate": "60r/m"},
            ]
        },
        name="gw1",
        group="gateways",
    )
    assert cfg.gateway_tenants == (
        Tenant("search", KEY_A, "10r/s", 20, ("tiny", "Qwen/Qwen2.5-7B"), 8, 512),
        Tenant("batch", KEY_B, "60r/m"),
    )
    batch = cfg.gateway_tenants[1]
    assert (batch.burst, batch.models, batch.max_concurrent, batch.max_tokens) == (0, None, None, None)
    assert batch.key_sha256 == hashlib.sha256(KEY_B.encode()).hexdigest()
    assert KEY_A not in repr(cfg) and KEY_B not in repr(cfg.gateway_tenants)
    assert cfg.gateway_tls is None and cfg.gateway_url.startswith("http://") and cfg.gateway_verify is True


def test_no_tenants_is_todays_gateway(tmp_path):
    cfg = fleet(tmp_path, {}).config("gw1")
    assert cfg.gateway_tenants == () and cfg.gateway_tls is None and cfg.gateway_fallback_model is None


def test_a_vllm_host_reads_no_key(tmp_path):
    """Tenants set for every host (vars of all) are read for the gateways only."""
    path = write_inventory(tmp_path, {})
    data = yaml.safe_load(path.read_text())
    data["all"]["vars"] = {"gateway_tenants": [{"name": "a", "key_env": "NOT_SET_ANYWHERE", "rate": "1r/s"}]}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InventoryError) as exc:
        Fleet.of(load_inventory(path, schema=SCHEMA))
    assert len(exc.value.errors) == 1 and "NOT_SET_ANYWHERE" in exc.value.errors[0]


def test_keys_are_read_once_for_many_gateways(tmp_path, monkeypatch):
    reads: list[Path] = []
    real = gateway_access.read_secret_file

    def counting(path: Path, **kw: Any):
        reads.append(path)
        return real(path, **kw)

    monkeypatch.setattr(gateway_access, "read_secret_file", counting)
    tenants = [{"name": "search", "key_file": key_file(tmp_path, "search", KEY_A), "rate": "1r/s"}]
    f = fleet(tmp_path, {"gateway_tenants": tenants}, gateways=("gw1", "gw2", "gw3"))
    assert [f.config(g).gateway_tenants[0].key for g in ("gw1", "gw2", "gw3")] == [KEY_A] * 3
    assert reads == [tmp_path / "search.key"]


# ------------------------------------------------------------------------- hostile values
def tenant(**fields: Any) -> dict[str, Any]:
    return {"name": "search", "rate": "10r/s", **fields}


@pytest.mark.parametrize(
    "fields, where, words",
    [
        ({"key_env": "SEARCH_KEY", "key_file": "/etc/k"}, "gateway_tenants[0]:", "set exactly one"),
        ({}, "gateway_tenants[0]:", "neither key_file nor key_env"),
        ({"key_file": "keys/search.key"}, "gateway_tenants[0].key_file:", "write it absolute"),
        ({"key_file": "/nonexistent/search.key"}, "gateway_tenants[0].key_file:", "no such file"),
        ({"key_env": "VFLEET_TEST_UNSET_KEY"}, "gateway_tenants[0].key_env:", "not set or empty"),
    ],
)
def test_where_the_key_comes_from(tmp_path, fields, where, words):
    msg = one_problem(tmp_path, {"gateway_tenants": [tenant(**fields)]})
    assert f"vars.{where}" in msg and words in msg, msg


@pytest.mark.parametrize(
    "key, words",
    [
        ("short-key", "9 characters long"),
        (KEY_A[:8] + " " + KEY_A[8:], "no client can send"),
        (KEY_A + "\u00e9", "no client can send"),
    ],
)
def test_a_weak_or_unsendable_key_is_refused_unseen(tmp_path, key, words):
    path = key_file(tmp_path, "search", key)
    msg = one_problem(tmp_path, {"gateway_tenants": [tenant(key_file=path)]})
    assert "vars.gateway_tenants[0].key_file:" in msg and words in msg and "openssl rand" in msg, msg
    assert key not in msg


def test_a_key_file_of_two_lines_is_refused_unseen(tmp_path):
    path = tmp_path / "two.key"
    path.write_text(f"{KEY_A}\n{KEY_B}\n")
    msg = one_problem(tmp_path, {"gateway_tenants": [tenant(key_file=str(path))]})
    assert "vars.gateway_tenants[0].key_file:" in msg and "more than one line" in msg, msg


def test_duplicate_tenant_names(tmp_path):
    tenants = [tenant(key_file=key_file(tmp_path, "a", KEY_A)), tenant(key_file=key_file(tmp_path, "b", KEY_B))]
    msg = one_problem(tmp_path, {"gateway_tenants": tenants})
    assert "vars.gateway_tenants[1].name: tenant 'search' is declared twice (also gateway_tenants[0])" in msg


def test_two_tenants_with_one_key_are_both_named(tmp_path, monkeypatch):
    monkeypatch.setenv("BATCH_KEY", KEY_A)
    tenants = [
        tenant(key_file=key_file(tmp_path, "a", KEY_A)),
        {"name": "batch", "key_env": "BATCH_KEY", "rate": "1r/s"},
    ]
    msg = one_problem(tmp_path, {"gateway_tenants": tenants})
    assert "vars.gateway_tenants[1].key_env: tenants 'search' (gateway_tenants[0]) and 'batch'" in msg
    assert "give each tenant its own key" in msg


def test_a_tenant_key_equal_to_the_gateways_api_key(tmp_path):
    gw = {"api_key": FLEET_KEY, "gateway_tenants": [tenant(key_file=key_file(tmp_path, "a", FLEET_KEY))]}
    msg = one_problem(tmp_path, gw)
    assert "vars.gateway_tenants[0].key_file: tenant 'search' has the same key as the api_key of host 'gw1'" in msg


def test_a_tenant_key_equal_to_a_vllm_hosts_api_key(tmp_path):
    (msg,) = problems(
        tmp_path,
        {"gateway_tenants": [tenant(key_file=key_file(tmp_path, "a", FLEET_KEY))]},
        vllm_vars={"api_key": FLEET_KEY},
    )
    assert "host 'gw1': vars.gateway_tenants: tenant 'search' has the same key as the api_key of host 'gpu01'" in msg
    assert FLEET_KEY not in msg


@pytest.mark.parametrize(
    "row, words",
    [
        (tenant(name="vfleet", key_env="X"), "vars.gateway_tenants[0].name: expected"),
        (tenant(name="Search Team", key_env="X"), "vars.gateway_tenants[0].name: expected"),
        (tenant(key=KEY_A), "vars.gateway_tenants[0]: unknown key 'key'"),
        ({"name": "search", "key_env": "X"}, "vars.gateway_tenants[0]: the key 'rate' is missing"),
        (tenant(key_env="X", models=["qwen 7b"]), "vars.gateway_tenants[0].models[0]: expected"),
        (tenant(key_env="X", rate="10r/h"), "vars.gateway_tenants[0].rate: expected"),
        (tenant(key_env="X", max_tokens=0), "vars.gateway_tenants[0].max_tokens: expected"),
    ],
)
def test_the_schema_refuses_bad_fields(tmp_path, row, words):
    msg = one_problem(tmp_path, {"gateway_tenants": [row]})
    assert words in msg, msg
    if row.get("name") == "vfleet":
        assert "fleet's own api_key" in msg


def test_a_fallback_model_is_never_the_model_itself(tmp_path):
    msg = one_problem(tmp_path, {}, vllm_vars={"gateway_fallback_model": "tiny"})
    assert "vars.gateway_fallback_model is 'tiny', the model itself" in msg
    assert (
        fleet(tmp_path, {}, vllm_vars={"gateway_fallback_model": "tiny-awq"}).config("gpu01").gateway_fallback_model
        == "tiny-awq"
    )


def test_the_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    path = write_inventory(tmp_path, {"gateway_tenants": [tenant(key_file="keys/a.key")]})
    assert vfleet_in_process("inventory", "--inventory", str(path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "vars.gateway_tenants[0].key_file" in err


def test_a_key_file_others_can_read_warns(tmp_path, capsys):
    path = key_file(tmp_path, "a", KEY_A, mode=0o644)
    f = fleet(tmp_path, {"gateway_tenants": [tenant(key_file=path)]})
    (line,) = f.warnings
    assert "vars.gateway_tenants[0].key_file" in line and "chmod 600" in line and KEY_A not in line
    inv = write_inventory(tmp_path, {"gateway_tenants": [tenant(key_file=path)]})
    assert vfleet_in_process("inventory", "--inventory", str(inv)) == 0
    assert "warning:" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ TLS
@pytest.fixture(scope="module")
def pems(tmp_path_factory) -> dict[str, str]:
    """A real self-signed certificate and its key (openssl), as an operator would make them."""
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            str(d / "gw.key"),
            "-out",
            str(d / "gw.crt"),
            "-days",
            "2",
            "-subj",
            "/CN=gw1",
        ],
        check=True,
        capture_output=True,
    )
    (d / "gw.key").chmod(0o600)
    return {"cert": str(d / "gw.crt"), "key": str(d / "gw.key"), "ca": str(d / "gw.crt")}


def tls_vars(pems: dict[str, str], *which: str) -> dict[str, str]:
    return {f"gateway_tls_{w}_file": pems[w] for w in which}


def test_tls_makes_the_gateway_https_and_its_clients_trust_the_ca(pems):
    cfg = host_config(tls_vars(pems, "cert", "key", "ca"), name="gw1", group="gateways", address="10.0.0.9")
    assert cfg.gateway_tls == GatewayTls(pems["cert"], pems["key"], pems["ca"])
    assert cfg.gateway_url == "https://10.0.0.9:80" and cfg.gateway_verify == pems["ca"]
    cert, key = cfg.gateway_tls.read()
    assert cert.startswith("-----BEGIN CERTIFICATE-----") and "PRIVATE KEY-----" in key
    no_ca = host_config(tls_vars(pems, "cert", "key"), name="gw1", group="gateways")
    assert no_ca.gateway_verify is True and no_ca.gateway_url.startswith("https://")


@pytest.mark.parametrize(
    "which, words",
    [
        (("cert",), "vars.gateway_tls_cert_file is set but gateway_tls_key_file is not"),
        (("key",), "vars.gateway_tls_key_file is set but gateway_tls_cert_file is not"),
        (("ca",), "vars.gateway_tls_ca_file is set but the gateway has no TLS"),
    ],
)
def test_tls_files_both_or_neither(tmp_path, pems, which, words):
    assert words in one_problem(tmp_path, tls_vars(pems, *which))


@pytest.mark.parametrize(
    "var, text, words",
    [
        ("cert", "hello\n", "not a PEM certificate"),
        ("key", "-----BEGIN CERTIFICATE-----\nx\n", "not a PEM private key"),
        ("key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nx\n", "decrypt it"),
        ("key", "", "the file is empty"),
    ],
)
def test_a_tls_file_that_is_not_what_it_says(tmp_path, pems, var, text, words):
    bad = tmp_path / f"bad.{var}"
    bad.write_text(text)
    bad.chmod(0o600)
    msg = one_problem(tmp_path, {**tls_vars(pems, "cert", "key"), f"gateway_tls_{var}_file": str(bad)})
    assert f"vars.gateway_tls_{var}_file: cannot use '{bad}'" in msg and words in msg, msg


def test_a_tls_path_that_is_a_folder_or_relative(tmp_path, pems):
    msg = one_problem(tmp_path, {**tls_vars(pems, "key"), "gateway_tls_cert_file": str(tmp_path)})
    assert "not a regular file" in msg
    msg = one_problem(tmp_path, {**tls_vars(pems, "key"), "gateway_tls_cert_file": "tls/gw.crt"})
    assert "vars.gateway_tls_cert_file: 'tls/gw.crt' is a relative path" in msg


def test_read_names_the_file_that_went_away(tmp_path, pems):
    tls = GatewayTls(str(tmp_path / "gone.crt"), pems["key"])
    with pytest.raises(InventoryError) as exc:
        tls.read()
    assert exc.value.errors == [f"vars.gateway_tls_cert_file: cannot use '{tmp_path / 'gone.crt'}': no such file"]


def test_a_tls_key_others_can_read_warns(tmp_path, pems):
    loose = tmp_path / "loose.key"
    loose.write_text(Path(pems["key"]).read_text())
    loose.chmod(0o644)
    f = fleet(tmp_path, {**tls_vars(pems, "cert"), "gateway_tls_key_file": str(loose)})
    (line,) = f.warnings
    assert "vars.gateway_tls_key_file" in line and "chmod 600" in line
    assert f.config("gw1").gateway_tls is not None
