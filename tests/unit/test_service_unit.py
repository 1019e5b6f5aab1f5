"""vLLM systemd unit rendering (vfleet/roles/service/_render.py): ExecStart, the unit's settings and
names, the stop timeout, and what the renderer refuses to write into a unit.

Every config is a real HostConfig (tests/unit/configs.py: inventory loader + schema, so the
defaults are the schema's and invalid values are refused where an operator's would be)."""

import dataclasses
import re

import pytest

from tests.unit.configs import host_config
from tests.unit.service_cases import ENGINE, LAB, argv_of, exec_words, lab, stub_flag_available
from vfleet.engine.errors import InventoryError
from vfleet.roles.service import _render as sr


def test_unit_execstart_round_trips():
    for cfg in (lab(), lab(**ENGINE)):
        unit = sr.render_unit(cfg, stub_flag_available)
        assert exec_words(unit) == argv_of(cfg)


def test_exec_lines_one_flag_per_line():
    argv = [
        "/v/bin/python",
        "-m",
        "mod",
        "--model",
        "/m",
        "--enforce-eager",
        "--port",
        "8000",
        "--no-enable-prefix-caching",
    ]
    assert sr.exec_lines(argv) == [
        ["/v/bin/python", "-m", "mod"],
        ["--model", "/m"],
        ["--enforce-eager"],
        ["--port", "8000"],
        ["--no-enable-prefix-caching"],
    ]


def test_stop_timeout_is_drain_plus_margin():
    cfg = lab(shutdown_timeout=120)
    assert sr.stop_timeout(cfg, stub_flag_available) == 120 + sr.STOP_TIMEOUT_MARGIN_SEC == 150
    unit = sr.render_unit(cfg, stub_flag_available)
    assert "TimeoutStopSec=150" in unit
    assert "KillSignal=SIGTERM" in unit and "KillMode=mixed" in unit
    # a version that cannot drain gets the plain default
    assert (
        sr.stop_timeout(lab(vllm_version="0.17.0", shutdown_timeout=120), stub_flag_available)
        == sr.STOP_TIMEOUT_DEFAULT_SEC
    )


def test_unit_settings():
    unit = sr.render_unit(lab(), stub_flag_available)
    for line in (
        "After=network-online.target",
        "Wants=network-online.target",
        "Restart=on-failure",
        "RestartSec=10",
        "StartLimitIntervalSec=600",
        "StartLimitBurst=5",
        "User=vllm",
        "Group=vllm",
        "LimitNOFILE=65535",
        "EnvironmentFile=/etc/vllm/vllm.env",
        "WantedBy=multi-user.target",
        "StateDirectory=vllm",
        "CacheDirectory=vllm",
        "WorkingDirectory=/var/lib/vllm",
        "SyslogIdentifier=vllm",
    ):
        assert re.search(rf"^{re.escape(line)}$", unit, re.M), line
    # RestartSteps= needs systemd >= 254; Debian 12 has 252; unknown: left out
    assert "RestartSteps" not in unit
    for version in (None, 252, 253):
        assert "RestartSteps" not in sr.render_unit(lab(), stub_flag_available, systemd_version=version), version
    for version in (254, 255):
        newer = sr.render_unit(lab(), stub_flag_available, systemd_version=version)
        assert "RestartSteps=5" in newer and "RestartMaxDelaySec=120" in newer, version
    rs = sr.render_service(lab(), stub_flag_available, systemd_version=255)
    assert "RestartSteps=5" in rs.unit_text


def test_names_and_state_follow_service_name():
    cfg = lab(service_name="vllm-a")
    rs = sr.render_service(cfg, stub_flag_available)
    assert rs.unit_path == "/etc/systemd/system/vllm-a.service"
    assert rs.env_path == "/etc/vllm/vllm-a.env"
    for line in (
        "EnvironmentFile=/etc/vllm/vllm-a.env",
        "StateDirectory=vllm-a",
        "CacheDirectory=vllm-a",
        "WorkingDirectory=/var/lib/vllm-a",
        "SyslogIdentifier=vllm-a",
        "Environment=HOME=/var/lib/vllm-a XDG_CACHE_HOME=/var/cache/vllm-a "
        "VLLM_CACHE_ROOT=/var/cache/vllm-a/vllm HF_HOME=/var/cache/vllm-a/huggingface",
    ):
        assert re.search(rf"^{re.escape(line)}$", rs.unit_text, re.M), line
    # nothing of the default service's state is shared with a second service on the host
    # (User=/Group= are the service account, vllm_user/vllm_group, not the service's name)
    assert not re.search(
        r"/var/(lib|cache)/vllm(/|\s|$)|^(State|Cache)Directory=vllm$"
        r"|^SyslogIdentifier=vllm$",
        rs.unit_text,
        re.M,
    )
    # an explicit vllm_env_file wins over the derived one
    rs = sr.render_service(lab(service_name="vllm-a", vllm_env_file="/etc/vllm/a.env"), stub_flag_available)
    assert rs.env_path == "/etc/vllm/a.env" and "EnvironmentFile=/etc/vllm/a.env\n" in rs.unit_text
    assert sr.UNIT_FILE_MODE == 0o644 and sr.ENV_FILE_MODE == 0o600


