"""What a serving host runs, saved before `deploy --batch` changes it, so that a host whose new
unit does not come back can go back to exactly that: its unit file, its environment file, the
venv `current` pointed at and the weights the model link pointed at.

Why a copy on the host and not in the controller's memory: the environment file holds the API
key (it stays in a root-only 0600 file on the host, never on the controller or in a report),
and a controller killed mid-run leaves the point where the next run can still find it.

Layout: <state_root>/<unit>/{unit,env,venv,model,lora-NAME...,draft} (all but unit and env hold
link targets; an empty one: the link did not exist, and restore leaves that link alone since the
saved unit does not name it). Saving replaces the whole folder in one rename, so a point is
either the old one or the new one."""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed
from vfleet.roles.service import RESTART

q = shlex.quote
ROOT = "/var/lib/vfleet/rollback"

__all__ = [
    "ROOT",
    "RollbackPoint",
    "folder",
    "save_command",
    "restore_command",
    "parse_saved",
    "save",
    "restore",
    "record_links",
    "relink_all",
]


@dataclass(frozen=True)
class RollbackPoint:
    """The link targets of a saved point (the two files are only named, never read here);
    `others`: (label, target) of the adapter and draft links that existed."""

    venv: str | None
    model: str | None
    others: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        extra = "".join(f", {label} {target}" for label, target in self.others)
        return f"unit, env file, venv {self.venv}, weights {self.model}{extra}"


def _links(cfg: HostConfig) -> list[tuple[str, str]]:
    """(file name in the point, link) of every link a unit reads besides the venv: the model,
    each adapter and the speculative draft (the labels are plain folder-safe names,
    vfleet/config/lora.py)."""
    out = [("model", cfg.model_path)] if cfg.model_path else []
    out += [(f"lora-{a.name}", cfg.adapter_path(a.name)) for a in cfg.lora_adapters]
    if cfg.speculative is not None and cfg.speculative.source:
        out.append(("draft", cfg.draft_path))
    return out


def folder(cfg: HostConfig) -> str:
    return posixpath.join(ROOT, cfg.unit)


def save_command(cfg: HostConfig) -> str:
    """On a serving host: copy unit and env file (modes kept: the env file stays 0600), record
    every link target and the start time of the running process into a fresh folder, then swap
    it in. A point saved while this same process was already running is kept instead: it is
    what the process was started from (a run killed after changing the files left it)."""
    d = folder(cfg)
    new = d + ".new"
    unit = q(cfg.unit)
    return (
        f"set -e; umask 077; systemctl is-active --quiet -- {unit} || {{ echo state=inactive; exit 0; }}; "
        f"s=$(systemctl show -p ExecMainStartTimestampMonotonic --value -- {unit}); "
        f'if [ -f {q(d + "/started")} ] && [ "$(cat -- {q(d + "/started")})" = "$s" ]; then '
        f"echo state=kept; {_pending(cfg, d)} else "
        f"rm -rf -- {q(new)}; mkdir -p -- {q(new)}; "
        f"cp -a -- {q(cfg.unit_path)} {q(new + '/unit')}; "
        f"if [ -e {q(cfg.env_file)} ]; then cp -a -- {q(cfg.env_file)} {q(new + '/env')}; fi; "
        f"readlink -- {q(cfg.current_link)} > {q(new + '/venv')} || true; "
        f"{record_links(cfg, new)}"
        f"printf '%s\\n' \"$s\" > {q(new + '/started')}; "
        f"rm -rf -- {q(d)}; mv -T -- {q(new)} {q(d)}; echo state=saved; fi; "
        f"echo venv=$(cat -- {q(d + '/venv')}); echo model=$(cat -- {q(d + '/model')})"
        + "".join(
            f"; echo link:{label}=$(cat -- {q(d + '/' + label)} 2>/dev/null)"
            for label, _ in _links(cfg)
            if label != "model"
        )
    )


def _pending(cfg: HostConfig, d: str) -> str:
    """For a kept point: do the files on disk still match what the running process started
    from? If not, a killed run changed them and never restarted it: the restart is pending."""
    same = [
        f"cmp -s -- {q(d + '/unit')} {q(cfg.unit_path)}",
        f"{{ [ ! -e {q(d + '/env')} ] || cmp -s -- {q(d + '/env')} {q(cfg.env_file)}; }}",
        f'[ "$(readlink -- {q(cfg.current_link)})" = "$(cat -- {q(d + "/venv")})" ]',
    ]
    same += [
        f'[ "$(readlink -- {q(link)})" = "$(cat -- {q(d + "/" + label)} 2>/dev/null)" ]' for label, link in _links(cfg)
    ]
    return f"if {' && '.join(same)}; then echo pending=no; else echo pending=yes; fi;"


