"""The gateway's checks that need no host, made before a deploy changes anything.

Why: the gateway step comes after weights, install and service, so a config it cannot render
(a served name it cannot route, two models on one route prefix, hosts of a model that disagree
on its max_tokens ceiling) or one nginx rejects used to fail there, with every vLLM host
already restarted on the new settings and no gateway in front of them. Here each gateway's
config is rendered as its step will render it, and, when the controller has nginx, tested
with `nginx -t` in a scratch prefix, before the first change on any host.

What only the gateway host can tell stays with its step: that it resolves the backends' host
names (nginx resolves `server` names when it loads), that it can listen on its address, and
the drained hosts and caps of its state files (they change only `down` and `max_conns`). For
the controller's nginx -t, host names are given 127.0.0.1 and the listeners a free loopback
port; the rest of the file is tested as written. A controller without nginx has each gateway
test the file with its own nginx instead (check_on_host), in a scratch prefix, before any
host changes; a bare gateway without nginx yet is left to its step."""

from __future__ import annotations

import base64
import dataclasses
import io
import ipaddress
import re
import shlex
import shutil
import socket
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Sequence

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed
from vfleet.roles.gateway._files import GatewayFiles, render_files
from vfleet.roles.gateway._nginx import NJS_MODULE
from vfleet.roles.gateway._render import GATEWAY_CONF_PATH, Backend, GatewayRenderError

__all__ = ["check_gateway", "check_on_host", "controller_nginx", "nginx_test", "files_tar"]

NGINX_TEST_TIMEOUT_S = 120
# the access log of a scratch test: relative, so inside the scratch prefix (-p)
SCRATCH_LOG = "vfleet-access.log"


def check_gateway(cfg: HostConfig, backends: Sequence[Backend], nginx: str | None = None) -> str | None:
    """Why the gateway `cfg` cannot take its config (one line), or None. `nginx`: the
    controller's nginx binary (None: render only)."""
    try:
        render_files(backends, cfg)
    except GatewayRenderError as exc:
        return f"cannot render the gateway config: {exc}"
    if nginx is None:
        return None
    probe_cfg, probe_backends = _probe(cfg, backends)
    why = nginx_test(nginx, render_files(probe_backends, probe_cfg, access_log=SCRATCH_LOG))
    return f"nginx -t (on the controller, {nginx}) rejects the gateway config: {why}" if why else None


def controller_nginx() -> str | None:
    """The controller's nginx, when it can test the gateway's config: with njs (the config
    imports gateway.js); without, each gateway tests it (check_on_host)."""
    if not Path(NJS_MODULE).exists():
        return None
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)


def _probe(cfg: HostConfig, backends: Sequence[Backend]) -> tuple[HostConfig, list[Backend]]:
    """The same config, testable here: host names as 127.0.0.1, listeners on free loopback ports."""
    public, status = _free_ports(2)
    cfg = dataclasses.replace(
        cfg,
        gateway_listen_address="127.0.0.1",
        gateway_port=public,
        monitoring=dataclasses.replace(cfg.monitoring, gateway_status_port=status),
    )
    return cfg, [b if _is_ip(b.address) else dataclasses.replace(b, address="127.0.0.1") for b in backends]


