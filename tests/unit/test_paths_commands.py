"""Every command builder that takes an inventory value, fed a value that starts with '-': the
value sits after `--` (read back with shlex, as the shell splits it) or is refused with one
line; and rsync itself, run for real on a local connection, copies a folder named like an
option instead of obeying it."""

from __future__ import annotations

import dataclasses
import re
import shlex
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.unit.configs import host_config
from vfleet.config.hostconfig import HostConfig
from vfleet.config.variables import SCHEMA
from vfleet.engine import systemd
from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import load_inventory
from vfleet.engine.runner import HostFailed, Play, RunOptions
from vfleet.engine.transfer import rsync_args, rsync_push
from vfleet.roles.install import _venv as venv
from vfleet.roles.service import _unit as unit
from vfleet.roles.weights import _copies as copies, _sync as sync

EVIL = "--rsh=touch /tmp/vfleet-pwned"


def operands_after_dashdash(words: list[str], program: str) -> list[str]:
    """The words after the first `--` that follows `program` in a split command line."""
    start = words.index(program)
    return words[words.index("--", start) + 1 :]


def fake_ctx(*, user: str | None = "root", address: str = "10.0.0.1", connection: str = "ssh") -> SimpleNamespace:
    settings = SimpleNamespace(
        port=22,
        connect_timeout=10,
        key_file=None,
        host_key_checking=True,
        known_hosts_file=None,
        become=False,
        user=user,
        address=address,
    )
    return SimpleNamespace(settings=lambda: settings, host=SimpleNamespace(connection=connection))


# --- rsync on the controller ---------------------------------------------------------------


def test_rsync_push_operands_follow_dashdash_and_the_source_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = rsync_args(fake_ctx(), EVIL, "/srv/models/.staging/x", extra=["--exclude", ".vfleet-verified"])
    src, dest = operands_after_dashdash(args, "rsync")
    assert src == f"{tmp_path}/{EVIL}/" and dest == "root@10.0.0.1:/srv/models/.staging/x/"


@pytest.mark.parametrize(
    "user,address,word",
    [("-oProxyCommand=x", "10.0.0.1", "ansible_user"), ("root", "-oProxyCommand=x", "ansible_host")],
)
def test_rsync_push_refuses_a_user_or_address_ssh_would_read_as_an_option(user, address, word):
    with pytest.raises(HostFailed, match=f"{word} '-oProxyCommand=x' starts with '-'"):
        rsync_args(fake_ctx(user=user, address=address), "/src", "/dest")


def test_rsync_push_refuses_a_relative_destination():
    with pytest.raises(HostFailed, match="not an absolute path"):
        rsync_args(fake_ctx(), "/src", "--delete")