def _read_link(link: str | None, dest: str) -> str:
    """The link's target into dest (empty when there is no such link)."""
    return f"readlink -- {q(link)} > {q(dest)} || true; " if link else f": > {q(dest)}; "


def record_links(cfg: HostConfig, point_dir: str) -> str:
    """Shell: each link's target into its file in point_dir (`model` always written)."""
    links = [(label, link) for label, link in _links(cfg) if label != "model"]
    return _read_link(cfg.model_path, point_dir + "/model") + "".join(
        _read_link(link, f"{point_dir}/{label}") for label, link in links
    )


def relink_all(cfg: HostConfig, point_dir: str) -> str:
    """Shell: every link put back to the target saved in point_dir."""
    return "".join(f"{_relink(link, f'{point_dir}/{label}')}; " for label, link in _links(cfg))


def _put_back(saved: str, dest: str) -> str:
    """Copy beside the destination, then rename over it: never a half-written unit or env."""
    tmp = dest + ".vfleet-rollback"
    return f"cp -a -- {q(saved)} {q(tmp)} && mv -f -- {q(tmp)} {q(dest)}"


def _relink(link: str, target_file: str) -> str:
    """Point `link` at the target recorded in target_file (atomic: a new link renamed over);
    a link already there is left alone, so its mtime still says when it last changed; nothing
    recorded (a link added after the point was saved): left alone, the saved unit does not read it."""
    tmp = link + ".vfleet-rollback"
    return (
        f't=$(cat -- {q(target_file)} 2>/dev/null || true); if [ -n "$t" ] && [ "$(readlink -- {q(link)})" != "$t" ]; '
        f'then ln -sfn -- "$t" {q(tmp)} && mv -Tf -- {q(tmp)} {q(link)}; fi'
    )


def restore_command(cfg: HostConfig) -> str:
    """Put the saved unit, env file and every saved link back, then daemon-reload (no restart)."""
    d = folder(cfg)
    return (
        f"set -e; test -f {q(d + '/unit')}; "
        f"{_put_back(d + '/unit', cfg.unit_path)}; "
        f"if [ -e {q(d + '/env')} ]; then {_put_back(d + '/env', cfg.env_file)}; fi; "
        f"{_relink(cfg.current_link, d + '/venv')}; "
        f"{relink_all(cfg, d)}systemctl daemon-reload"
    )


def parse_saved(stdout: str) -> tuple[str, RollbackPoint | None]:
    """('saved' | 'kept' | 'pending' | 'inactive', the point or None when the host does not
    serve); 'pending': kept, and the files on disk are newer than the running process."""
    vals = dict(ln.split("=", 1) for ln in stdout.splitlines() if "=" in ln)
    state = vals.get("state", "inactive")
    if state == "inactive":
        return state, None
    if state == "kept" and vals.get("pending") == "yes":
        state = "pending"
    others = tuple((k.removeprefix("link:"), v) for k, v in vals.items() if k.startswith("link:") and v)
    return state, RollbackPoint(venv=vals.get("venv") or None, model=vals.get("model") or None, others=others)


def save(ctx: HostContext) -> RollbackPoint | None:
    """Step body: save (or keep) what a serving host runs; None on a host that does not serve
    (it has no request to drop and is started on the new files at once)."""
    cfg: HostConfig = ctx.config
    state, point = parse_saved(ctx.must(save_command(cfg), what="save the rollback point").stdout)
    if point is None:
        ctx.record("rollback point", folder(cfg), Status.OK, f"{cfg.unit} not active: nothing to save")
        return None
    ctx.result.note(point)
    if state == "pending":  # the service step's rolling handler defers it to the batches
        ctx.notify(RESTART)
    how = {
        "saved": "saved",
        "kept": "kept (saved by an earlier run while this process ran)",
        "pending": "kept, and the files on disk are not what this process started from (an earlier run "
        "was stopped before restarting it): restart pending",
    }[state]
    ctx.record("rollback point", folder(cfg), Status.OK, f"{how}: {point.describe()}")
    return point


def restore(ctx: HostContext) -> str:
    """Put the saved point back (unit, env, venv, weights, adapters, draft); returns what it put back, for the
    report. Fails the host when there is no point to go back to."""
    cfg: HostConfig = ctx.config
    point = ctx.result.get(RollbackPoint)
    if point is None:
        raise HostFailed(f"no rollback point was saved for {cfg.unit}: nothing to go back to")
    r = ctx.run(restore_command(cfg))
    if not r.ok:
        raise HostFailed(f"could not restore the rollback point in {folder(cfg)}: {r.tail()}")
    what = point.describe()
    ctx.record("restore", folder(cfg), Status.CHANGED, f"put back {what}")
    return what
