"""vfleet's own clients of a TLS gateway trust the inventory's CA (HostConfig.gateway_verify):
smoke, bench, eval and the printed curl line; a bench run goes through a real HTTPS listener."""

from __future__ import annotations

import shlex
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.configs import host_config
from tests.unit.listeners import bench_inventory
from tests.unit.test_bench_e2e import KEY, FakeVLLM
from vfleet.cli.deploy_steps import curl_line
from vfleet.clients import smoke
from vfleet.clients.eval import targets as eval_targets

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> dict[str, str]:
    """A self-signed certificate for 127.0.0.1 (openssl), its key, and the certificate as the CA."""
    d = tmp_path_factory.mktemp("tls dir")  # a space: the curl line must quote the path
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
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    (d / "gw.key").chmod(0o600)
    return {
        "gateway_tls_cert_file": str(d / "gw.crt"),
        "gateway_tls_key_file": str(d / "gw.key"),
        "gateway_tls_ca_file": str(d / "gw.crt"),
    }


def test_smoke_eval_and_curl_carry_the_ca(tls):
    cfg = host_config(tls, name="gw1", group="gateways", address="10.0.0.9")
    ca = tls["gateway_tls_ca_file"]
    target = smoke.gateway_target(cfg)
    assert target.base_url == "https://10.0.0.9:80" and target.verify == ca
    assert smoke.host_target(cfg).verify is True  # vLLM itself stays plain HTTP
    evt = eval_targets.gateway_target(cfg)
    assert evt.base_url == "https://10.0.0.9:80" and evt.verify == ca and "verify" not in evt.to_dict()
    line = curl_line(cfg, "tiny")
    assert f"--cacert {shlex.quote(ca)} " in line and " https://10.0.0.9:80/v1/chat/completions " in line


def test_without_tls_nothing_changes():
    cfg = host_config({}, name="gw1", group="gateways", address="10.0.0.9")
    assert smoke.gateway_target(cfg).verify is True and "--cacert" not in curl_line(cfg, "tiny")


@pytest.mark.parametrize("with_ca", [True, False])
def test_bench_reaches_a_tls_gateway_with_the_inventorys_ca(tls, tmp_path, with_ca):
    """With the CA, bench measures through HTTPS; without it, the certificate is refused (so
    the CA really is what the client trusts)."""
    with FakeVLLM() as fake:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls["gateway_tls_cert_file"], tls["gateway_tls_key_file"])
        gateway = fake.servers[0]
        gateway.socket = context.wrap_socket(gateway.socket, server_side=True)
        more = {k: f"'{v}'" for k, v in tls.items() if with_ca or k != "gateway_tls_ca_file"}
        inv = bench_inventory(tmp_path, fake.port, fake.vllm_port, KEY, **more)
        args = [
            "bench",
            "--inventory",
            str(inv),
            "--concurrency",
            "1",
            "--requests",
            "3",
            "--warmup",
            "0",
            "--output-len",
            "4",
            "--input-len",
            "8",
            "--out",
            str(tmp_path / "out"),
        ]
        p = subprocess.run(
            [sys.executable, "-m", "vfleet.cli", *args], capture_output=True, text=True, timeout=180, cwd=ROOT
        )
    out = p.stdout + p.stderr
    assert f"https://127.0.0.1:{fake.port}" in out
    if with_ca:
        assert p.returncode == 0 and len(fake.prompts) == 3, out
    else:
        assert p.returncode != 0 and fake.prompts == [] and "CERTIFICATE_VERIFY_FAILED" in out, out
