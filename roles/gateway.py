"""The nginx gateway on the `gateways` group: an upstream of every vLLM host of the
inventory, rendered from templates/, checked with `nginx -t` before every reload, and
reloaded gracefully (never restarted, so open streams finish). A config that fails
`nginx -t` is taken back out at once: the running nginx never sees it.

Drained hosts (rolling restarts, `vfleet drain`) are kept in a state file on each gateway,
so a deploy in the middle of maintenance does not put a drained host back."""
from __future__ import annotations

import shlex
import time
from typing import Any, Iterable

from fleet.inventory import Inventory
from fleet.operations import put_file
from fleet.results import Status
from fleet.runner import HostContext, HostFailed
from roles.gateway_render import GATEWAY_CONF_PATH, GatewayRenderError, render_gateway

q = shlex.quote
DRAINED_STATE = "/var/lib/vfleet/drained-hosts"
DEFAULT_SITE = "/etc/nginx/sites-enabled/default"


def backends(inventory: Inventory, group: str = "vllm") -> list[dict[str, Any]]:
    return [{"name": h.name, "address": h.address, "port": int(h.vars.get("vllm_port", 8000))}
            for h in inventory.hosts.values() if group in h.groups]


def read_drained(ctx: HostContext) -> set[str]:
    r = ctx.run(f"cat {DRAINED_STATE} 2>/dev/null")
    return {line.strip() for line in r.stdout.splitlines() if line.strip()}


def write_drained(ctx: HostContext, names: Iterable[str]) -> None:
    text = "".join(f"{n}\n" for n in sorted(set(names)))
    ctx.must(f"mkdir -p {q(DRAINED_STATE.rsplit('/', 1)[0])} && cat > {DRAINED_STATE}.tmp && mv -f {DRAINED_STATE}.tmp {DRAINED_STATE}",
             stdin=text, what="write drained-hosts state")


def ensure_nginx(ctx: HostContext) -> None:
    if ctx.run("command -v nginx >/dev/null").ok:
        ctx.record("package", "nginx", Status.OK)
        return
    if ctx.check:
        ctx.record("package", "nginx", Status.CHANGED, "would install")
        return
    r = ctx.run("DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx", timeout=900)
    if not r.ok:
        raise HostFailed(f"nginx is not installed and apt-get could not install it: {r.tail(2)}; "
                         f"install nginx on the gateway host")
    ctx.record("package", "nginx", Status.CHANGED, "installed")


def apply_config(ctx: HostContext, inventory: Inventory, drained: set[str]) -> bool:
    """Render, put, `nginx -t` (restore the previous file on failure), reload if changed.
    Returns True if nginx was reloaded/started."""
    try:
        text = render_gateway(backends(inventory), ctx.vars, drained=drained)
    except GatewayRenderError as exc:
        raise HostFailed(f"cannot render the gateway config: {exc}") from None
    backup = f"{GATEWAY_CONF_PATH}.vfleet-prev"
    if not ctx.check:
        ctx.run(f"if [ -f {GATEWAY_CONF_PATH} ]; then cp -p {GATEWAY_CONF_PATH} {backup}; else rm -f {backup}; fi")
    res = put_file(ctx, GATEWAY_CONF_PATH, text, mode="0644", owner="root", group="root", action="nginx config")
    removed_default = False
    if int(ctx.vars.get("gateway_port", 80)) == 80 and ctx.run(f"test -e {DEFAULT_SITE}").ok:
        if ctx.check:
            ctx.record("nginx config", DEFAULT_SITE, Status.CHANGED, "would remove (it also claims port 80)")
        else:
            ctx.must(f"mv -f {DEFAULT_SITE} /etc/nginx/default-site.vfleet-disabled", what="disable default site")
            ctx.record("nginx config", DEFAULT_SITE, Status.CHANGED, "disabled (it also claims port 80)")
            removed_default = True
    if ctx.check:
        return False
    t = ctx.run("nginx -t 2>&1")
    if not t.ok:
        ctx.run(f"if [ -f {backup} ]; then mv -f {backup} {GATEWAY_CONF_PATH}; else rm -f {GATEWAY_CONF_PATH}; fi")
        if removed_default:
            ctx.run(f"mv -f /etc/nginx/default-site.vfleet-disabled {DEFAULT_SITE}")
        raise HostFailed(f"nginx -t rejected the new config (the running config is untouched): {t.tail(3)}")
    ctx.run(f"rm -f {backup}")
    active = ctx.run("systemctl is-active nginx").stdout.strip()
    enabled = ctx.run("systemctl is-enabled nginx").stdout.strip()
    if enabled != "enabled":
        ctx.must("systemctl enable nginx", what="enable nginx")
        ctx.record("service", "nginx", Status.CHANGED, "enabled")
    if active != "active":
        ctx.must("systemctl start nginx", what="start nginx")
        ctx.record("service", "nginx", Status.CHANGED, "started")
        return True
    if res.status is Status.CHANGED or removed_default:
        t0 = time.monotonic()
        ctx.must("systemctl reload nginx", what="reload nginx")
        ctx.record("service", "nginx", Status.CHANGED, "reloaded (graceful)", elapsed_s=time.monotonic() - t0)
        return True
    return False


def configure(ctx: HostContext, inventory: Inventory) -> None:
    """Step body for a gateway host."""
    ensure_nginx(ctx)
    drained = read_drained(ctx) & {b["name"] for b in backends(inventory)}
    apply_config(ctx, inventory, drained)


def set_drained(ctx: HostContext, inventory: Inventory, drained: set[str]) -> None:
    """Mark exactly `drained` down on this gateway. The state file is written first, so a
    controller that dies in between leaves intent and config converging on the next run."""
    if not ctx.check:
        write_drained(ctx, drained)
    apply_config(ctx, inventory, drained)
