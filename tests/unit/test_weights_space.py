"""The disk-space check before a weight copy: parsed from `df` + `du` output (no host)."""

from __future__ import annotations

import subprocess

from vfleet.roles.weights._copies import space_command, space_shortfall


def test_space_command_is_valid_shell_and_quotes_the_path():
    cmd = space_command("/srv/my models/.staging/tiny-abc")
    assert subprocess.run(["bash", "-n", "-c", cmd]).returncode == 0
    assert "'/srv/my models/.staging/tiny-abc'" in cmd


def test_shortfall_counts_what_is_already_staged():
    assert space_shortfall(100, "50\n0\n") == (100, 50, 0)
    assert space_shortfall(100, "50\n60\n") is None  # a resume: 40 left, 50 free
    assert space_shortfall(100, "10\n60\n") == (40, 10, 60)


def test_unreadable_output_does_not_block_the_copy():
    assert space_shortfall(100, "df: no such file\n") is None
