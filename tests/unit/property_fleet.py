"""The checks of an example that `vfleet render` accepted: its written tree, and the renderers
deploy uses, fed in-process with the same fleet (vfleet.config.fleet.Fleet, as the CLI loads it).

Why in-process as well: render masks secrets, so a hostile api_key never reaches its quoting
there; deploy writes the unmasked env file, and the commands it runs on a bare host (the
plans, with every fact "missing") and prints (the curl line) are only seen this way."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.unit.property_validators import Check, bash_check, env_file_values, exec_words, nginx_check, units_check
from vfleet.cli.deploy_steps import curl_line
from vfleet.cli.render_files import masked
from vfleet.config.fleet import Fleet
from vfleet.config.hostconfig import HostConfig
from vfleet.config.variables import SCHEMA
from vfleet.config.vllm_facts import flag_available
from vfleet.engine.facts import FileState, UnitState
from vfleet.engine.inventory import load_inventory
from vfleet.roles.gateway import _nginx as gateway_role
from vfleet.roles.gateway._files import render_files
from vfleet.roles.gateway._render import Backend, _server_address
from vfleet.roles.install import _venv as install_role
from vfleet.roles.monitoring import _exporter as exporter
from vfleet.roles.service import _unit as service_role
from vfleet.roles.service._argv import vllm_argv
from vfleet.roles.service._render import env_items, render_service

__all__ = ["fleet_checks"]

MISSING = FileState("missing")
NO_UNIT = UnitState("not-found", "inactive")


def fleet_checks(inventory: Path, tmp: Path) -> tuple[list[Check], list[str]]:
    """(validator runs to start, failures found already) for the tree under tmp/render."""
    fleet = Fleet.of(load_inventory(inventory, schema=SCHEMA))
    checks: list[Check] = []
    failures: list[str] = []
    for host_dir in sorted((tmp / "render").iterdir()):
        cfg = fleet.config(host_dir.name)
        units = sorted((host_dir / "etc" / "systemd" / "system").glob("*.service"))
        if units:
            checks.append(units_check(units, {f"{cfg.vllm_root}/current/bin/{n}" for n in ("vllm", "python", "ray")}))
        if (host_dir / "etc" / "nginx" / "conf.d" / "vfleet-gateway.conf").exists():
            servers = {
                _server_address(b.address, b.port) for b in map(Backend.of, fleet.configs_of(fleet.serving_hosts))
            }
            prefix = tmp / f"nginx-{host_dir.name}"
            prefix.mkdir()
            checks.append(nginx_check(prefix, host_dir / "etc" / "nginx", servers))
    envs = sorted((tmp / "render").rglob("*.env"))
    for env, (by_systemd, by_sh) in zip(envs, env_file_values(envs)):
        if by_systemd != by_sh:
            failures.append(f"{env.relative_to(tmp)}: systemd reads {by_systemd!r}, sh reads {by_sh!r}")
    failures += _lone_host(fleet.config("gpu01"), tmp / "render" / "gpu01")
    commands = _commands(fleet)
    script = tmp / "commands.sh"
    script.write_text("".join(f"# {what!r}\n{cmd}\n" for what, cmd in commands))
    checks.append(bash_check(script))
    failures += [
        f"{what}: deletes {target!r}"
        for what, cmd in commands
        for target in removed_paths(cmd)
        if target in ("/", "") or ".." in target.split("/")
    ]
    return checks, failures


def removed_paths(command: str) -> list[str]:
    """What each `rm` of a shell command deletes, read as the shell splits it: a path that
    climbs out of its folder (`..`) or is the root would be a host wiped by an inventory value."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # unbalanced quotes: bash -n reports it
        return []
    out, in_rm = [], False
    for w in words:
        if w in (";", "&&", "||", "|", "&", "(", ")"):
            in_rm = False
        elif w == "rm":
            in_rm = True
        elif in_rm and not w.startswith("-"):
            out.append(w)
    return out


def _lone_host(cfg: HostConfig, folder: Path) -> list[str]:
    """gpu01 serves alone: its ExecStart= reads back as vllm_argv, its env files as env_items
    (masked as render writes it, and unmasked as deploy does)."""
    failures = []
    unit = (folder / "etc" / "systemd" / "system" / cfg.unit).read_text()
    meant = vllm_argv(masked(cfg), flag_available).argv
    if exec_words(unit) != meant:
        failures.append(f"gpu01 ExecStart= reads back as {exec_words(unit)!r}, vfleet meant {meant!r}")
    rendered = folder / cfg.env_file.lstrip("/")
    [(by_systemd, _)] = env_file_values([rendered])
    if by_systemd != dict(env_items(masked(cfg))):
        failures.append(f"gpu01 masked env file reads back as {by_systemd!r}")
    try:
        deployed = render_service(cfg, flag_available)
    except ValueError as exc:  # RenderError, QuotingError: refused only when deploy renders
        return failures + [f"gpu01: render accepted the fleet, deploy's unmasked render refuses it: {exc}"]
    unmasked = folder.parent / "gpu01-unmasked.env"
    unmasked.write_text(deployed.env_text)
    [(by_systemd, by_sh)] = env_file_values([unmasked])
    if not by_systemd == by_sh == dict(env_items(cfg)):
        failures.append(f"gpu01 unmasked env file: systemd reads {by_systemd!r}, sh {by_sh!r}")
    return failures


def _commands(fleet: Fleet) -> list[tuple[str, str]]:
    """Commands deploy runs on a bare host (every fact missing) and the curl line it prints."""
    cfg, gw = fleet.config("gpu01"), fleet.config("gw01")
    rendered = render_service(masked(cfg), flag_available)
    changes = service_role.plan(
        cfg, rendered, {"user": False, "unit_file": MISSING, "env_file": MISSING, "unit": NO_UNIT, "systemd": 252}
    )
    changes += install_role.plan(cfg, {"root": MISSING, "marker": MISSING, "current": None})
    backends = [Backend.of(fleet.config(h)) for h in fleet.serving_hosts]
    changes += gateway_role.plan(
        gw,
        render_files(backends, gw),
        {
            "nginx": False,
            "njs": False,
            "conf": MISSING,
            "js": MISSING,
            "tls_cert": MISSING,
            "tls_key": MISSING,
            "default_site": FileState("file", "0" * 64, "644", "root", "root"),
            "drained": MISSING,
            "caps": MISSING,
            "unit": NO_UNIT,
        },
    )
    changes += exporter.plan(gw, {"exporter": False, "unit": NO_UNIT, "defaults": MISSING})
    out = [(f"{c.action} {c.target}", c.command) for c in changes]
    out.append(("curl line", curl_line(gw, cfg.served_model_name)))
    out.append(("exporter defaults", exporter.defaults_text(gw)))
    return out
