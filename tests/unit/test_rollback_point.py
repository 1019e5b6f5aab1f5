"""The rollback point's shell commands (parsed by bash, every path quoted) and the parser of
what saving printed; the behaviour on a real host is in tests/integration/test_faults.py."""

from __future__ import annotations

import subprocess

import pytest

from tests.unit.configs import host_config
from vfleet.roles.rollout import _rollback_point as rp


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


@pytest.mark.parametrize(
    "out, state, point",
    [
        ("state=inactive\n", "inactive", None),
        (
            "state=saved\nvenv=/opt/vllm/a\nmodel=/srv/models/.versions/tiny-1\n",
            "saved",
            rp.RollbackPoint("/opt/vllm/a", "/srv/models/.versions/tiny-1"),
        ),
        ("state=kept\npending=no\nvenv=/opt/vllm/a\nmodel=\n", "kept", rp.RollbackPoint("/opt/vllm/a", None)),
        ("state=kept\npending=yes\nvenv=/opt/vllm/a\nmodel=\n", "pending", rp.RollbackPoint("/opt/vllm/a", None)),
    ],
)
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


def _lora_cfg(tmp_path, **extra):
    return host_config(
        {
            "model_dir": str(tmp_path / "models"),
            "lora_adapters": [{"name": "alpha", "source": "/src/alpha"}, {"name": "bravo", "source": "/src/bravo"}],
            "speculative_decoding": {"method": "draft_model", "num_speculative_tokens": 3, "source": "/src/draft"},
            **extra,
        }
    )


def test_a_point_records_and_puts_back_adapter_and_draft_links(tmp_path):
    """A batch whose new adapter breaks the start goes back to the old adapter files, not only to
    the old unit: the links are recorded and restored by real bash on real links."""
    import os

    cfg = _lora_cfg(tmp_path)
    links = {cfg.adapter_path("alpha"): "alpha-1", cfg.adapter_path("bravo"): "bravo-1", cfg.draft_path: "draft-1"}
    for link, target in links.items():
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(str(tmp_path / target), link)
    point = tmp_path / "point"
    point.mkdir()
    subprocess.run(["bash", "-ec", rp.record_links(cfg, str(point))], check=True)
    assert (point / "lora-alpha").read_text().strip() == str(tmp_path / "alpha-1")
    assert (point / "draft").read_text().strip() == str(tmp_path / "draft-1")
    for link, target in links.items():  # the new deploy switches every link
        os.unlink(link)
        os.symlink(str(tmp_path / target.replace("-1", "-2")), link)
    (point / "lora-bravo").unlink()  # bravo was added after the point was saved: left alone
    subprocess.run(["bash", "-ec", rp.relink_all(cfg, str(point))], check=True)
    assert os.readlink(cfg.adapter_path("alpha")) == str(tmp_path / "alpha-1")
    assert os.readlink(cfg.draft_path) == str(tmp_path / "draft-1")
    assert os.readlink(cfg.adapter_path("bravo")) == str(tmp_path / "bravo-2")


def test_the_saved_adapter_links_reach_the_report_and_the_pending_check(tmp_path):
    cfg = _lora_cfg(tmp_path)
    save = rp.save_command(cfg)
    assert subprocess.run(["bash", "-n", "-c", save]).returncode == 0
    assert "link:lora-alpha=" in save and "link:draft=" in save
    assert f"readlink -- {cfg.adapter_path('bravo')}" in save.split("echo state=saved")[0]
    state, point = rp.parse_saved(
        "state=saved\nvenv=/opt/vllm/a\nmodel=/m/.versions/tiny-1\n"
        "link:lora-alpha=/m/.versions/lora-alpha-1\nlink:lora-bravo=\nlink:draft=/d\n"
    )
    assert state == "saved" and point.others == (("lora-alpha", "/m/.versions/lora-alpha-1"), ("draft", "/d"))
    assert point.describe().endswith("weights /m/.versions/tiny-1, lora-alpha /m/.versions/lora-alpha-1, draft /d")
