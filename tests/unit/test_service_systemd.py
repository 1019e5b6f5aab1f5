"""The rendered vLLM unit checked by the real systemd: `systemd-analyze verify` passes on every
shape of config, fails on a broken unit, and ignores what the renderer must not write (a quoted
EnvironmentFile=, RestartSteps= before systemd 254). Skipped where systemd-analyze is missing."""

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.service_cases import ENGINE, argv_of, exec_words, lab, stub_flag_available
from vfleet.roles.service import _render as sr


def _verify(unit_text: str, tmp_path: Path, name: str = "vllm.service") -> subprocess.CompletedProcess:
    unit = tmp_path / name
    unit.write_text(unit_text)
    return subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)


def _fake_root(tmp_path: Path) -> Path:
    """The layout ExecStart needs: <vllm_root>/current/bin/{vllm,python}, executable."""
    root = tmp_path / "opt vllm"  # a space in the path on purpose
    (root / "current" / "bin").mkdir(parents=True)
    for name in ("vllm", "python"):
        exe = root / "current" / "bin" / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    return root


needs_systemd_analyze = pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")


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
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"served_model_name": "tiny 100% $USER \"q\" 'x' ; \\ end"},
        {"vllm_extra_args": ["--disable-log-stats", "--response-role", "{% if x %}$y{% endif %}"]},
        {"vllm_version": "0.17.0"},
        ENGINE,
        {"service_name": "vllm-b", "vllm_user": "svc_vllm", "vllm_group": "svc_vllm"},
        {"vllm_env_file": "/etc/vllm/ok@a+b-c_d.env"},
    ],
    ids=["lab", "hostile-name", "extra-args", "old-vllm", "engine", "service-name", "env-file"],
)
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
    quoted = unit.replace("EnvironmentFile=/etc/vllm/vllm.env", 'EnvironmentFile="/etc/vllm/vllm.env"')
    r = _verify(quoted, tmp_path)
    assert "EnvironmentFile=" in r.stderr and "ignoring" in r.stderr, r.stderr
    assert _verify(unit, tmp_path).stderr.strip() == ""
