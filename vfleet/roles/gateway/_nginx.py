"""The nginx gateway on the `gateways` group: an upstream per served model of the vLLM hosts of the
inventory, rendered from templates/, checked with `nginx -t` before it is kept (a rejected
config is put back at once: the running nginx never sees it), and reloaded gracefully
(never restarted, so open streams finish).

Drained hosts (rolling restarts, `vfleet drain`) are kept in a state file on each gateway,
so a deploy in the middle of maintenance does not put a drained host back; the connection
caps it was rendered with are kept beside it (vfleet/roles/gateway/_caps.py). `plan` is a pure
function of the config, the rendered text and the facts; `apply_config` gathers and applies."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.changes import Change, apply, command, file_change, service_changes
from vfleet.engine.facts import CommandOk, Fact, FileFact, UnitFact, gather
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed
from vfleet.roles.gateway._caps import CAPS_STATE, GatewayCaps
from vfleet.roles.gateway._files import TLS_PATHS, GatewayFiles, render_files
from vfleet.roles.gateway._njs import JS_PATH
from vfleet.roles.gateway._reload import RELOAD_WAIT_S, reload_command
from vfleet.roles.gateway._render import GATEWAY_CONF_PATH, Backend, GatewayRenderError

__all__ = [
    "DRAINED_STATE",
    "facts_for",
    "plan",
    "plan_config",
    "read_drained",
    "configure",
    "set_drained",
    "apply_config",
]

DRAINED_STATE = "/var/lib/vfleet/drained-hosts"
DEFAULT_SITE = "/etc/nginx/sites-enabled/default"
DEFAULT_SITE_PARKED = "/etc/nginx/default-site.vfleet-disabled"
# Debian's njs for nginx: the package puts the module here and loads it (modules-enabled/).
NJS_PACKAGE = "libnginx-mod-http-js"
NJS_MODULE = "/usr/lib/nginx/modules/ngx_http_js_module.so"


def facts_for(*, diff: bool = False) -> dict[str, Fact]:
    """What the gateway step reads: the state files with their content (small, and read as
    data), the config's only for --diff."""
    return {
        "nginx": CommandOk("command -v nginx"),
        "njs": CommandOk(f"test -e {NJS_MODULE}"),
        "conf": FileFact(GATEWAY_CONF_PATH, with_content=diff),
        "js": FileFact(JS_PATH),
        "tls_cert": FileFact(TLS_PATHS["cert"], with_content=diff),
        "tls_key": FileFact(TLS_PATHS["key"]),
        "default_site": FileFact(DEFAULT_SITE),
        "drained": FileFact(DRAINED_STATE, with_content=True),
        "caps": FileFact(CAPS_STATE, with_content=True),
        "unit": UnitFact("nginx"),
    }


def drained_names(facts: Mapping[str, Any]) -> set[str]:
    content = facts["drained"].content or ""
    return {line.strip() for line in content.splitlines() if line.strip()}


def plan(
    cfg: HostConfig,
    files: GatewayFiles,
    facts: Mapping[str, Any],
    drained: Iterable[str] | None = None,
    caps: GatewayCaps | None = None,
) -> list[Change]:
    """Changes that make this gateway serve `files`; [] when it already does. With `drained`
    and `caps` (what the files were rendered with), their state files are written first, so a
    controller that dies in between leaves intent and config converging on the next run. The
    module and TLS files go before the config that names them; each is tested by `nginx -t`
    and put back when it fails, so the running nginx never loads a config that cannot work."""
    changes: list[Change] = []
    if not facts["nginx"] or not facts["njs"]:
        changes.append(
            command(
                "package",
                f"nginx {NJS_PACKAGE}",
                "install",
                f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx {NJS_PACKAGE}",
                timeout=900,
            )
        )
    if drained is not None:
        state = "".join(f"{n}\n" for n in sorted(set(drained)))
        changes += file_change(DRAINED_STATE, state, facts["drained"], mode="0644", action="drained state")
    if caps is not None and (caps.max_conns or facts["caps"].kind != "missing"):  # none to keep: no file
        changes += file_change(CAPS_STATE, caps.text(), facts["caps"], mode="0644", action="gateway caps")
    if cfg.gateway_port == 80 and facts["default_site"].kind != "missing":
        changes.append(
            command(
                "nginx config",
                DEFAULT_SITE,
                "disabled (it also claims port 80)",
                f"mv -f {DEFAULT_SITE} {DEFAULT_SITE_PARKED}",
            )
        )
    state_of = {JS_PATH: "js", TLS_PATHS["cert"]: "tls_cert", TLS_PATHS["key"]: "tls_key", GATEWAY_CONF_PATH: "conf"}
    written: list[Change] = []
    for f in files.all:
        written += file_change(
            f.path,
            f.content,
            facts[state_of[f.path]],
            mode=f.mode,
            owner="root",
            group="root",
            sensitive=f.secret,
            action="nginx config",
            validate="nginx -t",
        )
    stale = [TLS_PATHS[kind] for kind in ("cert", "key") if not files.tls and facts[f"tls_{kind}"].kind != "missing"]
    if stale:  # TLS turned off: the key does not stay behind
        written.append(command("nginx config", " ".join(stale), "removed (TLS is off)", "rm -f -- " + " ".join(stale)))
    changes += written
    running = facts["nginx"] and facts["unit"].active == "active"
    changes += service_changes("nginx", facts["unit"], enabled=True, started=True)
    if running and (written or any(c.target == DEFAULT_SITE for c in changes)):
        changes.append(
            command(
                "service",
                "nginx",
                "reloaded (graceful)",
                reload_command(cfg.monitoring.gateway_status_port, files.config_id),
                timeout=RELOAD_WAIT_S + 30,
            )
        )
    return changes


def read_drained(ctx: HostContext) -> set[str]:
    return drained_names(gather(ctx, {"drained": FileFact(DRAINED_STATE, with_content=True)}))


def plan_config(
    cfg: HostConfig, backends: Sequence[Backend], facts: Mapping[str, Any], drained: set[str] | None = None
) -> list[Change]:
    """The changes for this gateway from its facts (pure, no SSH: what a drain or an undrain
    computes on the controller, linear in the hosts; benchmarks/render_scale.py times it):
    rendered for the hosts not drained (the state file's set, or `drained` to set it) with
    the caps the gateway keeps."""
    names = {b.name for b in backends}
    down = (drained if drained is not None else drained_names(facts)) & names
    backends = GatewayCaps.parse(facts["caps"].content).kept(backends)
    try:
        files = render_files(backends, cfg, drained=down)
    except GatewayRenderError as exc:
        raise HostFailed(f"cannot render the gateway config: {exc}") from None
    return plan(cfg, files, facts, drained=drained, caps=GatewayCaps.of(backends))


def apply_config(ctx: HostContext, backends: Sequence[Backend], drained: set[str] | None = None) -> None:
    """Gather, plan and apply. A config nginx -t rejects fails the host with nginx's words."""
    changes = plan_config(ctx.config, backends, gather(ctx, facts_for(diff=ctx.diff)), drained)
    if not changes:
        ctx.record("nginx config", GATEWAY_CONF_PATH, Status.OK)
    apply(ctx, changes)


def configure(ctx: HostContext, backends: Sequence[Backend]) -> None:
    """Step body for a gateway host."""
    apply_config(ctx, backends)


def set_drained(ctx: HostContext, backends: Sequence[Backend], drained: set[str]) -> None:
    """Mark exactly `drained` down on this gateway (state file, then config)."""
    apply_config(ctx, backends, set(drained))
