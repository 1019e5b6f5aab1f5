"""testinfra suite for a deployed fleet (run by `vfleet verify`, one pass per host).
What it asserts is the deployed state an operator relies on, not how vfleet got there."""

from __future__ import annotations

import json
import os
import shlex

import pytest

HOSTS = json.loads(open(os.environ["VFLEET_VERIFY_HOSTS"]).read())


def info(host) -> dict:
    return HOSTS[host.backend.get_hostname()]


def vllm_host(host) -> bool:
    return info(host)["serves"]


def gateway_host(host) -> bool:
    return info(host)["is_gateway"]


def test_vllm_unit_enabled_and_active(host):
    if not vllm_host(host):
        pytest.skip("not in group vllm")
    unit = host.service(info(host)["unit"])
    assert unit.is_enabled
    assert unit.is_running


def test_vllm_port_listening(host):
    if not vllm_host(host):
        pytest.skip("not in group vllm")
    port = int(info(host)["vllm_port"])
    assert host.socket(f"tcp://0.0.0.0:{port}").is_listening or host.socket(f"tcp://:::{port}").is_listening


def test_venv_version_is_pinned(host):
    if not vllm_host(host):
        pytest.skip("not in group vllm")
    v = info(host)
    marker = host.file(f"{v['current_link']}/.vfleet-install.json")
    assert marker.exists, "no verified install behind <vllm_root>/current"
    data = json.loads(marker.content_string)
    assert str(data["verified"]["version"]).startswith(str(v["vllm_version"]))


def test_weights_match_manifest(host):
    if not vllm_host(host):
        pytest.skip("not in group vllm")
    live = info(host)["model_path"]
    assert host.file(live).is_symlink
    cmd = host.run(f"cd -- {shlex.quote(live + '/')} && sha256sum --quiet --strict -c MANIFEST.sha256")
    assert cmd.rc == 0, cmd.stderr or cmd.stdout


def test_env_file_is_private(host):
    if not vllm_host(host):
        pytest.skip("not in group vllm")
    f = host.file(info(host)["env_file"])
    assert f.exists and f.mode == 0o600 and f.user == "root"


def test_nginx_config_valid_and_running(host):
    if not gateway_host(host):
        pytest.skip("not in group gateways")
    assert host.run("nginx -t").rc == 0
    assert host.service("nginx").is_running
    port = int(info(host)["gateway_port"])
    assert host.socket(f"tcp://0.0.0.0:{port}").is_listening
