"""`render --dest DIR` writes only inside DIR/<host>: a path with `..`, a host name that is not
a plain folder name, or a symlink already in DIR that leads out is refused with one line
before any file is written; the files are written whole (temp + rename)."""

from __future__ import annotations

import pytest

from vfleet.cli import render_files
from vfleet.cli.render_files import RenderedFile, dest_targets, write_rendered
from vfleet.engine.errors import VfleetError

GOOD = RenderedFile("/etc/systemd/system/vllm.service", "0644", "[Unit]\n")


@pytest.mark.parametrize(
    "host,path,match",
    [
        ("gpu01", "/etc/vllm/../../../../../tmp/x.env", "not a clean absolute path"),
        ("gpu01", "etc/vllm/x.env", "not a clean absolute path"),
        ("gpu01", "/etc/vllm/./x.env", "not a clean absolute path"),
        ("gpu01", "/", "not a clean absolute path"),
        ("..", "/etc/x", "is not a plain folder name"),
        (".", "/etc/x", "is not a plain folder name"),
        ("a/../..", "/etc/x", "is not a plain folder name"),
    ],
)
def test_paths_that_leave_dest_are_refused_and_nothing_is_written(tmp_path, host, path, match):
    dest = tmp_path / "dest"
    files = {"gpu00": [GOOD], host: [RenderedFile(path, "0600", "X=1\n")]}
    with pytest.raises(VfleetError, match=match) as e:
        write_rendered(dest, files)
    assert "\n" not in str(e.value)
    assert not dest.exists()


def test_a_symlink_in_dest_that_leads_out_is_refused(tmp_path):
    dest, outside = tmp_path / "dest", tmp_path / "outside"
    (dest / "gpu01").mkdir(parents=True)
    outside.mkdir()
    (dest / "gpu01" / "etc").symlink_to(outside)
    with pytest.raises(VfleetError, match="would land outside"):
        write_rendered(dest, {"gpu01": [GOOD]})
    assert list(outside.iterdir()) == []
    (dest / "gpu01" / "etc").unlink()
    (dest / "gpu01").rmdir()
    (dest / "gpu01").symlink_to(outside)  # the host folder itself, a link out
    with pytest.raises(VfleetError, match="would land outside"):
        dest_targets(dest, {"gpu01": [GOOD]})
    (dest / "gpu01").unlink()
    (dest / "gpu01").symlink_to(dest / "gpu02")  # a link that stays inside DEST is fine
    assert dest_targets(dest, {"gpu01": [GOOD]})[0][0].is_relative_to(dest.resolve())


def test_files_are_written_whole_under_dest(tmp_path):
    [written] = write_rendered(tmp_path / "d", {"gpu01": [GOOD]})
    assert written == (tmp_path / "d" / "gpu01" / "etc/systemd/system/vllm.service").resolve()
    assert written.read_text() == "[Unit]\n" and oct(written.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in written.parent.iterdir()] == ["vllm.service"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    [written] = write_rendered(tmp_path, {"gpu01": [GOOD]})

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(render_files.os, "replace", boom)
    with pytest.raises(OSError):
        write_rendered(tmp_path, {"gpu01": [RenderedFile(GOOD.path, "0644", "new\n")]})
    assert written.read_text() == "[Unit]\n" and [p.name for p in written.parent.iterdir()] == ["vllm.service"]


def test_render_cli_refuses_through_a_symlink_with_one_line(tmp_path):
    from tests.unit.cli_run import vfleet_cli

    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "all:\n  vars: {vllm_version: '0.32.0', model_name: tiny, model_source: /srv/x}\n"
        "  children:\n    vllm:\n      hosts: {gpu01: {}}\n"
    )
    dest = tmp_path / "dest"
    (dest / "gpu01" / "etc").mkdir(parents=True)
    (dest / "gpu01" / "etc" / "vllm").symlink_to(tmp_path)
    r = vfleet_cli("render", "--inventory", str(inv), "--dest", str(dest))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "would land outside" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "vllm.env").exists() and not (dest / "gpu01" / "etc" / "systemd").exists()
