"""The vLLM systemd service: a dedicated user, the unit and its environment file rendered
from templates/, enabled and running. A change to the unit, the environment file, the
weights or the venv notifies one restart (a handler, also when the weights or install step
notified it), which waits until the host serves its model; nothing changed, no restart.

In pyinfra's shape: `facts_for` says what to read, `plan` turns the HostConfig, the rendered
files and those facts into changes (or none), and `configure` only gathers, plans, applies.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from dataclasses import dataclass
from typing import Any, Mapping

from vfleet.config.hostconfig import HostConfig
from vfleet.config.vllm_facts import flag_available
from vfleet.engine.changes import Change, apply, command, daemon_reload, file_change, service_changes
from vfleet.engine.facts import CommandOk, Fact, FileFact, SystemdVersion, UnitFact, gather
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed
from vfleet.engine.systemd import restart
from vfleet.roles.service import _measured_restart as measured_restart, _readiness as readiness
from vfleet.roles.service._render import RenderedService, RenderError, render_service
from vfleet.roles.service._unit_files import UnitFiles, refusal

__all__ = [
    "RESTART",
    "ServiceOutcome",
    "facts_for",
    "plan",
    "render_for",
    "configure",
    "write_files",
    "stop_command",
    "stop_and_check",
    "HANDLERS",
    "ROLLING_HANDLERS",
]

q = shlex.quote
RESTART = "restart vllm"


@dataclass
class ServiceOutcome:
    """What the service step learned about a host, for the steps after it."""

    was_active: bool
    restart_deferred: bool = False
    restarts: int = 0


@dataclass(frozen=True)
class NewerThanProcess:
    """Which of the files a vLLM process started from (unit, env file, the venv and model
    links) changed after it started: a run killed between writing them and its restart
    handler leaves such a process, and the next run finds every file as wanted, so only this
    says the restart is still owed. [] when the unit is not running or nothing is newer."""

    unit: str
    paths: tuple[str, ...]

    def command(self) -> str:
        files = " ".join(q(p) for p in self.paths)
        return (
            f"s=$(systemctl show -p ExecMainStartTimestamp --value -- {q(self.unit)} 2>/dev/null); "
            f'if systemctl is-active --quiet -- {q(self.unit)} && [ -n "$s" ] && '
            f't=$(date -d "$s" +%s 2>/dev/null); then echo "started $t"; '
            f"stat -c '%Y %n' -- {files} 2>/dev/null; fi; true"
        )  # links: their own mtime (no -L)

    def process(self, lines: list[str]) -> list[str]:
        words = lines[0].split() if lines else []
        if len(words) != 2 or words[0] != "started" or not words[1].isdigit():
            return []
        started = int(words[1])
        newer = []
        for ln in lines[1:]:
            mtime, _, path = ln.strip().partition(" ")
            if mtime.isdigit() and int(mtime) > started and path in self.paths:
                newer.append(path)
        return newer


def facts_for(cfg: HostConfig, *, diff: bool = False) -> dict[str, Fact]:
    started_from = (cfg.unit_path, cfg.env_file, cfg.current_link) + ((cfg.model_path,) if cfg.model_path else ())
    return {
        "user": CommandOk(f"id -u -- {q(cfg.vllm_user)}"),
        "unit_file": FileFact(cfg.unit_path, with_content=diff),
        "env_file": FileFact(cfg.env_file),
        "unit": UnitFact(cfg.unit),
        "systemd": SystemdVersion(),
        "newer": NewerThanProcess(cfg.unit, started_from),
        "unit_files": UnitFiles((cfg.unit,)),
    }


def nccl_decision(host_facts: Mapping[str, Any]) -> dict[str, str]:
    """The NCCL environment preflight chose from this run's topology facts (empty on CPU hosts)."""
    topo = host_facts.get("topology") or {}
    return dict(topo.get("nccl_env") or {})


def render_for(cfg: HostConfig, facts: Mapping[str, Any], host_facts: Mapping[str, Any]) -> RenderedService:
    try:
        return render_service(
            cfg, flag_available, nccl_env=nccl_decision(host_facts), systemd_version=facts.get("systemd")
        )
    except RenderError as exc:
        raise HostFailed(f"cannot render the vLLM unit: {exc}") from None


