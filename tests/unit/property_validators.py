"""The real validators of the property-based suite: what each rendered file's consumer says of it.

    nginx -t                  the gateway's files (config, njs module), inside a minimal nginx.conf
                              (Debian's layout, njs loaded)
    systemd-analyze verify    every unit of a host, drop-ins beside them, in one call
    sh (and systemd's reader) each EnvironmentFile, value by value against what vfleet meant
    promtool check config     prometheus.yml, which reads its rules and file_sd targets
    bash -n                   every shell command vfleet prints or runs

Each validator runs as a child process; they are started together and waited for together
(an example costs the slowest, not the sum). A validator missing here FAILS the suite: CI's
`make setup` installs nginx, systemd and prometheus, and a skipped check is no check.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests.unit.test_quoting import systemd_read_env_value, systemd_read_words
from vfleet.roles.gateway._nginx import NJS_MODULE
from vfleet.roles.gateway._render import ACCESS_LOG

__all__ = [
    "Check",
    "run_checks",
    "tool",
    "nginx_check",
    "units_check",
    "promtool_check",
    "bash_check",
    "env_file_values",
    "exec_words",
]

_APT = {"nginx": "nginx", "systemd-analyze": "systemd", "promtool": "prometheus", "bash": "bash", "sh": "dash"}


def tool(name: str) -> str:
    """The validator's path; a missing one fails (never skips) the test."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: `apt-get install -y {_APT.get(name, name)}` (make setup installs it)")
    return path


@dataclass
class Check:
    """One validator run: argv, and a judge of its result (None: passed; else why not)."""

    what: str
    argv: list[str]
    judge: Callable[[subprocess.CompletedProcess], str | None]
    cwd: Path | None = None


def run_checks(checks: list[Check]) -> list[str]:
    """Start every check, then wait for each: the failures, each naming its check."""
    procs = [
        (
            c,
            subprocess.Popen(
                c.argv,
                cwd=c.cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, "LC_ALL": "C.UTF-8", "SYSTEMD_LOG_COLOR": "0"},
            ),
        )
        for c in checks
    ]
    failures = []
    for c, p in procs:
        out, err = p.communicate(timeout=60)
        r = subprocess.CompletedProcess(
            c.argv, p.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        )
        why = c.judge(r)
        if why:
            failures.append(f"{c.what}: {why}")
    return failures


# --- nginx -------------------------------------------------------------------------------
def nginx_check(prefix: Path, nginx_dir: Path, addresses: set[str]) -> Check:
    """nginx -t (njs loaded) on the files of `nginx_dir` (a rendered /etc/nginx: conf.d/*.conf
    included in http{}, like Debian's, and what they name by relative path, such as
    vfleet/gateway.js), copied into `prefix`. nginx resolves an upstream's host names at load
    and stops at the first it cannot: in the copies of conf.d/, each name among `addresses`
    (the servers vfleet meant) is swapped for 127.0.0.1, so the rest of the file is still
    checked, and a server line vfleet did not mean still fails. The access log goes to `prefix`."""
    for source in sorted(p for p in nginx_dir.rglob("*") if p.is_file()):
        text = source.read_text().replace(ACCESS_LOG, str(prefix / "access.json"))
        if source.parent == nginx_dir / "conf.d":
            for address in sorted(addresses, key=len, reverse=True):
                host, _, port = address.rpartition(":")
                if not re.fullmatch(r"[0-9.]+|\[[0-9A-Fa-f:.]+\]", host):
                    text = text.replace(f"server {address} ", f"server 127.0.0.1:{port} ")
        copy = prefix / source.relative_to(nginx_dir)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(text)
    conf = prefix / "nginx.conf"
    conf.write_text(
        f"load_module {NJS_MODULE};\n"
        f"pid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\nevents {{ worker_connections 64; }}\n"
        f"http {{\n access_log off;\n client_body_temp_path {prefix}/body; proxy_temp_path {prefix}/proxy;\n"
        f" fastcgi_temp_path {prefix}/fcgi; uwsgi_temp_path {prefix}/uwsgi; scgi_temp_path {prefix}/scgi;\n"
        f" include {prefix}/conf.d/*.conf;\n}}\n"
    )

    def judge(r: subprocess.CompletedProcess) -> str | None:
        return None if r.returncode == 0 and "test is successful" in r.stderr else r.stderr.strip()[-1500:]

    return Check("nginx -t", [tool("nginx"), "-t", "-p", str(prefix), "-c", str(conf)], judge)