def _is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(str(address).strip("[]"))
        return True
    except ValueError:
        return False


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def nginx_test(nginx: str, files: GatewayFiles) -> str | None:
    """`nginx -t` of the gateway's files inside a minimal nginx.conf (http{} includes
    conf.d/*.conf, as Debian's does) in a scratch prefix: nginx's first error as one line, or None."""
    with tempfile.TemporaryDirectory(prefix="vfleet-nginx-t-") as tmp:
        root = Path(tmp)
        for f in files.all:
            (root / f.relative).parent.mkdir(parents=True, exist_ok=True)
            (root / f.relative).write_text(f.content)
        (root / "nginx.conf").write_text(minimal_nginx_conf(str(root)))
        try:
            r = subprocess.run(
                [nginx, "-t", "-q", "-p", str(root), "-c", str(root / "nginx.conf")],
                capture_output=True,
                text=True,
                timeout=NGINX_TEST_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"could not run it: {type(exc).__name__}: {exc}"
        if r.returncode == 0:
            return None
        return first_error(r.stderr, re.escape(str(root)))


def minimal_nginx_conf(root: str) -> str:
    """An nginx.conf that loads njs and whose http{} includes `root`/conf.d/*.conf, as Debian's
    includes conf.d, with every path nginx writes inside `root`."""
    temp_paths = " ".join(
        f"{kind}_temp_path {root}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"load_module {NJS_MODULE};\npid {root}/nginx.pid;\nerror_log {root}/error.log;\n"
        f"events {{ worker_connections 64; }}\n"
        f"http {{\n access_log off;\n {temp_paths}\n include {root}/conf.d/*.conf;\n}}\n"
    )


def first_error(output: str, scratch: str) -> str:
    """nginx's first error of `nginx -t` as one line, without its scratch directory (a regex)."""
    lines = (
        [ln for ln in output.splitlines() if re.search(r"\[(emerg|crit|alert)\]", ln)]
        or [ln for ln in output.splitlines() if ln.strip()]
        or ["(no output)"]
    )
    return re.sub(scratch + "/", "", re.sub(r"^.*?\[\w+\] \d+#\d+: ", "", lines[0]))


# On a gateway host: the new files (stdin: a base64 tar) in a scratch prefix, tested by the
# host's nginx (its resolver, its addresses); nothing of the running nginx is touched. Without
# nginx or its njs module (a bare gateway) it says so: the gateway step installs both and
# tests the config then.
NO_NGINX = "vfleet: nginx or its njs module is not installed"
SCRATCH = "@VFLEET_SCRATCH@"
ON_HOST_SCRIPT = (
    f"command -v nginx >/dev/null 2>&1 && test -e {NJS_MODULE} || {{ echo {shlex.quote(NO_NGINX)}; exit 0; }}\n"
    "d=$(mktemp -d /tmp/vfleet-nginx-t.XXXXXX) || exit 1\n"
    "trap 'rm -rf -- \"$d\"' EXIT\n"
    'base64 -d | tar -x -C "$d" || exit 1\n'
    f'printf \'%s\' {shlex.quote(minimal_nginx_conf(SCRATCH))} | sed "s|{SCRATCH}|$d|g" > "$d/nginx.conf" || exit 1\n'
    'nginx -t -q -p "$d" -c "$d/nginx.conf" 2>&1\n'
)


def files_tar(files: GatewayFiles) -> str:
    """The files as a base64 tar (each 0600: the scratch copy of a secret stays root's)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in files.all:
            data = f.content.encode()
            info = tarfile.TarInfo(f.relative)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def check_on_host(ctx: HostContext, backends: Sequence[Backend]) -> None:
    """Step body, for a controller without nginx: the gateway's own nginx tests the files it
    will get, before any host changes (HostFailed with nginx's words when it refuses)."""
    try:
        files = render_files(backends, ctx.config, access_log=SCRATCH_LOG)
    except GatewayRenderError as exc:
        raise HostFailed(f"cannot render the gateway config: {exc}") from None
    r = ctx.run(f"sh -c {shlex.quote(ON_HOST_SCRIPT)}", stdin=files_tar(files), timeout=NGINX_TEST_TIMEOUT_S)
    if NO_NGINX in r.stdout:
        ctx.record(
            "nginx -t",
            GATEWAY_CONF_PATH,
            Status.SKIPPED,
            "nginx or its njs module is not installed yet: the gateway step installs them and tests the config then",
        )
    elif r.timed_out or not r.ok:
        why = first_error(r.stdout + r.stderr, r"/tmp/vfleet-nginx-t\.\w+")
        raise HostFailed(f"nginx -t on the gateway rejects the new config: {why}")
    else:
        ctx.record("nginx -t", GATEWAY_CONF_PATH, Status.OK, "the new config passes this host's nginx -t")