def _verify_unit(cfg: HostConfig) -> str:
    """systemd-analyze verify, failing only on lines about this unit (it also reports
    unrelated units of the host)."""
    return (
        f"o=$(systemd-analyze verify -- {q(cfg.unit_path)} 2>&1) || "
        f"{{ printf '%s\\n' \"$o\" | grep -F -- {q(cfg.unit + ':')} && exit 1; }}; exit 0"
    )


def file_changes(cfg: HostConfig, rendered: RenderedService, facts: Mapping[str, Any]) -> list[Change]:
    """Unit (verified by systemd before it is kept) and env file (0600: it holds the key).
    Never over a unit of the host's own that the name would shadow (_unit_files.py)."""
    why = refusal(cfg, facts["unit_files"]) if "unit_files" in facts else None
    if why:
        raise HostFailed(why)
    changes = file_change(
        cfg.unit_path,
        rendered.unit_text,
        facts["unit_file"],
        mode="0644",
        owner="root",
        group="root",
        action="unit",
        notify=RESTART,
        validate=_verify_unit(cfg),
    )
    changes += file_change(
        cfg.env_file,
        rendered.env_text,
        facts["env_file"],
        mode="0600",
        owner="root",
        group="root",
        sensitive=True,
        action="env",
        notify=RESTART,
    )
    if changes:
        changes.append(daemon_reload())
    return changes


def user_change(cfg: HostConfig) -> Change:
    """Create the service's system user and group (no login, home = the state directory)."""
    u, g = q(cfg.vllm_user), q(cfg.vllm_group)
    return command(
        "user",
        cfg.vllm_user,
        "create system user",
        f"getent group -- {g} >/dev/null || groupadd --system -- {g}; "
        f"useradd --system --gid {g} --home-dir {q(cfg.state_dir)} --no-create-home "
        f"--shell /usr/sbin/nologin -- {u}",
    )


def plan(cfg: HostConfig, rendered: RenderedService, facts: Mapping[str, Any]) -> list[Change]:
    """Changes that make the host's service as wanted; [] when it already is."""
    changes: list[Change] = [] if facts["user"] else [user_change(cfg)]
    changes += file_changes(cfg, rendered, facts)
    changes += service_changes(cfg.unit, facts["unit"], enabled=True, started=None)
    return changes


def write_files(ctx: HostContext, cfg: HostConfig) -> None:
    """Unit and env file only (a rollout re-renders them for another vLLM version)."""
    facts = gather(ctx, facts_for(cfg, diff=ctx.diff))
    apply(ctx, file_changes(cfg, render_for(cfg, facts, ctx.result.facts), facts))


def configure(ctx: HostContext) -> None:
    """Step body: gather, plan, apply; a stopped service starts through the restart handler."""
    cfg: HostConfig = ctx.config
    facts = gather(ctx, facts_for(cfg, diff=ctx.diff))
    rendered = render_for(cfg, facts, ctx.result.facts)
    if rendered.dropped_flags:
        ctx.record(
            "unit",
            cfg.unit_path,
            Status.OK,
            f"vLLM {cfg.vllm_version} lacks {', '.join(rendered.dropped_flags)}: not rendered",
        )
    changes = plan(cfg, rendered, facts)
    apply(ctx, changes)
    active = facts["unit"].active == "active"
    ctx.result.note(ServiceOutcome(was_active=active))
    if not active:
        ctx.notify(RESTART)
    elif RESTART not in ctx.notified and facts["newer"]:
        ctx.record(
            "service",
            cfg.unit,
            Status.OK,
            f"{', '.join(facts['newer'])} changed after the running process started (an earlier run "
            f"stopped before restarting it): restart owed",
        )
        ctx.notify(RESTART)
    elif RESTART not in ctx.notified:
        ctx.record("service", cfg.unit, Status.OK, "active, nothing changed: not restarted")


