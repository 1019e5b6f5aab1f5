"""vLLM unit + environment file rendering (roles/service_render.py, roles/vllm_argv.py).

Every config is a real HostConfig (tests/unit/configs.py: inventory loader + schema, so the
defaults are the schema's and invalid values are refused where an operator's would be)."""
import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import traceback
from pathlib import Path

import pytest

from fleet.errors import InventoryError
from roles import service_render as sr
from roles.hostconfig import HostConfig
from roles.variables import SCHEMA
from roles.vllm_argv import ArgvError, vllm_argv
from tests.unit.configs import host_config
from tests.unit.test_quoting import systemd_read_env_value, systemd_read_words

HELP = Path(__file__).resolve().parents[2] / "roles" / "data" / "vllm-0.32.0-help.txt"
SECRET = "sk-lab 'very' \"secret\" $HOME %n;"
HF_SECRET = "hf_lab 'gated' $PATH %i"


def _flags_from_help(path: Path) -> set[str]:
    flags = set()
    for line in path.read_text().splitlines():
        s = line.strip()
        if s.startswith("--"):
            for part in s.split(", "):
                flags.add(part.split()[0])
    return flags


def _choices_from_help(path: Path, flag: str) -> set[str]:
    m = re.search(rf"^\s+{re.escape(flag)} \{{([^}}]*)\}}", path.read_text(), re.M)
    assert m, flag
    return set(m.group(1).split(","))


FLAGS_0_32 = _flags_from_help(HELP)          # ground truth of vLLM 0.32.0 (--help=all)
FLAGS_OLD = FLAGS_0_32 - {"--shutdown-timeout"}


def stub_flag_available(flag: str, version: str) -> bool:
    """Local stand-in for roles.vllm_facts.flag_available in these tests."""
    return flag in (FLAGS_0_32 if version == "0.32.0" else FLAGS_OLD)


LAB = {
    "vllm_version": "0.32.0",
    "vllm_root": "/opt/vllm",
    "model_dir": "/srv/models",
    "model_name": "tiny",
    "vllm_port": 8000,
    "dtype": "bfloat16",
    "max_model_len": 2048,
    "shutdown_timeout": 30,
    "cpu_kvcache_space_gib": 1,
}

# every engine variable set to something other than vLLM's default
ENGINE = {
    "tensor_parallel_size": 2, "pipeline_parallel_size": 2, "gpu_memory_utilization": 0.85,
    "max_num_seqs": 64, "max_num_batched_tokens": 8192, "enable_chunked_prefill": True,
    "enable_prefix_caching": False, "enforce_eager": True, "quantization": "awq",
    "kv_cache_dtype": "fp8", "block_size": 32, "trust_remote_code": True,
}


def lab(**extra) -> HostConfig:
    return host_config({**LAB, **extra})


def argv_of(cfg: HostConfig, flags=stub_flag_available) -> list[str]:
    return vllm_argv(cfg, flags).argv


def exec_words(unit: str) -> list[str]:
    """ExecStart= of a rendered unit, continuation lines joined, read like systemd does."""
    m = re.search(r"^ExecStart=((?:.*\\\n)*.*)$", unit, re.M)
    assert m, unit
    return systemd_read_words(m.group(1).replace("\\\n", " "))