# --- systemd -----------------------------------------------------------------------------
_NOT_EXECUTABLE = re.compile(r"^(\S+): Command (.*) is not executable: No such file or directory$")


def units_check(units: list[Path], executables: set[str]) -> Check:
    """systemd-analyze verify on a host's units (drop-in folders beside them are read too).
    systemd warns with exit code 0 about a setting it ignores, so any output fails, except
    that an ExecStart= binary vfleet meant (`executables`) is missing on this machine."""

    def judge(r: subprocess.CompletedProcess) -> str | None:
        bad = [
            ln
            for ln in (r.stdout + r.stderr).splitlines()
            if ln.strip() and not ((m := _NOT_EXECUTABLE.match(ln)) and m.group(2) in executables)
        ]
        return "\n".join(bad)[-1500:] if bad else None

    return Check("systemd-analyze verify", [tool("systemd-analyze"), "verify", "--man=no", *map(str, units)], judge)


def exec_words(unit: str, key: str = "ExecStart") -> list[str]:
    """A command line of a rendered unit, continuation lines joined, read like systemd does."""
    m = re.search(rf"^{key}=((?:.*\\\n)*.*)$", unit, re.M)
    assert m, unit
    return systemd_read_words(m.group(1).replace("\\\n", " "))


# --- EnvironmentFile ---------------------------------------------------------------------
_SH_FAILED = "SH_COULD_NOT_SOURCE_THE_FILE"


def env_file_values(paths: list[Path]) -> list[tuple[dict[str, str], dict[str, str]]]:
    """Each file as systemd reads it (a port of its env-file parser, one KEY=VALUE a line) and
    as a POSIX shell reads it (`set -a; . FILE` in a clean environment, then env -0), for the
    keys the file sets; every file in one sh run."""
    by_systemd = []
    for path in paths:
        values = {}
        for line in path.read_text().split("\n"):
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                values[key] = systemd_read_env_value(value)
        by_systemd.append(values)
    script = (
        'for f; do (set -a; . "$f" >/dev/null 2>&1 && exec env -0) || printf "%s\\000" "$UNREADABLE"; '
        'printf "\\001\\000"; done'
    )
    r = subprocess.run(
        [tool("env"), "-i", f"UNREADABLE={_SH_FAILED}=", tool("sh"), "-c", script, "sh", *map(str, paths)],
        capture_output=True,
    )
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    read = [
        dict(item.decode().partition("=")[::2] for item in chunk.split(b"\0") if item)
        for chunk in r.stdout.split(b"\1\0")[: len(paths)]
    ]
    return [
        (want, {k: v for k, v in env.items() if k in want or k == _SH_FAILED}) for want, env in zip(by_systemd, read)
    ]


# --- Prometheus, shell -------------------------------------------------------------------
def promtool_check(folder: Path) -> Check:
    """promtool check config: the config, its rule files and file_sd targets together."""

    def judge(r: subprocess.CompletedProcess) -> str | None:
        return None if r.returncode == 0 else (r.stdout + r.stderr).strip()[-1500:]

    return Check("promtool check config", [tool("promtool"), "check", "config", "prometheus.yml"], judge, cwd=folder)


def bash_check(script: Path) -> Check:
    def judge(r: subprocess.CompletedProcess) -> str | None:
        return None if r.returncode == 0 and not r.stderr.strip() else r.stderr.strip()[-1500:]

    return Check("bash -n", [tool("bash"), "-n", str(script)], judge)