def stop_command(cfg: HostConfig) -> str:
    """Note the service's processes (the main one and every descendant: the engine core, TP
    workers), stop the unit (SIGTERM, SIGKILL to what is left after TimeoutStopSec:
    KillMode=mixed), then print any of them still alive: a worker left holding memory. Per
    unit, not per user: other services of the same user are not this one's leftovers."""
    unit = q(cfg.unit)
    return (
        f'below() {{ local c; for c in $(pgrep -P "$1"); do echo "$c"; below "$c"; done; }}; '
        f"main=$(systemctl show -p MainPID --value -- {unit}); pids=''; "
        f'[ "${{main:-0}}" -gt 0 ] && pids="$main $(below "$main")"; '
        f"systemctl stop -- {unit} || exit $?; "
        f"for p in $pids; do grep -Eqs '^State:[[:space:]]+[^Z[:space:]]' /proc/$p/status && "
        f'ps -o pid=,args= -p "$p"; done; true'
    )  # a zombie holds no memory


def stop_and_check(ctx: HostContext) -> float:
    """Stop vLLM and say per host that nothing of it is left; fails the host when a process
    survived (its GPU memory would block the next start). Returns seconds taken."""
    cfg: HostConfig = ctx.config
    t0 = time.monotonic()
    left = ctx.must(stop_command(cfg), what=f"stop {cfg.unit}", timeout=float(cfg.shutdown_timeout) + 120).stdout
    took = time.monotonic() - t0
    procs = [ln.strip() for ln in left.splitlines() if ln.strip()]
    if procs:
        raise HostFailed(
            f"{cfg.unit} stopped after {took:.0f}s but {len(procs)} of its processes are left: "
            f"{'; '.join(procs)[:300]}; kill them before starting it again"
        )
    ctx.record("stop", cfg.unit, Status.OK, f"stopped in {took:.1f}s; no process of it left", elapsed_s=took)
    return took


def restart_and_wait(ctx: HostContext) -> None:
    """Handler: (re)start, wait until the model is served; the time it took is kept as this
    host's last restart, for a later rollout's estimate (vfleet/roles/service/_measured_restart.py)."""
    cfg: HostConfig = ctx.config
    if ctx.check:
        ctx.record("service", cfg.unit, Status.SKIPPED, "check mode: would restart")
        return
    t0 = time.monotonic()
    restart(ctx, cfg.unit)  # blocking: the old process is gone before readiness is probed
    waited = readiness.wait_ready(ctx)
    outcome = ctx.result.get(ServiceOutcome) or ServiceOutcome(was_active=False)
    ctx.result.note(dataclasses.replace(outcome, restarts=outcome.restarts + 1))
    ctx.result.data["restarts"] = outcome.restarts + 1  # for the report
    took = time.monotonic() - t0
    ctx.record(
        "ready", cfg.unit, Status.OK, f"serving after {waited:.0f}s", elapsed_s=took, data={"ready_s": round(waited, 1)}
    )
    measured_restart.save(ctx, measured_restart.MeasuredRestart(restart_s=round(took, 2), ready_s=round(waited, 2)))
    ctx.play.print(f"[{ctx.name}] {cfg.served_model_name} served after {waited:.0f}s", markup=False)


def restart_now_or_defer(ctx: HostContext) -> None:
    """Handler for `deploy --batch`: a host that was serving keeps serving on its old unit
    (the new one is only daemon-reloaded) and is marked for the rolling phase, which restarts
    it through the gateways. A host that was not serving has no request to drop: now."""
    outcome = ctx.result.get(ServiceOutcome)
    if outcome is None or not outcome.was_active:
        restart_and_wait(ctx)
        return
    cfg: HostConfig = ctx.config
    if ctx.check:
        ctx.record("service", cfg.unit, Status.SKIPPED, "check mode: would restart in a rolling batch")
        return
    ctx.result.note(dataclasses.replace(outcome, restart_deferred=True))
    ctx.result.data["restart_deferred"] = True  # for the report
    ctx.record("service", cfg.unit, Status.OK, "changed while serving: restart deferred to the rolling batches")


HANDLERS = {RESTART: restart_and_wait}
ROLLING_HANDLERS = {RESTART: restart_now_or_defer}
