"""The rollback point's shell commands (parsed by bash, every path quoted) and the parser of
what saving printed; the behaviour on a real host is in tests/integration/test_faults.py."""
from __future__ import annotations

import subprocess

import pytest

from vfleet.roles.rollout import rollback_point as rp
from tests.unit.configs import host_config


@pytest.mark.parametrize("build", [rp.save_command, rp.restore_command])
def test_commands_are_valid_shell_with_odd_paths(build):
    cfg = host_config({"model_dir": "/srv/my models", "vllm_root": "/opt/v llm"})
    cmd = build(cfg)
    assert subprocess.run(["bash", "-n", "-c", cmd]).returncode == 0
    assert "'/opt/v llm/current'" in cmd


def test_save_keeps_a_point_saved_while_the_same_process_ran():
    cmd = rp.save_command(host_config())
    assert "ExecMainStartTimestampMonotonic" in cmd and "state=kept" in cmd
    assert cmd.index("umask 077") < cmd.index("cp -a")  # the env copy is never world-readable


def test_restore_renames_over_and_reloads_systemd():
    cmd = rp.restore_command(host_config())
    assert "mv -f -- /etc/systemd/system/vllm.service.vfleet-rollback /etc/systemd/system/vllm.service" in cmd
    assert cmd.rstrip().endswith("systemctl daemon-reload")


@pytest.mark.parametrize("out, state, point", [
    ("state=inactive\n", "inactive", None),
    ("state=saved\nvenv=/opt/vllm/a\nmodel=/srv/models/.versions/tiny-1\n", "saved",
     rp.RollbackPoint("/opt/vllm/a", "/srv/models/.versions/tiny-1")),
    ("state=kept\npending=no\nvenv=/opt/vllm/a\nmodel=\n", "kept", rp.RollbackPoint("/opt/vllm/a", None)),
    ("state=kept\npending=yes\nvenv=/opt/vllm/a\nmodel=\n", "pending", rp.RollbackPoint("/opt/vllm/a", None)),
])
def test_parse_saved(out, state, point):
    assert rp.parse_saved(out) == (state, point)


def test_restore_leaves_a_link_that_already_points_there_alone(tmp_path):
    """Its mtime says when it last changed (the service step's restart-owed check reads it)."""
    import os

    a, b, link, saved = tmp_path / "a", tmp_path / "b", tmp_path / "current", tmp_path / "venv"
    a.mkdir()
    b.mkdir()
    link.symlink_to(a)
    os.utime(link, (1000, 1000), follow_symlinks=False)
    saved.write_text(f"{a}\n")
    subprocess.run(["bash", "-c", rp._relink(str(link), str(saved))], check=True)
    assert os.lstat(link).st_mtime == 1000
    saved.write_text(f"{b}\n")
    subprocess.run(["bash", "-c", rp._relink(str(link), str(saved))], check=True)
    assert os.readlink(link) == str(b) and os.lstat(link).st_mtime > 1000
