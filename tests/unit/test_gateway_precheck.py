"""deploy (and service, gateway) make the gateway's host-free checks before the first change on any
host (vfleet/roles/gateway/_precheck.py, vfleet/cli/deploy_steps.py check_gateways): a config the
gateway cannot render, or one `nginx -t` rejects on the controller, is exit 2 with nothing
connected. And what nginx -t taught about scale: an upstream zone sized by its servers."""

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest

import vfleet.roles.gateway as gateway_face
import vfleet.roles.gateway._precheck as precheck
from tests.unit.gateway_cases import BACKENDS, GW
from tests.unit.test_hostile_inputs import run_case
from vfleet.roles.gateway import _render as gr
from vfleet.roles.gateway._files import GatewayFiles, render_files
from vfleet.roles.gateway._render import Backend


def _edited(files: GatewayFiles, edit: Callable[[str], str]) -> GatewayFiles:
    """The same files with the conf.d text changed by `edit` (the njs module kept)."""
    return dataclasses.replace(files, conf=dataclasses.replace(files.conf, content=edit(files.conf.content)))


def test_render_errors_are_found_without_nginx():
    bad = [Backend("a", "10.0.0.1", 8000, "m", route_prefix="x"), Backend("b", "10.0.0.2", 8000, "n", route_prefix="x")]
    assert "both use gateway_route_prefix 'x'" in precheck.check_gateway(GW, bad, None)
    assert precheck.check_gateway(GW, BACKENDS, None) is None


def test_controller_nginx_accepts_host_names_it_cannot_resolve_and_any_listen_address():
    """Host names resolve on the gateway, not here; the listen address is the gateway's: the
    controller's nginx -t tests the rest of the file as written."""
    from tests.unit.gateway_cases import gw

    names = [Backend("gpu04", "gpu04.lab.invalid", 8000, "tiny"), *BACKENDS[:3]]
    cfg = gw({"gateway_listen_address": "10.255.255.254", "gateway_port": 80})
    assert precheck.check_gateway(cfg, names, shutil.which("nginx")) is None


def test_controller_nginx_rejection_is_one_line_with_nginx_words():
    files = _edited(
        render_files(BACKENDS[:1], GW, access_log=precheck.SCRATCH_LOG),
        lambda conf: conf.replace("least_conn;", "least_conn"),
    )
    why = precheck.nginx_test(shutil.which("nginx"), files)
    assert why and "\n" not in why and "vfleet-nginx-t-" not in why, why


def test_controller_nginx_without_njs_leaves_the_test_to_each_gateway(monkeypatch):
    """The config imports gateway.js: a controller nginx without the njs module cannot test it."""
    assert precheck.controller_nginx() == shutil.which("nginx")
    monkeypatch.setattr(precheck, "NJS_MODULE", "/nonexistent/ngx_http_js_module.so")
    assert precheck.controller_nginx() is None


def _fake_nginx(tmp_path: Path) -> str:
    script = tmp_path / "nginx"
    script.write_text(
        "#!/bin/sh\necho 'nginx: [emerg] 1#1: unknown directive \"bogus\" in conf.d/x.conf:3' >&2\nexit 1\n"
    )
    os.chmod(script, 0o755)
    return str(script)


@pytest.mark.parametrize("task", ["deploy", "service", "gateway"])
def test_deploy_stops_before_any_host_when_nginx_t_rejects(task, tmp_path, monkeypatch, capsys):
    """The gateway step comes after weights, install and service: its nginx -t must not be the
    first to say no (no connection at all, asserted on the runner's connection factory)."""
    monkeypatch.setattr(gateway_face, "controller_nginx", lambda: _fake_nginx(tmp_path))
    case = {"args": [task], "code": 2}
    code, out, connections = run_case(case, tmp_path, monkeypatch, capsys)
    assert code == 2 and connections == [], out
    assert "error: gateway gw01: nginx -t (on the controller" in out
    assert 'unknown directive "bogus" in conf.d/x.conf:3; nothing was changed on any host' in out


def test_tasks_that_do_not_write_the_gateway_skip_its_checks(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gateway_face, "controller_nginx", lambda: _fake_nginx(tmp_path))
    _, out, _ = run_case({"args": ["weights", "--check"]}, tmp_path, monkeypatch, capsys)
    assert "nginx -t (on the controller" not in out and "gateway gw01" not in out


