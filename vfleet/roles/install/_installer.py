"""Which tool fills a new venv, uv or pip, and the shell each runs (the venv's install step).

Why two: uv installs the same wheels from the same wheelhouse in about two thirds of pip's time
on one core (docs/install.md, "How the venv is installed"), but not every host has it, while
pip comes with every venv (ensurepip). The choice is made on the controller, from the host's PATH
(a fact) and the controller's wheelhouse (a uv wheel there is pushed with the rest and
unpacked on the host), so the install's reason says which tool ran and why."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError

__all__ = ["Installer", "choose", "uv_wheel_in", "install_commands", "TOOLS_DIR"]

q = shlex.quote
# Under vllm_root: one folder per uv version unpacked from a wheelhouse (`.tools/uv-0.13.9/uv`).
TOOLS_DIR = ".tools"
# A uv wheel's file name (PEP 427): uv-<version>-<python tag>-<abi tag>-<platform tag>.whl
_UV_WHEEL = re.compile(r"^uv-(\d+(?:\.\d+)*)-[^-/]+-[^-/]+-[^-/]+\.whl$")
# Copies the uv binary out of the wheel (its .data/scripts/uv) through a temporary name, so a
# run killed half way leaves no half binary under the name the next run trusts; zipfile checks
# each member's CRC-32 as it reads. Needs no pip on the host, only its python.
_UNPACK_UV = (
    "import os, sys, zipfile; wheel, dest = sys.argv[1:]; z = zipfile.ZipFile(wheel); "
    "name = next(n for n in z.namelist() if n.endswith('.data/scripts/uv')); "
    "os.makedirs(os.path.dirname(dest), exist_ok=True); open(dest + '.tmp', 'wb').write(z.read(name)); "
    "os.chmod(dest + '.tmp', 0o755); os.replace(dest + '.tmp', dest)"
)


@dataclass(frozen=True)
class Installer:
    """The tool an install runs: "uv" or "pip", why (one line for the recap) and, for a uv
    that comes from the wheelhouse, the wheel's file name and uv's version."""

    tool: str
    why: str
    uv_wheel: str | None = None
    uv_version: str | None = None


def uv_wheel_in(wheelhouse: str | None) -> str | None:
    """The uv wheel in the controller's wheelhouse (the newest version when several), or None."""
    if not wheelhouse:
        return None
    folder = Path(wheelhouse).expanduser()
    found = [
        (tuple(int(x) for x in m.group(1).split(".")), p.name)
        for p in (folder.glob("uv-*.whl") if folder.is_dir() else [])
        if (m := _UV_WHEEL.match(p.name))
    ]
    return max(found)[1] if found else None


def choose(cfg: HostConfig, *, uv_on_path: bool, uv_wheel: str | None) -> Installer:
    """vllm_installer resolved for this host. auto takes uv only for an offline install (the
    wheelhouse's uv first: its version is pinned; else uv on the PATH): online, pip reads the
    host's pip configuration (an index mirror, a proxy), which uv does not. pip whenever
    vllm_site_packages is set: uv does not count what a .pth adds as installed."""
    spec, wanted = cfg.install_spec, cfg.vllm_installer
    if wanted == "pip":
        return Installer("pip", "vllm_installer: pip")
    if spec.site_packages:
        if wanted == "uv":
            raise VfleetError(
                "vllm_installer uv: uv does not see the packages vllm_site_packages adds "
                "(a .pth); set vllm_installer to pip or auto"
            )
        return Installer("pip", "vllm_site_packages: uv would not see the image's packages")
    if not spec.offline and wanted == "auto":
        return Installer("pip", "online: pip reads the host's pip configuration")
    match = _UV_WHEEL.match(uv_wheel or "") if spec.offline else None
    if match:
        return Installer("uv", f"uv {match.group(1)} from the wheelhouse", uv_wheel, match.group(1))
    if uv_on_path:
        return Installer("uv", "uv on the host's PATH")
    if wanted == "uv":
        raise VfleetError(
            "vllm_installer uv: no uv on the host's PATH"
            + (" nor a uv wheel in vllm_wheelhouse" if spec.offline else "")
        )
    return Installer("pip", "no uv on the host's PATH nor in the wheelhouse")