def test_trailing_backslash_in_description_refused():
    with pytest.raises(sr.RenderError, match="backslash"):
        sr.render_unit(lab(served_model_name="x\\"), stub_flag_available)


@pytest.mark.parametrize(
    "key, value",
    [
        ("vllm_version", None),
        ("model_name", None),
        ("vllm_root", "opt/vllm"),
        ("model_path", "relative/x"),
        ("model_dir", "srv/models"),
        ("vllm_env_file", "etc/vllm.env"),
        ("vllm_user", "root; rm"),
        ("vllm_group", "Bad Group"),
        ("service_name", "a b"),
        ("service_name", "-x"),
        ("service_name", "--now"),
        ("vllm_env", {"BAD-NAME": "x"}),
        ("vllm_env", {"X": True}),
        ("vllm_port", 70000),
        ("dtype", "fp64"),
        ("kv_cache_dtype", "fp4"),
        ("block_size", 7),
        ("enable_chunked_prefill", "maybe"),
        ("quantization", "awq; rm"),
        ("pipeline_parallel_size", 0),
        ("gpu_memory_utilization", 1.5),
    ],
)
def test_bad_inventory_values_refused_by_the_schema(key, value):
    with pytest.raises(InventoryError) as e:
        host_config({**LAB, key: value})
    assert key in str(e.value)


def test_renderer_still_refuses_what_it_cannot_render():
    """Values a HostConfig can hold but a unit cannot express (checked again by the renderer,
    whoever built the config)."""
    cfg = lab()
    for broken in (
        dataclasses.replace(cfg, vllm_version=None),
        dataclasses.replace(cfg, model_name=None, model_path=None),
    ):
        with pytest.raises(sr.RenderError, match="required"):
            sr.render_service(broken, stub_flag_available)
    with pytest.raises(sr.RenderError, match="vllm_user"):
        sr.render_unit(dataclasses.replace(cfg, vllm_user="root; rm"), stub_flag_available)
    with pytest.raises(sr.RenderError, match="control character"):
        sr.render_unit(dataclasses.replace(cfg, served_model_name="a\nExecStartPre=/bin/sh"), stub_flag_available)


def test_environment_file_path_is_unquoted_and_checked():
    unit = sr.render_unit(lab(vllm_env_file="/etc/vllm/ok@a+b-c_d.v1.env"), stub_flag_available)
    assert re.search(r"^EnvironmentFile=/etc/vllm/ok@a\+b-c_d\.v1\.env$", unit, re.M)
    # the schema lets these through (absolute paths); systemd's EnvironmentFile= takes no
    # quoting, so the renderer refuses them rather than write a path systemd ignores
    for path in ("/etc/vllm/a b.env", "/etc/vllm/%n.env", '/etc/vllm/"q".env', "/etc/vllm/$x", "/etc/vllm/ü.env"):
        cfg = dataclasses.replace(lab(), env_file=path)  # the schema refuses ü already
        with pytest.raises(sr.RenderError, match="vllm_env_file"):
            sr.render_unit(cfg, stub_flag_available)
        with pytest.raises(sr.RenderError, match="vllm_env_file"):
            sr.render_service(cfg, stub_flag_available)


def test_rendering_is_deterministic():
    a = sr.render_service(lab(api_key="k"), stub_flag_available, nccl_env={"NCCL_A": "1"})
    b = sr.render_service(lab(api_key="k"), stub_flag_available, nccl_env={"NCCL_A": "1"})
    assert (a.unit_text, a.env_text) == (b.unit_text, b.env_text)