@pytest.mark.parametrize("n", [1, 50, 1000])
def test_upstream_zone_grows_with_the_servers(n):
    servers = [{"server": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:8000"} for i in range(n)]
    kib = int(gr.upstream_zone_size(servers)[:-1])
    assert kib >= 64 and kib * 1024 >= 64 * 1024 + n * 784  # measured: 784 KiB held 1,000 servers


def test_nginx_t_accepts_one_model_of_2000_hosts():
    """A fixed 64k zone held about 50 servers: nginx -t failed for a model of 100 hosts."""
    bs = [Backend(f"gpu{i:05d}", f"10.1.{i // 256}.{i % 256}", 8000, "tiny", max_conns=8) for i in range(2000)]
    assert precheck.nginx_test(shutil.which("nginx"), render_files(bs, GW, access_log=precheck.SCRATCH_LOG)) is None


# --- a controller without nginx: each gateway's own nginx -t, before any host changes -------------


class _LocalConnection:
    """Runs a command here with bash (what a gateway host would run over SSH), and records it."""

    def __init__(self, seen: list, path: str | None = None):
        self.seen, self.path = seen, path

    def run(self, command: str, *, timeout=None, stdin=None):
        import subprocess

        from vfleet.engine.connection import CommandResult

        env = {**os.environ, **({"PATH": self.path} if self.path is not None else {})}
        self.seen.append(command)
        r = subprocess.run(["bash", "-c", command], input=stdin, capture_output=True, text=True, env=env)
        return CommandResult(command, r.returncode, r.stdout, r.stderr)

    def close(self):
        pass


class _Ctx:
    def __init__(self, conn, config=GW):
        self.conn, self.config, self.records = conn, config, []

    def run(self, command, *, timeout=None, stdin=None):
        return self.conn.run(command, timeout=timeout, stdin=stdin)

    def record(self, action, target, status, message=""):
        self.records.append((action, status.value, message))


def test_on_host_check_runs_the_hosts_nginx_in_a_scratch_prefix():
    seen: list = []
    ctx = _Ctx(_LocalConnection(seen))
    precheck.check_on_host(ctx, BACKENDS[:3])
    assert ctx.records == [("nginx -t", "ok", "the new config passes this host's nginx -t")]
    assert len(seen) == 1 and "mktemp -d /tmp/vfleet-nginx-t." in seen[0]


def test_on_host_check_sends_every_file_as_a_root_only_tar():
    """stdin of the on-host check: the conf, the njs module (and TLS files) under their paths
    relative to /etc/nginx, each 0600 in the scratch copy (the module holds the backend key)."""
    import base64
    import io
    import tarfile

    files = render_files(BACKENDS[:2], GW, access_log=precheck.SCRATCH_LOG)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(precheck.files_tar(files)))) as tar:
        got = {m.name: (m.mode, tar.extractfile(m).read().decode()) for m in tar.getmembers()}
    assert got == {f.relative: (0o600, f.content) for f in files.all}
    assert set(got) == {"conf.d/vfleet-gateway.conf", "vfleet/gateway.js"}


def test_on_host_check_refusal_is_nginx_words_in_one_line(monkeypatch):
    real = precheck.render_files
    monkeypatch.setattr(
        precheck,
        "render_files",
        lambda bs, cfg, **kw: _edited(real(bs, cfg, **kw), lambda conf: "bogus_directive on;\n"),
    )
    with pytest.raises(
        precheck.HostFailed,
        match=r"^nginx -t on the gateway rejects the new config: "
        r'unknown directive "bogus_directive" in conf\.d/vfleet-gateway\.conf:1$',
    ):
        precheck.check_on_host(_Ctx(_LocalConnection([])), BACKENDS[:1])


def test_on_host_check_leaves_a_bare_gateway_to_its_step(tmp_path):
    (tmp_path / "bin").mkdir()
    for tool in ("sh", "bash", "mktemp", "mkdir", "cat", "sed", "rm", "printf", "base64", "tar", "test"):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), tmp_path / "bin" / tool)
    ctx = _Ctx(_LocalConnection([], path=str(tmp_path / "bin")))
    precheck.check_on_host(ctx, BACKENDS[:1])
    assert ctx.records[0][:2] == ("nginx -t", "skipped") and "installs them" in ctx.records[0][2]


def test_on_host_check_leaves_a_gateway_without_njs_to_its_step(monkeypatch):
    """nginx is there but not its njs module (a gateway from before njs): the config imports
    gateway.js, so only the gateway step (which installs the module) can test it."""
    from vfleet.roles.gateway._nginx import NJS_MODULE

    assert NJS_MODULE in precheck.ON_HOST_SCRIPT
    monkeypatch.setattr(
        precheck, "ON_HOST_SCRIPT", precheck.ON_HOST_SCRIPT.replace(NJS_MODULE, "/nonexistent/ngx_http_js_module.so")
    )
    ctx = _Ctx(_LocalConnection([]))
    precheck.check_on_host(ctx, BACKENDS[:1])
    assert ctx.records[0][:2] == ("nginx -t", "skipped") and "njs module" in ctx.records[0][2]


def test_deploy_without_controller_nginx_asks_the_gateway_first(tmp_path, monkeypatch, capsys):
    """The only command any host ran before the refusal is the gateway's nginx -t."""
    import vfleet.engine.runner
    from tests.unit.test_hostile_inputs import _inventory
    from vfleet.cli.main import program

    seen: list = []
    monkeypatch.setattr(gateway_face, "controller_nginx", lambda: None)
    monkeypatch.setattr(vfleet.engine.runner, "open_connection", lambda *a, **k: _LocalConnection(seen))
    real = precheck.render_files
    monkeypatch.setattr(
        precheck,
        "render_files",
        lambda bs, cfg, **kw: _edited(
            real(bs, cfg, **kw), lambda conf: conf.replace("least_conn;", "least_conn bogus;")
        ),
    )
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(SystemExit) as exc:
        program.run(["vfleet", "deploy", "--inventory", str(_inventory({}, tmp_path))])
    out = capsys.readouterr()
    assert exc.value.code == 2, out
    assert (
        "error: gateway gw01: nginx -t on the gateway rejects the new config: invalid number of arguments "
        'in "least_conn" directive'
        in out.err
        and "nothing was changed on any host" in out.err
    )
    assert len(seen) == 1 and "nginx -t" in seen[0]