def install_commands(cfg: HostConfig, venv: str, installer: Installer) -> str:
    """Shell from the fresh venv to the installed requirements (removals after): the same
    requirement list and offline sources for both tools. Requirements and package names come
    after `--`, so a pin such as `--index-url=...` or `-rFILE` is read as a requirement and
    refused, never as an option."""
    spec = cfg.install_spec
    req = " ".join(q(r) for r in [f"{spec.package}=={spec.version}", *spec.pins])
    names = " ".join(q(p) for p in spec.remove)
    no_deps = " --no-deps" if spec.no_deps else ""
    wheelhouse = q(cfg.wheelhouse_dir)
    if installer.tool == "uv":
        uv, unpack = "uv", ""
        if installer.uv_wheel:
            uv = q(posixpath.join(cfg.vllm_root, TOOLS_DIR, f"uv-{installer.uv_version}", "uv"))
            wheel = q(posixpath.join(cfg.wheelhouse_dir, installer.uv_wheel))
            unpack = f"[ -x {uv} ] || {_python(spec.python)} -c {q(_UNPACK_UV)} {wheel} {uv}; "
        # --offline: no network at all; --no-config: no uv.toml of the host; bytecode compiled
        # as pip does (the service user cannot write __pycache__ into root's venv). The cache
        # lies beside the venv (one file system: uv hardlinks from it instead of copying; the
        # default under --no-cache is /tmp, a tmpfs on many hosts) and goes when the script ends.
        cache = posixpath.join(cfg.vllm_root, TOOLS_DIR, "uv-cache")
        source = f" --no-config --offline --no-index --find-links {wheelhouse}" if spec.offline else ""
        flags = f" --python {q(venv)}/bin/python --cache-dir {q(cache)}"
        remove = f" && {uv} pip uninstall -q{flags} -- {names}" if names else ""
        return (
            f"{_python(spec.python)} -m venv --without-pip -- {q(venv)}; {unpack}"
            f"trap {q('rm -rf -- ' + q(cache))} EXIT; rm -rf -- {q(cache)}; "
            f"{uv} pip install -q{flags}{source} --compile-bytecode{no_deps} -- {req} </dev/null{remove}"
        )
    pip_env, source = (
        ("PIP_CONFIG_FILE=/dev/null ", f" --no-index --find-links {wheelhouse}") if spec.offline else ("", "")
    )
    # A venv that sees an image's packages uses the image's pip too (through the .pth): such
    # images often lack ensurepip (Debian and Ubuntu ship it apart, as python3-venv).
    pip, without_pip = (
        (f"{q(venv)}/bin/python -m pip", " --without-pip") if spec.site_packages else (f"{q(venv)}/bin/pip", "")
    )
    remove = f" && {pip} uninstall -y -- {names}" if names else ""
    return (
        f"{_python(spec.python)} -m venv{without_pip} -- {q(venv)}; {_site_pth(cfg, venv)}"
        f"{pip_env}{pip} install --no-cache-dir --disable-pip-version-check -q{no_deps}{source} "
        f"-- {req} </dev/null{remove}"
    )


def _python(python: str) -> str:
    """vllm_python as the command word: a path or a plain name, never one starting with '-'."""
    if python.startswith("-"):
        raise VfleetError(f"vllm_python {python!r} starts with '-'; set it to an interpreter such as /usr/bin/python3")
    return q(python)


def _site_pth(cfg: HostConfig, venv: str) -> str:
    """Shell that writes the venv's .pth for vllm_site_packages (a venv made from a venv does
    not see its parent's packages, even with --system-site-packages)."""
    site = cfg.install_spec.site_packages
    if not site:
        return ""
    purelib = f"$({q(venv)}/bin/python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')"
    return f'printf %s {q(chr(10).join(site) + chr(10))} > "{purelib}/vfleet-site-packages.pth"; '