def value_of(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_help_ground_truth_has_the_flags_we_render():
    for flag in ("--model", "--served-model-name", "--host", "--port", "--dtype",
                 "--tensor-parallel-size", "--pipeline-parallel-size", "--max-model-len",
                 "--gpu-memory-utilization", "--max-num-seqs", "--max-num-batched-tokens",
                 "--enable-chunked-prefill", "--no-enable-chunked-prefill",
                 "--enable-prefix-caching", "--no-enable-prefix-caching", "--enforce-eager",
                 "--quantization", "--kv-cache-dtype", "--block-size", "--trust-remote-code",
                 "--shutdown-timeout", "--api-key"):
        assert flag in FLAGS_0_32, flag
    assert "--disable-log-requests" not in FLAGS_0_32   # removed in 0.11
    assert "--swap-space" not in FLAGS_0_32


def test_schema_enums_are_values_vllm_accepts():
    """dtype and kv_cache_dtype are checked by the schema: every value it lets through must
    be one of the choices vLLM 0.32's own argparse offers."""
    for var, flag in (("dtype", "--dtype"), ("kv_cache_dtype", "--kv-cache-dtype")):
        assert set(SCHEMA.specs[var].json_schema["enum"]) <= _choices_from_help(HELP, flag), var


def test_argv_for_the_lab():
    r = vllm_argv(lab(), stub_flag_available)
    assert r.argv == [
        "/opt/vllm/current/bin/vllm", "serve", "/srv/models/tiny", "--served-model-name", "tiny",
        "--host", "0.0.0.0", "--port", "8000", "--dtype", "bfloat16",
        "--tensor-parallel-size", "1", "--max-model-len", "2048",
        "--gpu-memory-utilization", "0.9", "--shutdown-timeout", "30"]
    assert r.dropped == []


def test_dtype_tp_and_memory_fraction_always_render_the_schema_defaults():
    """The bug this fixes: preflight planned with the schema's defaults (auto, 1, 0.9) while
    the unit left the flags out and ran vLLM's. Now both read the same values."""
    cfg = host_config({})
    argv = argv_of(cfg)
    defaults = SCHEMA.defaults()
    assert (defaults["dtype"], defaults["tensor_parallel_size"],
            defaults["gpu_memory_utilization"]) == ("auto", 1, 0.9)
    assert value_of(argv, "--dtype") == "auto"
    assert value_of(argv, "--tensor-parallel-size") == "1"
    assert value_of(argv, "--gpu-memory-utilization") == "0.9"
    # the view preflight reads (as_vars) agrees with what the unit runs
    view = cfg.as_vars()
    for var, flag in (("dtype", "--dtype"), ("tensor_parallel_size", "--tensor-parallel-size"),
                      ("gpu_memory_utilization", "--gpu-memory-utilization")):
        assert value_of(argv, flag) == str(view[var]), var
    # vLLM's own defaults are left to vLLM for the rest
    for flag in ("--pipeline-parallel-size", "--max-model-len", "--max-num-seqs",
                 "--max-num-batched-tokens", "--kv-cache-dtype", "--quantization",
                 "--block-size", "--swap-space", "--enforce-eager", "--trust-remote-code",
                 "--enable-chunked-prefill", "--no-enable-chunked-prefill",
                 "--enable-prefix-caching", "--no-enable-prefix-caching"):
        assert flag not in argv, flag


def test_unit_execstart_round_trips():
    for cfg in (lab(), lab(**ENGINE)):
        unit = sr.render_unit(cfg, stub_flag_available)
        assert exec_words(unit) == argv_of(cfg)


def test_all_flags_and_extra_args():
    cfg = lab(tensor_parallel_size=2, gpu_memory_utilization=0.85, max_num_seqs=64,
              vllm_extra_args=["--disable-log-stats", "--chat-template", "/srv/t.jinja"])
    argv = argv_of(cfg)
    for pair in (["--tensor-parallel-size", "2"], ["--gpu-memory-utilization", "0.85"],
                 ["--max-num-seqs", "64"]):
        i = argv.index(pair[0])
        assert argv[i:i + 2] == pair
    # extra args come last, word for word
    assert argv[-3:] == ["--disable-log-stats", "--chat-template", "/srv/t.jinja"]


def test_engine_variables_render_as_flags():
    argv = argv_of(lab(**ENGINE))
    for flag, value in (("--tensor-parallel-size", "2"), ("--pipeline-parallel-size", "2"),
                        ("--gpu-memory-utilization", "0.85"), ("--max-num-seqs", "64"),
                        ("--max-num-batched-tokens", "8192"), ("--quantization", "awq"),
                        ("--kv-cache-dtype", "fp8"), ("--block-size", "32")):
        assert value_of(argv, flag) == value, flag
    for switch in ("--enable-chunked-prefill", "--no-enable-prefix-caching", "--enforce-eager",
                   "--trust-remote-code"):
        assert argv.count(switch) == 1, switch
    assert "--no-enable-chunked-prefill" not in argv and "--enable-prefix-caching" not in argv
    # every flag the renderer writes is one vLLM 0.32 knows (its --help is the ground truth)
    assert {w for w in argv if w.startswith("--")} <= FLAGS_0_32


@pytest.mark.parametrize("var, value, present, absent", [
    ("enable_chunked_prefill", True, ["--enable-chunked-prefill"], ["--no-enable-chunked-prefill"]),
    ("enable_chunked_prefill", False, ["--no-enable-chunked-prefill"], ["--enable-chunked-prefill"]),
    ("enable_chunked_prefill", None, [], ["--enable-chunked-prefill", "--no-enable-chunked-prefill"]),
    ("enable_prefix_caching", True, ["--enable-prefix-caching"], ["--no-enable-prefix-caching"]),
    ("enable_prefix_caching", False, ["--no-enable-prefix-caching"], ["--enable-prefix-caching"]),
    ("enable_prefix_caching", None, [], ["--enable-prefix-caching", "--no-enable-prefix-caching"]),
    ("enforce_eager", True, ["--enforce-eager"], []),
    ("enforce_eager", False, [], ["--enforce-eager", "--no-enforce-eager"]),
    ("trust_remote_code", True, ["--trust-remote-code"], []),
    ("trust_remote_code", False, [], ["--trust-remote-code", "--no-trust-remote-code"]),
    ("kv_cache_dtype", "auto", [], ["--kv-cache-dtype"]),
    ("kv_cache_dtype", "fp8_e5m2", ["--kv-cache-dtype", "fp8_e5m2"], []),
    ("pipeline_parallel_size", 1, [], ["--pipeline-parallel-size"]),
    ("pipeline_parallel_size", 4, ["--pipeline-parallel-size", "4"], []),
    ("quantization", None, [], ["--quantization"]),
    ("block_size", 16, ["--block-size", "16"], []),
    ("max_num_batched_tokens", 2048, ["--max-num-batched-tokens", "2048"], []),
])
def test_engine_variable_spelling(var, value, present, absent):
    argv = argv_of(lab(**{var: value}))
    if present:
        i = argv.index(present[0])
        assert argv[i:i + len(present)] == present
    for flag in absent:
        assert flag not in argv, flag


def test_swap_space_only_where_the_version_has_it():
    facts = pytest.importorskip("roles.vllm_facts")
    old = vllm_argv(lab(vllm_version="0.5.4", swap_space=4), facts.flag_available)
    assert value_of(old.argv, "--swap-space") == "4"
    new = vllm_argv(lab(swap_space=4), facts.flag_available)
    assert "--swap-space" not in new.argv and "--swap-space" in new.dropped
    # the help of 0.32 agrees (the stub reads it)
    assert vllm_argv(lab(swap_space=4), stub_flag_available).dropped == ["--swap-space"]


def test_flags_the_version_lacks_are_dropped_and_reported():
    cfg = lab(vllm_version="0.17.0")
    r = vllm_argv(cfg, stub_flag_available)
    assert "--shutdown-timeout" not in r.argv and r.dropped == ["--shutdown-timeout"]
    unit = sr.render_unit(cfg, stub_flag_available)
    assert "--shutdown-timeout" not in unit
    assert "TimeoutStopSec=%d" % sr.STOP_TIMEOUT_DEFAULT_SEC in unit
    assert sr.render_service(cfg, stub_flag_available).dropped_flags == ["--shutdown-timeout"]
    # switches too: a version without --enforce-eager gets none, and it is reported
    r = vllm_argv(lab(enforce_eager=True, enable_chunked_prefill=False),
                  FLAGS_0_32 - {"--enforce-eager", "--no-enable-chunked-prefill"})
    assert "--enforce-eager" not in r.argv and "--no-enable-chunked-prefill" not in r.argv
    assert r.dropped == ["--no-enable-chunked-prefill", "--enforce-eager"]


def test_flag_available_may_be_a_set():
    r = vllm_argv(lab(), {"--port"})
    assert r.argv[3:] == ["--port", "8000"]
    for flag in ("--served-model-name", "--dtype", "--tensor-parallel-size",
                 "--gpu-memory-utilization", "--shutdown-timeout"):
        assert flag in r.dropped, flag


def test_entrypoint_is_the_versions_start_command():
    cfg = lab()
    r = vllm_argv(cfg, stub_flag_available)
    assert r.argv[:5] == ["/opt/vllm/current/bin/vllm", "serve", "/srv/models/tiny",
                          "--served-model-name", "tiny"]
    assert "--model" not in r.argv   # with `vllm serve`, --model as well is an error (0.8.5+)
    unit = sr.render_unit(cfg, stub_flag_available)
    assert exec_words(unit) == r.argv
    assert "ExecStart=/opt/vllm/current/bin/vllm serve /srv/models/tiny \\\n" in unit


def test_exec_lines_one_flag_per_line():
    argv = ["/v/bin/python", "-m", "mod", "--model", "/m", "--enforce-eager", "--port", "8000",
            "--no-enable-prefix-caching"]
    assert sr.exec_lines(argv) == [["/v/bin/python", "-m", "mod"], ["--model", "/m"],
                                   ["--enforce-eager"], ["--port", "8000"],
                                   ["--no-enable-prefix-caching"]]


def test_extra_args_unknown_flag_refused():
    cfg = lab(vllm_extra_args=["--no-such-flag"])
    with pytest.raises(ArgvError, match="--no-such-flag"):
        vllm_argv(cfg, stub_flag_available)
    with pytest.raises(sr.RenderError, match="--no-such-flag"):
        sr.render_unit(cfg, stub_flag_available)
    with pytest.raises(sr.RenderError, match="--no-such-flag"):
        sr.render_service(cfg, stub_flag_available)
    # what argparse accepts passes: the --no- form of a switch, _ for -, =value
    words = ["--no-enforce-eager", "--max_num_seqs", "8", "--chat-template=/srv/t.jinja",
             "--api-server-count", "2"]      # --api-server-count is not --api-key
    assert argv_of(lab(vllm_extra_args=words))[-len(words):] == words


@pytest.mark.parametrize("extra", [
    {"vllm_extra_args": "--enforce-eager"},             # a string, not a list of words
    {"vllm_extra_args": {"--enforce-eager": True}},     # a mapping
    {"vllm_extra_args": ["--port", 8000]},              # words are strings
])
def test_extra_args_must_be_a_list_of_words(extra):
    with pytest.raises(InventoryError, match="vllm_extra_args"):
        host_config({**LAB, **extra})


KEY = "sk-extra-args-4711"


@pytest.mark.parametrize("words", [
    ["--api-key", KEY],
    ["--api-key=" + KEY],
    ["--api_key", KEY],
    ["--api_key=" + KEY],
    ["--API-KEY", KEY],
    ["--Api_Key=" + KEY],
    ["--api-k", KEY],            # argparse takes a unique prefix
    ["--api-ke=" + KEY],
    ["--api-", KEY],
    ["--disable-log-stats", "--api-key", KEY],
])
def test_api_key_in_extra_args_refused_in_any_spelling(words):
    cfg = lab(vllm_extra_args=words)
    with pytest.raises(ArgvError) as e:
        vllm_argv(cfg, stub_flag_available)
    assert KEY not in str(e.value) and "4711" not in str(e.value)
    for render in (sr.render_unit, sr.render_service):
        with pytest.raises(sr.RenderError) as e:
            render(cfg, stub_flag_available)
        assert KEY not in str(e.value) and "4711" not in str(e.value)
        assert KEY not in repr(e.value)


def test_stop_timeout_is_drain_plus_margin():
    cfg = lab(shutdown_timeout=120)
    assert sr.stop_timeout(cfg, stub_flag_available) == 120 + sr.STOP_TIMEOUT_MARGIN_SEC == 150
    unit = sr.render_unit(cfg, stub_flag_available)
    assert "TimeoutStopSec=150" in unit
    assert "KillSignal=SIGTERM" in unit and "KillMode=mixed" in unit
    # a version that cannot drain gets the plain default
    assert sr.stop_timeout(lab(vllm_version="0.17.0", shutdown_timeout=120),
                           stub_flag_available) == sr.STOP_TIMEOUT_DEFAULT_SEC


def test_unit_settings():
    unit = sr.render_unit(lab(), stub_flag_available)
    for line in ("After=network-online.target", "Wants=network-online.target",
                 "Restart=on-failure", "RestartSec=10", "StartLimitIntervalSec=600",
                 "StartLimitBurst=5", "User=vllm", "Group=vllm", "LimitNOFILE=65535",
                 "EnvironmentFile=/etc/vllm/vllm.env", "WantedBy=multi-user.target",
                 "StateDirectory=vllm", "CacheDirectory=vllm", "WorkingDirectory=/var/lib/vllm",
                 "SyslogIdentifier=vllm"):
        assert re.search(rf"^{re.escape(line)}$", unit, re.M), line
    # RestartSteps= needs systemd >= 254; Debian 12 has 252; unknown: left out
    assert "RestartSteps" not in unit
    for version in (None, 252, 253):
        assert "RestartSteps" not in sr.render_unit(lab(), stub_flag_available,
                                                    systemd_version=version), version
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
    for line in ("EnvironmentFile=/etc/vllm/vllm-a.env", "StateDirectory=vllm-a",
                 "CacheDirectory=vllm-a", "WorkingDirectory=/var/lib/vllm-a",
                 "SyslogIdentifier=vllm-a",
                 "Environment=HOME=/var/lib/vllm-a XDG_CACHE_HOME=/var/cache/vllm-a "
                 "VLLM_CACHE_ROOT=/var/cache/vllm-a/vllm HF_HOME=/var/cache/vllm-a/huggingface"):
        assert re.search(rf"^{re.escape(line)}$", rs.unit_text, re.M), line
    # nothing of the default service's state is shared with a second service on the host
    # (User=/Group= are the service account, vllm_user/vllm_group, not the service's name)
    assert not re.search(r"/var/(lib|cache)/vllm(/|\s|$)|^(State|Cache)Directory=vllm$"
                         r"|^SyslogIdentifier=vllm$", rs.unit_text, re.M)
    # an explicit vllm_env_file wins over the derived one
    rs = sr.render_service(lab(service_name="vllm-a", vllm_env_file="/etc/vllm/a.env"),
                           stub_flag_available)
    assert rs.env_path == "/etc/vllm/a.env" and "EnvironmentFile=/etc/vllm/a.env\n" in rs.unit_text
    assert sr.UNIT_FILE_MODE == 0o644 and sr.ENV_FILE_MODE == 0o600


def test_derived_values_and_defaults():
    argv = argv_of(lab(vllm_host="10.0.0.5"))
    assert value_of(argv, "--host") == "10.0.0.5"
    assert value_of(argv_of(lab()), "--host") == "0.0.0.0"
    # served name: model_name unless set
    assert value_of(argv_of(lab()), "--served-model-name") == "tiny"
    cfg = lab(served_model_name="tiny-chat")
    assert value_of(argv_of(cfg), "--served-model-name") == "tiny-chat"
    assert "(tiny-chat, vLLM 0.32.0)" in sr.render_unit(cfg, stub_flag_available)
    # model path: model_dir/model_name unless set
    assert argv_of(lab(model_dir="/data/m"))[2] == "/data/m/tiny"     # vllm serve MODEL
    assert argv_of(lab(model_path="/data/x/y"))[2] == "/data/x/y"
    # the venv: vllm_root/current
    assert argv_of(lab(vllm_root="/opt/v2"))[0] == "/opt/v2/current/bin/vllm"


def test_trailing_backslash_in_description_refused():
    with pytest.raises(sr.RenderError, match="backslash"):
        sr.render_unit(lab(served_model_name="x\\"), stub_flag_available)


@pytest.mark.parametrize("key, value", [
    ("vllm_version", None), ("model_name", None), ("vllm_root", "opt/vllm"),
    ("model_path", "relative/x"), ("model_dir", "srv/models"), ("vllm_env_file", "etc/vllm.env"),
    ("vllm_user", "root; rm"), ("vllm_group", "Bad Group"), ("service_name", "a b"),
    ("service_name", "-x"), ("service_name", "--now"), ("vllm_env", {"BAD-NAME": "x"}),
    ("vllm_env", {"X": True}), ("vllm_port", 70000), ("dtype", "fp64"),
    ("kv_cache_dtype", "fp4"), ("block_size", 7), ("enable_chunked_prefill", "maybe"),
    ("quantization", "awq; rm"), ("pipeline_parallel_size", 0), ("gpu_memory_utilization", 1.5),
])
def test_bad_inventory_values_refused_by_the_schema(key, value):
    with pytest.raises(InventoryError) as e:
        host_config({**LAB, key: value})
    assert key in str(e.value)


def test_renderer_still_refuses_what_it_cannot_render():
    """Values a HostConfig can hold but a unit cannot express (checked again by the renderer,
    whoever built the config)."""
    cfg = lab()
    for broken in (dataclasses.replace(cfg, vllm_version=None),
                   dataclasses.replace(cfg, model_name=None, model_path=None)):
        with pytest.raises(sr.RenderError, match="required"):
            sr.render_service(broken, stub_flag_available)
    with pytest.raises(sr.RenderError, match="vllm_user"):
        sr.render_unit(dataclasses.replace(cfg, vllm_user="root; rm"), stub_flag_available)
    with pytest.raises(sr.RenderError, match="control character"):
        sr.render_unit(lab(served_model_name="a\nExecStartPre=/bin/sh"), stub_flag_available)


def test_environment_file_path_is_unquoted_and_checked():
    unit = sr.render_unit(lab(vllm_env_file="/etc/vllm/ok@a+b-c_d.v1.env"), stub_flag_available)
    assert re.search(r"^EnvironmentFile=/etc/vllm/ok@a\+b-c_d\.v1\.env$", unit, re.M)
    # the schema lets these through (absolute paths); systemd's EnvironmentFile= takes no
    # quoting, so the renderer refuses them rather than write a path systemd ignores
    for path in ("/etc/vllm/a b.env", "/etc/vllm/%n.env", '/etc/vllm/"q".env', "/etc/vllm/$x",
                 "/etc/vllm/ü.env"):
        cfg = lab(vllm_env_file=path)
        with pytest.raises(sr.RenderError, match="vllm_env_file"):
            sr.render_unit(cfg, stub_flag_available)
        with pytest.raises(sr.RenderError, match="vllm_env_file"):
            sr.render_service(cfg, stub_flag_available)


def _read_env(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        k, _, v = line.partition("=")
        out[k] = systemd_read_env_value(v)
    return out


def test_secrets_only_in_env_file():
    cfg = lab(api_key=SECRET, hf_token=HF_SECRET)
    rs = sr.render_service(cfg, stub_flag_available,
                           nccl_env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})
    for secret in (SECRET, HF_SECRET):
        assert secret not in rs.unit_text
    for part in ("sk-lab", "very", "secret", "hf_lab", "gated"):
        assert part not in rs.unit_text, part
    assert "--api-key" not in rs.unit_text
    env = _read_env(rs.env_text)
    assert env["VLLM_API_KEY"] == SECRET
    assert env["HF_TOKEN"] == HF_SECRET
    assert env["NCCL_P2P_DISABLE"] == "1" and env["NCCL_SHM_DISABLE"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
    # nor in a repr that could reach a log line or a traceback
    for text in (repr(rs), repr(cfg), str(cfg)):
        assert "sk-lab" not in text and "hf_lab" not in text
    # no secret set: no secret line
    env = _read_env(sr.render_env(lab()))
    assert "VLLM_API_KEY" not in env and "HF_TOKEN" not in env


def _as_printed(exc: BaseException) -> str:
    """What a traceback would show of an exception: its message and those of the chained
    exceptions it displays (__cause__, or __context__ unless suppressed)."""
    out = []
    while exc is not None:
        out.append("".join(traceback.format_exception_only(type(exc), exc)) + repr(exc))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return "\n".join(out)


@pytest.mark.parametrize("var", ["api_key", "hf_token"])
@pytest.mark.parametrize("cc", ["\n", "\r", "\t"])
def test_secret_with_a_control_character_is_refused_without_showing_it(var, cc):
    cfg = lab(**{var: f"sk-topsecret-4711{cc}EXTRA=injected"})
    for render in (lambda: sr.render_env(cfg), lambda: sr.render_service(cfg, stub_flag_available)):
        with pytest.raises(sr.RenderError) as e:
            render()
        shown = _as_printed(e.value)
        for part in ("topsecret", "4711", "injected"):
            assert part not in shown, shown


@pytest.mark.parametrize("name", ["VLLM_API_KEY", "HF_TOKEN"])
def test_vllm_env_may_not_set_the_secrets(name):
    cfg = lab(vllm_env={name: "sneaky-value"})
    for render in (lambda: sr.render_env(cfg), lambda: sr.render_service(cfg, stub_flag_available)):
        with pytest.raises(sr.RenderError, match=name) as e:
            render()
        assert "sneaky" not in str(e.value)


def test_env_file_nccl_and_extras():
    preflight = {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}
    v = {"vllm_env": {"OMP_NUM_THREADS": "2", "WEIRD": "a b $c 'd'"}}
    env = _read_env(sr.render_env(lab(**v), nccl_env=preflight))
    assert env["NCCL_P2P_DISABLE"] == "1" and env["NCCL_IB_DISABLE"] == "1"
    assert env["OMP_NUM_THREADS"] == "2"
    assert env["WEIRD"] == "a b $c 'd'"
    assert "VLLM_API_KEY" not in env
    # the inventory's nccl_env replaces preflight's decision (no merge)
    env = _read_env(sr.render_env(lab(**v, nccl_env={"NCCL_P2P_DISABLE": "0"}), nccl_env=preflight))
    assert env["NCCL_P2P_DISABLE"] == "0"
    assert "NCCL_IB_DISABLE" not in env
    # an empty mapping replaces it too: no NCCL_ variable at all
    env = _read_env(sr.render_env(lab(nccl_env={}), nccl_env=preflight))
    assert not [k for k in env if k.startswith("NCCL_")]
    with pytest.raises(sr.RenderError, match="NCCL_"):
        sr.render_env(lab(), nccl_env={"LD_PRELOAD": "/x.so"})
    with pytest.raises(sr.RenderError, match="NCCL_"):
        sr.render_env(lab(nccl_env={"LD_PRELOAD": "/x.so"}))
    with pytest.raises(sr.RenderError):
        sr.render_env(lab(vllm_env={"X": "multi\nline"}))
    no_kv = _read_env(sr.render_env(lab(cpu_kvcache_space_gib=None)))
    assert "VLLM_CPU_KVCACHE_SPACE" not in no_kv


def test_env_items_order_and_gpu_selection():
    cfg = lab(api_key="k", hf_token="t", vllm_env={"OMP_NUM_THREADS": "2"},
              cuda_visible_devices=[0, 1])
    keys = [k for k, _ in sr.env_items(cfg, nccl_env={"NCCL_P2P_DISABLE": "1"})]
    assert keys == ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "NCCL_P2P_DISABLE",
                    "VLLM_CPU_KVCACHE_SPACE", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
                    "VLLM_API_KEY", "HF_TOKEN"]
    assert dict(sr.env_items(cfg))["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert dict(sr.env_items(lab(cuda_visible_devices="2,3")))["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert "CUDA_VISIBLE_DEVICES" not in dict(sr.env_items(lab()))
    with pytest.raises(InventoryError, match="cuda_visible_devices"):
        host_config({**LAB, "cuda_visible_devices": "0;1"})


@pytest.mark.skipif(not shutil.which("sh"), reason="needs sh")
def test_env_file_is_read_back_by_a_real_shell(tmp_path):
    """The whole rendered file, sourced by a POSIX shell, gives back env_items exactly."""
    cfg = lab(api_key=SECRET, hf_token=HF_SECRET,
              vllm_env={"WEIRD": "a b $c 'd' `e` \\f", "EMPTY": ""})
    items = sr.env_items(cfg, nccl_env={"NCCL_P2P_DISABLE": "1"})
    f = tmp_path / "vllm.env"
    f.write_text(sr.render_env(cfg, nccl_env={"NCCL_P2P_DISABLE": "1"}))
    script = f"set -a; . {shlex.quote(str(f))}; " + "; ".join(
        f"printf '%s\\0' \"${k}\"" for k, _ in items)
    out = subprocess.run(["sh", "-c", script], capture_output=True, env={"PATH": os.defpath},
                         check=True).stdout.decode()
    assert out.split("\0")[:-1] == [v for _, v in items]
    assert _read_env(f.read_text()) == dict(items)


def test_rendering_is_deterministic():
    a = sr.render_service(lab(api_key="k"), stub_flag_available, nccl_env={"NCCL_A": "1"})
    b = sr.render_service(lab(api_key="k"), stub_flag_available, nccl_env={"NCCL_A": "1"})
    assert (a.unit_text, a.env_text) == (b.unit_text, b.env_text)


# --- real verification with systemd-analyze -----------------------------------------

def _verify(unit_text: str, tmp_path: Path, name: str = "vllm.service") -> subprocess.CompletedProcess:
    unit = tmp_path / name
    unit.write_text(unit_text)
    return subprocess.run(["systemd-analyze", "verify", str(unit)],
                          capture_output=True, text=True)


def _fake_root(tmp_path: Path) -> Path:
    """The layout ExecStart needs: <vllm_root>/current/bin/{vllm,python}, executable."""
    root = tmp_path / "opt vllm"          # a space in the path on purpose
    (root / "current" / "bin").mkdir(parents=True)
    for name in ("vllm", "python"):
        exe = root / "current" / "bin" / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    return root


needs_systemd_analyze = pytest.mark.skipif(not shutil.which("systemd-analyze"),
                                           reason="needs systemd-analyze")


def _local_systemd_version() -> int:
    try:
        out = subprocess.run(["systemctl", "--version"], capture_output=True, text=True).stdout
        return int(out.split()[1])
    except (OSError, IndexError, ValueError):
        return 0


LOCAL_SYSTEMD = _local_systemd_version()


@needs_systemd_analyze
@pytest.mark.skipif(LOCAL_SYSTEMD >= sr.SYSTEMD_RESTART_STEPS_MIN, reason="old systemd only")
def test_restart_steps_guard_is_needed_on_this_systemd(tmp_path):
    """systemd < 254 (Debian 12: 252) ignores RestartSteps=: the guard is not theoretical."""
    cfg = lab(vllm_root=str(_fake_root(tmp_path)))
    r = _verify(sr.render_unit(cfg, stub_flag_available, systemd_version=255), tmp_path)
    assert "Unknown key 'RestartSteps'" in r.stderr


@needs_systemd_analyze
@pytest.mark.parametrize("extra", [
    {},
    {"served_model_name": "tiny 100% $USER \"q\" 'x' ; \\ end"},
    {"vllm_extra_args": ["--enforce-eager", "--chat-template", "{% if x %}$y{% endif %}"]},
    {"vllm_version": "0.17.0"},
    ENGINE,
    {"service_name": "vllm-b", "vllm_user": "svc_vllm", "vllm_group": "svc_vllm"},
    {"vllm_env_file": "/etc/vllm/ok@a+b-c_d.env"},
], ids=["lab", "hostile-name", "extra-args", "old-vllm", "engine", "service-name", "env-file"])
def test_systemd_analyze_verify_passes(tmp_path, extra):
    cfg = lab(vllm_root=str(_fake_root(tmp_path)), **extra)
    unit = sr.render_unit(cfg, stub_flag_available, systemd_version=LOCAL_SYSTEMD)
    r = _verify(unit, tmp_path, cfg.unit)
    assert r.returncode == 0, r.stderr
    # systemd only warns (rc 0) about a setting it ignores: any output is a failure here
    assert r.stdout.strip() == "" and r.stderr.strip() == "", r.stderr
    assert exec_words(unit) == argv_of(cfg)


@needs_systemd_analyze
def test_systemd_analyze_verify_is_a_real_check(tmp_path):
    cfg = lab(vllm_root=str(_fake_root(tmp_path)))
    unit = sr.render_unit(cfg, stub_flag_available)
    broken_quote = unit.replace("--served-model-name", '"--served-model-name', 1)
    r = _verify(broken_quote, tmp_path)
    assert r.returncode != 0 and "quoting" in r.stderr.lower()
    missing_exe = sr.render_unit(lab(vllm_root=str(tmp_path / "nope")), stub_flag_available)
    r = _verify(missing_exe, tmp_path)
    assert r.returncode != 0 and "not executable" in r.stderr
    bad_setting = unit.replace("KillMode=mixed", "KillMode=bogus")
    assert "ignoring" in _verify(bad_setting, tmp_path).stderr


@needs_systemd_analyze
def test_a_quoted_environment_file_is_ignored_by_systemd(tmp_path):
    """Why EnvironmentFile= is written unquoted: systemd drops a quoted path (and the
    service would start without its API key)."""
    cfg = lab(vllm_root=str(_fake_root(tmp_path)))
    unit = sr.render_unit(cfg, stub_flag_available)
    assert "EnvironmentFile=/etc/vllm/vllm.env\n" in unit
    quoted = unit.replace("EnvironmentFile=/etc/vllm/vllm.env",
                          'EnvironmentFile="/etc/vllm/vllm.env"')
    r = _verify(quoted, tmp_path)
    assert "EnvironmentFile=" in r.stderr and "ignoring" in r.stderr, r.stderr
    assert _verify(unit, tmp_path).stderr.strip() == ""


def test_real_vllm_facts_agrees_with_the_help_ground_truth():
    facts = pytest.importorskip("roles.vllm_facts")
    for cfg in (lab(tensor_parallel_size=2, gpu_memory_utilization=0.9, max_num_seqs=4),
                lab(**ENGINE, swap_space=4)):
        assert vllm_argv(cfg, facts.flag_available) == vllm_argv(cfg, stub_flag_available)
    # vLLM before 0.18 has no --shutdown-timeout: dropped, and TimeoutStopSec falls back
    r = vllm_argv(lab(vllm_version="0.5.4"), facts.flag_available)
    assert r.dropped == ["--shutdown-timeout"]
    assert sr.stop_timeout(lab(vllm_version="0.5.4"), facts.flag_available) == \
        sr.STOP_TIMEOUT_DEFAULT_SEC
