"""vLLM unit + environment file rendering (roles/service_render.py)."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from roles import service_render as sr
from tests.unit.test_quoting import systemd_read_env_value, systemd_read_words

HELP = Path(__file__).resolve().parents[2] / "roles" / "data" / "vllm-0.32.0-help.txt"
SECRET = "sk-lab 'very' \"secret\" $HOME %n;"


def _flags_from_help(path: Path) -> set[str]:
    flags = set()
    for line in path.read_text().splitlines():
        s = line.strip()
        if s.startswith("--"):
            for part in s.split(", "):
                flags.add(part.split()[0])
    return flags


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


def exec_words(unit: str) -> list[str]:
    """ExecStart= of a rendered unit, continuation lines joined, read like systemd does."""
    m = re.search(r"^ExecStart=((?:.*\\\n)*.*)$", unit, re.M)
    assert m, unit
    return systemd_read_words(m.group(1).replace("\\\n", " "))


def test_help_ground_truth_has_the_flags_we_render():
    for flag in ("--model", "--served-model-name", "--host", "--port", "--dtype",
                 "--tensor-parallel-size", "--max-model-len", "--gpu-memory-utilization",
                 "--max-num-seqs", "--shutdown-timeout", "--api-key"):
        assert flag in FLAGS_0_32, flag
    assert "--disable-log-requests" not in FLAGS_0_32   # removed in 0.11
    assert "--swap-space" not in FLAGS_0_32


def test_exec_args_for_the_lab():
    argv, dropped = sr.exec_args(LAB, stub_flag_available)
    assert argv == [
        "/opt/vllm/current/bin/python", "-m", "vllm.entrypoints.openai.api_server",
        "--model", "/srv/models/tiny", "--served-model-name", "tiny",
        "--host", "0.0.0.0", "--port", "8000", "--dtype", "bfloat16",
        "--max-model-len", "2048", "--shutdown-timeout", "30"]
    assert dropped == []


def test_unit_execstart_round_trips():
    unit = sr.render_unit(LAB, stub_flag_available)
    assert exec_words(unit) == sr.exec_args(LAB, stub_flag_available)[0]


def test_all_flags_and_extra_args_list_and_mapping():
    v = {**LAB, "tensor_parallel_size": 2, "gpu_memory_utilization": 0.85, "max_num_seqs": 64,
         "vllm_extra_args": ["--enforce-eager", "--max-num-batched-tokens", "4096"]}
    argv, _ = sr.exec_args(v, stub_flag_available)
    for pair in (["--tensor-parallel-size", "2"], ["--gpu-memory-utilization", "0.85"],
                 ["--max-num-seqs", "64"]):
        i = argv.index(pair[0])
        assert argv[i:i + 2] == pair
    assert argv[-3:] == ["--enforce-eager", "--max-num-batched-tokens", "4096"]
    v["vllm_extra_args"] = {"--enforce-eager": True, "max-num-batched-tokens": 4096,
                            "--enable-prefix-caching": None, "--trust-remote-code": False}
    assert sr.exec_args(v, stub_flag_available)[0][-3:] == [
        "--enforce-eager", "--max-num-batched-tokens", "4096"]


def test_flags_the_version_lacks_are_dropped_and_reported():
    v = {**LAB, "vllm_version": "0.17.0"}
    argv, dropped = sr.exec_args(v, stub_flag_available)
    assert "--shutdown-timeout" not in argv and dropped == ["--shutdown-timeout"]
    unit = sr.render_unit(v, stub_flag_available)
    assert "--shutdown-timeout" not in unit
    assert "TimeoutStopSec=%d" % sr.DEFAULTS["stop_timeout_default_sec"] in unit


def test_flag_available_may_be_a_set():
    argv, dropped = sr.exec_args(LAB, {"--model", "--port"})
    assert argv[3:] == ["--model", "/srv/models/tiny", "--port", "8000"]
    assert "--served-model-name" in dropped


def test_extra_args_unknown_flag_or_api_key_refused():
    with pytest.raises(sr.RenderError, match="--no-such-flag"):
        sr.exec_args({**LAB, "vllm_extra_args": ["--no-such-flag"]}, stub_flag_available)
    with pytest.raises(sr.RenderError, match="environment"):
        sr.exec_args({**LAB, "vllm_extra_args": ["--api-key", "x"]}, stub_flag_available)
    with pytest.raises(sr.RenderError):
        sr.exec_args({**LAB, "vllm_extra_args": "--enforce-eager"}, stub_flag_available)


def test_stop_timeout_is_drain_plus_margin():
    unit = sr.render_unit({**LAB, "shutdown_timeout": 120}, stub_flag_available)
    assert "TimeoutStopSec=150" in unit
    assert "KillSignal=SIGTERM" in unit and "KillMode=mixed" in unit


def test_unit_settings():
    unit = sr.render_unit(LAB, stub_flag_available)
    for line in ("After=network-online.target", "Wants=network-online.target",
                 "Restart=on-failure", "RestartSec=10", "StartLimitIntervalSec=600",
                 "StartLimitBurst=5", "User=vllm", "Group=vllm", "LimitNOFILE=65535",
                 "EnvironmentFile=/etc/vllm/vllm.env", "WantedBy=multi-user.target"):
        assert re.search(rf"^{re.escape(line)}$", unit, re.M), line
    # RestartSteps= needs systemd >= 254; Debian 12 has 252
    assert "RestartSteps" not in unit
    newer = sr.render_unit({**LAB, "systemd_version": 255}, stub_flag_available)
    assert "RestartSteps=5" in newer and "RestartMaxDelaySec=120" in newer


def test_defaults_and_none_means_unset():
    v = {**LAB, "vllm_host": None, "vllm_bind": "10.0.0.5", "vllm_env_file": None,
         "service_name": "vllm-a", "served_model_name": None, "dtype": None}
    argv, _ = sr.exec_args(v, stub_flag_available)
    assert argv[argv.index("--host") + 1] == "10.0.0.5"
    assert argv[argv.index("--served-model-name") + 1] == "tiny"
    assert "--dtype" not in argv
    rs = sr.render_service(v, stub_flag_available, api_key="k")
    assert rs.unit_path == "/etc/systemd/system/vllm-a.service"
    assert rs.env_path == "/etc/vllm/vllm-a.env"
    assert rs.env_mode == 0o600 and rs.unit_mode == 0o644


def test_trailing_backslash_in_description_refused():
    with pytest.raises(sr.RenderError, match="backslash"):
        sr.render_unit({**LAB, "served_model_name": "x\\"}, stub_flag_available)


def test_bad_inventory_values_refused():
    for bad in ({"vllm_version": None}, {"model_name": None}, {"vllm_root": "opt/vllm"},
                {"model_path": "relative/x"}, {"vllm_user": "root; rm"},
                {"service_name": "a b"}):
        with pytest.raises(sr.RenderError):
            sr.exec_args({**LAB, **bad} if None not in bad.values()
                         else {k: v for k, v in LAB.items() if k not in bad},
                         stub_flag_available)
    with pytest.raises(sr.RenderError, match="control character"):
        sr.render_unit({**LAB, "served_model_name": "a\nExecStartPre=/bin/sh"},
                       stub_flag_available)


def test_secret_only_in_env_file():
    rs = sr.render_service(LAB, stub_flag_available, api_key=SECRET,
                           nccl_env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})
    assert SECRET not in rs.unit_text
    for part in ("sk-lab", "very", "secret"):
        assert part not in rs.unit_text
    assert "--api-key" not in rs.unit_text
    env = _read_env(rs.env_text)
    assert env["VLLM_API_KEY"] == SECRET
    assert env["NCCL_P2P_DISABLE"] == "1" and env["NCCL_SHM_DISABLE"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1"
    # the api_key inventory variable is used when no explicit key is passed
    assert _read_env(sr.render_env({**LAB, "api_key": "from-vars"}))["VLLM_API_KEY"] == "from-vars"


def _read_env(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        k, _, v = line.partition("=")
        out[k] = systemd_read_env_value(v)
    return out


def test_env_file_nccl_and_extras():
    v = {**LAB, "vllm_env": {"OMP_NUM_THREADS": "2", "WEIRD": "a b $c 'd'"},
         "nccl_env": {"NCCL_P2P_DISABLE": "0"}}
    env = _read_env(sr.render_env(v, nccl_env={"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}))
    assert env["NCCL_P2P_DISABLE"] == "0"       # the inventory overrides preflight's decision
    assert env["NCCL_IB_DISABLE"] == "1"
    assert env["WEIRD"] == "a b $c 'd'"
    assert "VLLM_API_KEY" not in env
    with pytest.raises(sr.RenderError):
        sr.render_env(LAB, nccl_env={"LD_PRELOAD": "/x.so"})
    with pytest.raises(sr.RenderError):
        sr.render_env({**LAB, "vllm_env": {"VLLM_API_KEY": "sneaky"}})
    with pytest.raises(Exception):
        sr.render_env({**LAB, "vllm_env": {"BAD-NAME": "x"}})
    with pytest.raises(sr.RenderError):
        sr.render_env({**LAB, "vllm_env": {"X": "multi\nline"}})
    no_kv = _read_env(sr.render_env({**LAB, "cpu_kvcache_space_gib": None}))
    assert "VLLM_CPU_KVCACHE_SPACE" not in no_kv


def test_rendering_is_deterministic():
    a = sr.render_service(LAB, stub_flag_available, api_key="k", nccl_env={"NCCL_A": "1"})
    b = sr.render_service(dict(LAB), stub_flag_available, api_key="k", nccl_env={"NCCL_A": "1"})
    assert (a.unit_text, a.env_text) == (b.unit_text, b.env_text)


# --- real verification with systemd-analyze -----------------------------------------

def _verify(unit_text: str, tmp_path: Path) -> subprocess.CompletedProcess:
    unit = tmp_path / "vllm.service"
    unit.write_text(unit_text)
    return subprocess.run(["systemd-analyze", "verify", str(unit)],
                          capture_output=True, text=True)


def _fake_root(tmp_path: Path) -> Path:
    """The layout ExecStart needs: <vllm_root>/current/bin/python, executable."""
    root = tmp_path / "opt vllm"          # a space in the path on purpose
    py = root / "current" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text("#!/bin/sh\n")
    py.chmod(0o755)
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
    v = {**LAB, "vllm_root": str(_fake_root(tmp_path)), "systemd_version": 255}
    r = _verify(sr.render_unit(v, stub_flag_available), tmp_path)
    assert "Unknown key 'RestartSteps'" in r.stderr


@needs_systemd_analyze
@pytest.mark.parametrize("extra", [
    {},
    {"served_model_name": "tiny 100% $USER \"q\" 'x' ; \\ end"},
    {"vllm_extra_args": ["--enforce-eager", "--chat-template", "{% if x %}$y{% endif %}"]},
    {"vllm_version": "0.17.0"},
])
def test_systemd_analyze_verify_passes(tmp_path, extra):
    v = {**LAB, "vllm_root": str(_fake_root(tmp_path)), "systemd_version": LOCAL_SYSTEMD,
         **extra}
    unit = sr.render_unit(v, stub_flag_available)
    r = _verify(unit, tmp_path)
    assert r.returncode == 0, r.stderr
    # systemd only warns (rc 0) about a setting it ignores: any output is a failure here
    assert r.stdout.strip() == "" and r.stderr.strip() == "", r.stderr
    assert exec_words(unit) == sr.exec_args(v, stub_flag_available)[0]


@needs_systemd_analyze
def test_systemd_analyze_verify_is_a_real_check(tmp_path):
    v = {**LAB, "vllm_root": str(_fake_root(tmp_path))}
    unit = sr.render_unit(v, stub_flag_available)
    broken_quote = unit.replace("--model", '"--model', 1)
    r = _verify(broken_quote, tmp_path)
    assert r.returncode != 0 and "quoting" in r.stderr.lower()
    missing_exe = sr.render_unit({**LAB, "vllm_root": str(tmp_path / "nope")},
                                 stub_flag_available)
    r = _verify(missing_exe, tmp_path)
    assert r.returncode != 0 and "not executable" in r.stderr
    bad_setting = unit.replace("KillMode=mixed", "KillMode=bogus")
    assert "ignoring" in _verify(bad_setting, tmp_path).stderr


def test_real_vllm_facts_agrees_with_the_help_ground_truth():
    facts = pytest.importorskip("roles.vllm_facts")
    v = {**LAB, "tensor_parallel_size": 2, "gpu_memory_utilization": 0.9, "max_num_seqs": 4}
    assert sr.exec_args(v, facts.flag_available) == sr.exec_args(v, stub_flag_available)
    # vLLM before 0.18 has no --shutdown-timeout: dropped, and TimeoutStopSec falls back
    argv, dropped = sr.exec_args({**LAB, "vllm_version": "0.5.4"}, facts.flag_available)
    assert dropped == ["--shutdown-timeout"]
