"""The vLLM systemd service: a dedicated user, the unit and its environment file rendered
from templates/, enabled and running. A change to the unit, the environment file, the
weights or the venv notifies one restart (a handler), which waits until the host serves
its model; nothing changed means nothing restarts."""
from __future__ import annotations

import shlex
import time
from typing import Any

from fleet.errors import VfleetError
from fleet.operations import put_file
from fleet.results import Status
from fleet.runner import HostContext, HostFailed
from fleet.systemd import daemon_reload, journal_tail, restart, unit_state
from roles import readiness
from roles.service_render import RenderError, render_service
from roles.vllm_facts import flag_available

q = shlex.quote
RESTART = "restart vllm"


def unit_name(vars: dict[str, Any]) -> str:
    return vars.get("service_name") or "vllm"


def env_file_path(vars: dict[str, Any]) -> str:
    return vars.get("vllm_env_file") or f"/etc/vllm/{unit_name(vars)}.env"


def render_vars(vars: dict[str, Any]) -> dict[str, Any]:
    """Inventory vars as the renderer reads them (env file path derived from the unit name)."""
    v = {k: val for k, val in vars.items() if val is not None}
    v["vllm_env_file"] = env_file_path(vars)
    v.pop("api_key", None)
    return v


def nccl_env_for(ctx: HostContext) -> dict[str, str]:
    """NCCL variables: the inventory's nccl_env wins; else the preflight topology decision
    gathered earlier in this run (empty on CPU hosts)."""
    if ctx.vars.get("nccl_env") is not None:
        return dict(ctx.vars["nccl_env"])
    topo = (ctx.result.facts or {}).get("topology") or {}
    return dict(topo.get("nccl_env") or {})


def ensure_user(ctx: HostContext) -> None:
    user = ctx.vars.get("vllm_user") or "vllm"
    group = ctx.vars.get("vllm_group") or user
    r = ctx.run(f"id -u {q(user)}")
    if r.ok:
        ctx.record("user", user, Status.OK)
        return
    if ctx.check:
        ctx.record("user", user, Status.CHANGED, "would create system user")
        return
    ctx.must(f"getent group {q(group)} >/dev/null || groupadd --system {q(group)}; "
             f"useradd --system --gid {q(group)} --home-dir /var/lib/vllm --no-create-home "
             f"--shell /usr/sbin/nologin {q(user)}", what=f"create user {user}")
    ctx.record("user", user, Status.CHANGED, "system user created")


def configure(ctx: HostContext) -> None:
    """Step body: user, unit, environment file; enable; start if stopped and not notified."""
    unit = unit_name(ctx.vars)
    ensure_user(ctx)
    try:
        rendered = render_service(render_vars(ctx.vars), flag_available, api_key=ctx.vars.get("api_key"),
                                  nccl_env=nccl_env_for(ctx), unit_dir="/etc/systemd/system")
    except RenderError as exc:
        raise HostFailed(f"cannot render the vLLM unit: {exc}") from None
    unit_path = f"/etc/systemd/system/{unit}.service"
    if rendered.dropped_flags:
        ctx.record("unit", unit_path, Status.OK,
                   f"vLLM {ctx.vars['vllm_version']} lacks {', '.join(rendered.dropped_flags)}: not rendered")
    unit_res = put_file(ctx, unit_path, rendered.unit_text, mode="0644", owner="root", group="root",
                        action="unit", notify=RESTART)
    if unit_res.status is Status.CHANGED and not ctx.check:
        v = ctx.run(f"systemd-analyze verify {q(unit_path)} 2>&1")
        problems = [ln for ln in v.stdout.splitlines() if f"{unit}.service" in ln]
        if v.exited != 0 and problems:
            raise HostFailed(f"systemd-analyze verify {unit_path}: {' | '.join(problems[:3])}")
    put_file(ctx, rendered.env_path, rendered.env_text, mode="0600", owner="root", group="root",
             sensitive=True, action="env", notify=RESTART)
    if ctx.result.data.pop("weights_changed", False):
        ctx.notify(RESTART)
    if ctx.result.data.pop("install_changed", False):
        ctx.notify(RESTART)
    enabled, active = unit_state(ctx, unit)
    ctx.result.data["was_active"] = active == "active"
    if enabled != "enabled":
        if ctx.check:
            ctx.record("service", unit, Status.CHANGED, "would enable")
        else:
            if unit_res.status is Status.CHANGED:
                daemon_reload(ctx)
            ctx.must(f"systemctl enable {q(unit)}", what=f"enable {unit}")
            ctx.record("service", unit, Status.CHANGED, "enabled")
    if active != "active" and RESTART not in ctx.notified:
        ctx.notify(RESTART)  # a stopped service starts through the same path: start + wait ready
    elif active == "active" and RESTART not in ctx.notified:
        ctx.record("service", unit, Status.OK, "active, nothing changed: not restarted")


def restart_and_wait(ctx: HostContext) -> None:
    """Handler: daemon-reload, (re)start, wait until the model is served."""
    unit = unit_name(ctx.vars)
    if ctx.check:
        ctx.record("service", unit, Status.SKIPPED, "check mode: would restart")
        return
    daemon_reload(ctx)
    t0 = time.monotonic()
    restart(ctx, unit)  # blocking: the old process is gone before readiness is probed
    waited = readiness.wait_ready(ctx)
    ctx.result.data.setdefault("restarts", 0)
    ctx.result.data["restarts"] += 1
    ctx.record("ready", unit, Status.OK, f"serving after {waited:.0f}s", elapsed_s=time.monotonic() - t0,
               data={"ready_s": round(waited, 1)})
    ctx.play.console.print(f"[{ctx.name}] {ctx.vars['model_name']} served after {waited:.0f}s",
                           highlight=False, markup=False)


def restart_now_or_defer(ctx: HostContext) -> None:
    """Handler for `deploy --batch`: a host that was serving keeps serving on its old unit
    (daemon-reload only) and is marked for the rolling phase, which restarts it through the
    gateways (drain, in-flight wait, restart, ready, undrain). A host that was not serving
    has no request to drop and starts now."""
    if not ctx.result.data.get("was_active"):
        restart_and_wait(ctx)
        return
    unit = unit_name(ctx.vars)
    if ctx.check:
        ctx.record("service", unit, Status.SKIPPED, "check mode: would restart in a rolling batch")
        return
    daemon_reload(ctx)
    ctx.result.data["restart_deferred"] = True
    ctx.record("service", unit, Status.OK, "changed while serving: restart deferred to the rolling batches")


HANDLERS = {RESTART: restart_and_wait}
ROLLING_HANDLERS = {RESTART: restart_now_or_defer}


def check_active(ctx: HostContext) -> None:
    """Used by tasks that only look: fail with the journal when the unit is not active."""
    unit = unit_name(ctx.vars)
    _, active = unit_state(ctx, unit)
    if active != "active":
        raise HostFailed(f"{unit} is {active}; journal: {journal_tail(ctx, unit)}")


def require_deploy_vars(vars: dict[str, Any]) -> None:
    missing = [k for k in ("vllm_version", "model_name") if not vars.get(k)]
    if missing:
        raise VfleetError(f"{', '.join(missing)} not set in the inventory (group vllm); see README 'Variables'")