def test_rsync_copies_a_folder_named_like_an_option(tmp_path, monkeypatch):
    """Real rsync, local connection: the folder `--rsh=...` is a source, nothing runs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / EVIL).mkdir(parents=True)
    (tmp_path / EVIL / "config.json").write_text("{}")
    inv = tmp_path / "local.yaml"
    inv.write_text("all:\n  hosts:\n    localhost:\n")
    play = Play("test", load_inventory(inv, schema=SCHEMA).select(None), RunOptions())
    dest = tmp_path / "dest"
    dest.mkdir()
    out = play.run_step("copy", lambda ctx: rsync_push(ctx, EVIL, str(dest)))
    assert "localhost" in out, play.results["localhost"].steps
    assert (dest / "config.json").read_text() == "{}"


# --- rsync on a host (fan-out), and the weights' other commands ----------------------------


def test_pull_command_operands_follow_dashdash():
    cfg = host_config()
    words = shlex.split(sync.pull_command(cfg, "/srv/models/.staging/t", "root", "10.0.0.2", 22, "/srv/-x"))
    assert operands_after_dashdash(words, "rsync") == ["root@10.0.0.2:/srv/-x/", "/srv/models/.staging/t/"]


def test_pull_command_brackets_an_ipv6_peer():
    """rsync reads `user@fd00::2:/path` as host 'fd00' and path ':2:/path'; its IPv6 form is
    `user@[fd00::2]:/path`."""
    words = shlex.split(sync.pull_command(host_config(), "/srv/models/.staging/t", "root", "fd00::2", 22, "/srv/m"))
    assert operands_after_dashdash(words, "rsync")[0] == "root@[fd00::2]:/srv/m/"


@pytest.mark.parametrize(
    "user,address,path,match",
    [
        ("-oProxyCommand=x", "10.0.0.2", "/srv/x", "peer user"),
        ("root", "-oProxyCommand=x", "/srv/x", "peer address"),
        ("root", "10.0.0.2", "-x", "not absolute"),
    ],
)
def test_pull_command_refuses_option_like_peers_and_relative_sources(user, address, path, match):
    with pytest.raises(HostFailed, match=match):
        sync.pull_command(host_config(), "/srv/models/.staging/t", user, address, 22, path)


def test_finish_and_space_commands_put_every_path_after_dashdash():
    text = copies.finish_command("/srv/models/.staging/-t", "/srv/models/.versions/-t", "-u")
    for part in text.removeprefix("set -e; ").split("; "):
        words = shlex.split(part.removesuffix(" 2>/dev/null || true"))
        assert "--" in words, part
        assert all(
            not w.startswith("-") or w in ("-R", "-p", "-rf", "-T", "--", "u=rwX,go=rX")
            for w in words[: words.index("--")]
        ), part
    for part in copies.space_command("/srv/models/.staging/-t").split(" && "):
        assert " -- " in part, part


def test_model_source_host_path_must_be_absolute():
    with pytest.raises(VfleetError, match="must be absolute"):
        sync.resolve_source(dataclasses.replace(host_config(), model_source="gpu02:-x"))


def test_a_controller_model_source_named_like_an_option_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / EVIL).mkdir(parents=True)
    (tmp_path / EVIL / "config.json").write_text("{}")
    src = sync.resolve_source(dataclasses.replace(host_config(), model_source=EVIL))
    assert src.controller_dir == tmp_path / EVIL and str(src.controller_dir).startswith("/")


# --- systemd, the service user -------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [lambda u: systemd.start_command("restart", u), systemd.stop_command, lambda u: systemd.journal_command(u, 5)],
)
def test_systemd_commands_refuse_a_unit_that_starts_with_a_dash(build):
    with pytest.raises(HostFailed, match="starts with '-'"):
        build("-Hroot@evil")
    words = shlex.split(build("vllm.service").split(";")[-1])
    assert words[words.index("vllm.service") - 1] in ("--", "-u")


def test_user_and_group_names_follow_dashdash():
    script = unit.user_change(host_config()).command
    for part in script.split("; "):
        for cmd in part.split(" || "):
            words = shlex.split(cmd.replace(">/dev/null", ""))
            assert words[-2] == "--", cmd


# --- pip and python -m venv ----------------------------------------------------------------


def _pip_install_words(script: str) -> list[str]:
    part = next(p for p in script.split("; ") if " install " in p)
    return shlex.split(part.split(" </dev/null")[0])


@pytest.mark.parametrize(
    "vars,word",
    [
        ({"vllm_extra_pins": ["--index-url=http://evil/simple"]}, "vllm_extra_pins[0]"),
        ({"vllm_remove_packages": ["-y"]}, "vllm_remove_packages[0]"),
        ({"vllm_python": "-c"}, "vllm_python"),
    ],
)
def test_the_schema_refuses_option_like_pins_and_interpreters(vars, word):
    """The first wall: the inventory never gets a '-' pin or interpreter past load."""
    with pytest.raises(VfleetError, match=re.escape(f"vars.{word}: expected")):
        host_config(vars)


def _past_the_schema(**fields) -> HostConfig:
    """A HostConfig holding values the schema refuses: the command builders are the second
    wall (a config made in code, or a schema rule loosened later, must still not inject)."""
    return dataclasses.replace(host_config(), **fields)


def test_pip_reads_option_like_pins_as_requirements():
    cfg = _past_the_schema(
        vllm_extra_pins=("--index-url=http://evil/simple", "-r/etc/shadow"), vllm_remove_packages=("-y",)
    )
    script = venv.install_change(cfg, cfg.venv_path).command
    after = operands_after_dashdash(_pip_install_words(script), "install")
    assert after == ["vllm==0.32.0", "--index-url=http://evil/simple", "-r/etc/shadow"]
    uninstall = shlex.split(script.split("uninstall -y ")[1].split(" </dev/null")[0])
    assert uninstall == ["--", "-y"]
    assert f"-m venv -- {cfg.venv_path}" in script


def test_real_pip_refuses_an_option_like_pin_after_dashdash():
    """pip itself (offline, --dry-run): after `--` a pin is a requirement, and not a valid one."""
    cfg = _past_the_schema(vllm_extra_pins=("--index-url=http://127.0.0.1:9/simple",))
    words = _pip_install_words(venv.install_change(cfg, cfg.venv_path).command)
    args = words[words.index("install") + 1 :]
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--dry-run", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0 and "Invalid requirement: '--index-url=http://127.0.0.1:9/simple'" in r.stderr


def test_vllm_python_that_starts_with_a_dash_is_refused():
    cfg = _past_the_schema(vllm_python="-c")
    with pytest.raises(VfleetError, match="vllm_python '-c' starts with '-'"):
        venv.install_change(cfg, cfg.venv_path)
