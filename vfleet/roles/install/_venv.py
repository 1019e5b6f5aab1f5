"""Install a pinned vLLM into a versioned venv per host, online or from a wheelhouse.

    <vllm_root>/<package>-<version>/   one venv per version (plus an optional suffix)
    <vllm_root>/current  -> the venv the service runs
    <vllm_root>/previous -> the venv it ran before (kept for rollback)
A venv is trusted only once its marker file says it was installed from the same spec AND
`import vllm` in it printed the pinned version; a half-finished install has no marker and is
rebuilt. Offline (air-gapped hosts): the controller pushes the wheelhouse it downloaded once
with rsync, and uv (where the host or the wheelhouse has it) or pip installs from it with no
index, ignoring any uv or pip config on the host (_installer.py)."""

from __future__ import annotations

import hashlib
import inspect
import json
import posixpath
import shlex
import time
from pathlib import Path
from typing import Any, Mapping

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig, InstallSpec
from vfleet.engine.changes import Change, apply, directory_change
from vfleet.engine.errors import VfleetError
from vfleet.engine.facts import CommandOk, Fact, FileFact, LinkFact, gather
from vfleet.engine.owned_paths import deep_path, inside, owned_symlink_change
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext
from vfleet.engine.transfer import rsync_push
from vfleet.roles.install._installer import Installer, choose, install_commands, uv_wheel_in
from vfleet.roles.service import RESTART

__all__ = ["MARKER", "arch_covers", "spec_id", "verify_imports", "facts_for", "plan", "install_venv", "link_current"]

q = shlex.quote
MARKER = ".vfleet-install.json"


def arch_covers(arch_list: list[str], compute_capability: str) -> bool:
    """Does torch's arch list run on a GPU of this compute capability? sm_XY binaries run on
    the same major with minor >= Y; compute_XY (PTX) is JIT-compiled for anything newer."""
    major, minor = (int(x) for x in compute_capability.split("."))
    for arch in arch_list:
        kind, _, num = arch.partition("_")
        num = num.rstrip("a")
        if not num.isdigit():
            continue
        a_major, a_minor = int(num[:-1]), int(num[-1])
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    return False


# Runs in the new venv on the host: imports vllm and torch, checks the version, imports what the
# host's quantization makes vLLM import at start (verify_imports), checks that torch's kernels
# cover the host's GPUs (arch_covers, the same function as above), and only then writes the
# marker that makes the venv trusted.
VERIFY_SCRIPT = (
    inspect.getsource(arch_covers)
    + r"""
import importlib, json, subprocess, sys
p = json.loads(PARAMS)
out = {}
try:
    import vllm
    out["version"] = getattr(vllm, "__version__", None)
except Exception as exc:
    sys.exit("import vllm failed: %s: %s" % (type(exc).__name__, exc))
try:
    import torch
    out.update(torch=torch.__version__, cuda=torch.version.cuda,
               arch_list=torch.cuda.get_arch_list() if torch.version.cuda else [])
except Exception as exc:
    sys.exit("import torch failed: %s" % exc)
if not str(out["version"] or "").startswith(p["version"]):
    sys.exit("vllm reports version %s, pinned %s" % (out["version"], p["version"]))
for need in p.get("imports") or []:
    try:
        importlib.import_module(need["module"])
    except Exception as exc:
        sys.exit("quantization %s: vLLM %s imports the Python module %s at start, and it fails here (%s: %s); "
                 "add %s to vllm_extra_pins (an install with vllm_install_no_deps gets only what is named)"
                 % (need["quantization"], p["version"], need["module"], type(exc).__name__, exc, need["pip"]))
try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=60).stdout.split()
except (OSError, subprocess.SubprocessError):
    smi = []
for cc in [c for c in smi if c[:1].isdigit()]:
    if out["cuda"] and not arch_covers(out["arch_list"], cc):
        sys.exit("torch %s is built for %s, which does not cover this host's GPUs (compute "
                 "capability %s); pin a vLLM built for it" % (out["torch"], out["arch_list"], cc))
with open(p["marker"], "w") as f:
    json.dump({"spec_id": p["spec_id"], "spec": p["spec"], "verified": out}, f)
print("VFLEET_VERIFY " + json.dumps(out))
"""
)


def verify_imports(cfg: HostConfig) -> list[dict[str, str]]:
    """The modules the host's `quantization` makes vLLM import at start (vllm_facts
    quantization_imports), for the verify step: [{module, pip, quantization}]."""
    return [
        {"module": module, "pip": row["pip"], "quantization": str(cfg.quantization)}
        for row in vllm_facts.quantization_imports(cfg.vllm_version, cfg.quantization)
        for module in row["modules"]
    ]


def spec_id(spec: InstallSpec, imports: list[dict[str, str]] | None = None) -> str:
    """What the marker proves: the spec, and the modules verified beside vllm when there were
    any (a venv verified before a quantization was set is verified again)."""
    record = spec.as_dict() | ({"imports": sorted(i["module"] for i in imports)} if imports else {})
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]


def facts_for(cfg: HostConfig) -> dict[str, Fact]:
    return {
        "root": FileFact(cfg.vllm_root),
        "marker": FileFact(posixpath.join(cfg.venv_path, MARKER), with_content=True),
        "current": LinkFact(cfg.current_link),
        "previous": LinkFact(cfg.previous_link),
        "uv": CommandOk("command -v uv"),
    }


def owned_venv(cfg: HostConfig, venv: str) -> str:
    """The venv folder, proven to lie inside vllm_root (it is removed and rebuilt)."""
    return inside(cfg.vllm_root, venv, "vllm_venv_name")


def installed(spec: InstallSpec, marker: Any, imports: list[dict[str, str]] | None = None) -> bool:
    """A venv is trusted only when its marker says it was verified from this same spec."""
    try:
        return marker.kind == "file" and json.loads(marker.content or "").get("spec_id") == spec_id(spec, imports)
    except json.JSONDecodeError:
        return False


def install_change(cfg: HostConfig, venv: str, installer: Installer | None = None) -> Change:
    """One script: fresh venv, install (uv or pip, offline from the pushed wheelhouse),
    removals, then VERIFY_SCRIPT on stdin; a half-finished install has no marker and is
    rebuilt. installer None: chosen as for a host without uv."""
    spec = cfg.install_spec
    venv = owned_venv(cfg, venv)
    installer = installer or choose(cfg, uv_on_path=False, uv_wheel=None)
    req = [f"{spec.package}=={spec.version}", *spec.pins]
    imports = verify_imports(cfg)
    params = json.dumps(
        {
            "version": spec.version,
            "spec_id": spec_id(spec, imports),
            "spec": spec.as_dict(),
            "marker": posixpath.join(venv, MARKER),
            "imports": imports,
        }
    )
    script = (
        f"set -e; {_clear_venv(venv)}{install_commands(cfg, venv, installer)} </dev/null; "
        f"cd / && {q(venv)}/bin/python -"
    )
    return Change(
        "venv",
        venv,
        f"install {' '.join(req)} with {installer.tool} ({installer.why})",
        script,
        stdin=f"PARAMS = {json.dumps(params)}\n{VERIFY_SCRIPT}",
        timeout=float(cfg.install_timeout),
    )


def _clear_venv(venv: str) -> str:
    """Shell that removes what is at `venv` only when vfleet made it (a venv: pyvenv.cfg or
    the marker, or an empty folder), renaming it away first so a run killed half way through
    the removal leaves no half venv under the real name; anything else fails the change."""
    v, old = q(venv), q(venv + ".vfleet-old")
    return (
        f"rm -rf -- {old}; if [ -e {v} ] || [ -L {v} ]; then "
        f'if [ -L {v} ] || {{ [ ! -f {v}/pyvenv.cfg ] && [ ! -f {v}/{MARKER} ] && [ -n "$(ls -A -- {v})" ]; }}; '
        f"then echo {q(f'{venv} exists and is not a venv vfleet made: move it away or set vllm_venv_name')} >&2; "
        f"exit 3; fi; mv -T -- {v} {old}; rm -rf -- {old}; fi; "
    )


def link_changes(cfg: HostConfig, venv: str, current: str | None, previous: str | None) -> list[Change]:
    """Point `current` at venv, keeping the old target as `previous` (for rollback). Only
    links vfleet made (into vllm_root) are replaced: anything else fails the host."""
    if current == venv:
        return []
    root = cfg.vllm_root
    switch = owned_symlink_change(cfg.current_link, venv, current, root=root, what="vllm_root", notify=RESTART)
    keep = (
        owned_symlink_change(cfg.previous_link, current, previous, root=root, what="vllm_root")
        if current and current != "OTHER"
        else []
    )
    return keep + switch


def plan(
    cfg: HostConfig, facts: Mapping[str, Any], *, switch: bool = True, uv_wheel: str | None = None
) -> list[Change]:
    """Changes that put the pinned, verified venv in place (and `current` on it). uv_wheel:
    the uv wheel in the controller's wheelhouse (uv_wheel_in), pushed with the rest."""
    spec, venv = cfg.install_spec, cfg.venv_path
    # a top-level vllm_root (/tmp, /usr) would get its mode changed and hold the links: never
    changes = directory_change(deep_path(cfg.vllm_root, "vllm_root"), facts["root"], mode="0755")
    if not installed(spec, facts["marker"], verify_imports(cfg)):
        installer = choose(cfg, uv_on_path=bool(facts.get("uv")), uv_wheel=uv_wheel)
        changes.append(install_change(cfg, venv, installer))
    if switch:
        changes += link_changes(cfg, venv, facts["current"], facts.get("previous"))
    return changes


def push_wheelhouse(ctx: HostContext, cfg: HostConfig) -> None:
    """rsync the controller's wheelhouse to the host (an offline install reads it there)."""
    src = Path(str(cfg.vllm_wheelhouse)).expanduser()
    if not src.is_dir() or not any(src.glob("*.whl")):
        raise VfleetError(f"vllm_wheelhouse {cfg.vllm_wheelhouse}: no wheels there; build it first or unset it")
    if ctx.host.connection == "local" and src.resolve() == Path(cfg.wheelhouse_dir).resolve():
        # The controller is the host and its wheelhouse already sits where pip reads it (the
        # device: no rsync there, nothing to copy).
        ctx.record("wheelhouse", cfg.wheelhouse_dir, Status.OK, "in place (local host)")
        return
    t0 = time.monotonic()
    ctx.run(f"mkdir -p -- {q(inside(cfg.vllm_root, cfg.wheelhouse_dir, 'wheelhouse'))}")
    stats = rsync_push(
        ctx,
        str(src),
        cfg.wheelhouse_dir,
        delete=False,
        on_progress=lambda done, pct: ctx.progress(pct, 100, "wheelhouse %"),
    )
    ctx.record(
        "wheelhouse",
        cfg.wheelhouse_dir,
        Status.CHANGED if stats.literal_bytes else Status.OK,
        f"{stats.bytes_sent} bytes sent",
        elapsed_s=time.monotonic() - t0,
        data={"bytes_sent": stats.bytes_sent},
    )


def install_venv(ctx: HostContext, *, switch: bool = True) -> str:
    """Step body: the pinned venv exists and is verified; with switch, `current` points at
    it (a change notifies the service restart). Returns the venv path."""
    cfg: HostConfig = ctx.config
    changes = plan(cfg, gather(ctx, facts_for(cfg)), switch=switch, uv_wheel=uv_wheel_in(cfg.vllm_wheelhouse))
    installing = any(c.action == "venv" for c in changes)
    if not installing:
        ctx.record("venv", cfg.venv_path, Status.OK, f"{cfg.vllm_package}=={cfg.vllm_version} verified")
    if installing and cfg.vllm_wheelhouse and not ctx.check:
        push_wheelhouse(ctx, cfg)
    if installing:
        ctx.progress(0, None, "venv install")
    apply(ctx, changes)
    return cfg.venv_path


def link_current(ctx: HostContext, cfg: HostConfig, venv: str) -> None:
    """Switch `current` to venv (a rollout's upgrade or rollback)."""
    links = gather(ctx, {"current": LinkFact(cfg.current_link), "previous": LinkFact(cfg.previous_link)})
    apply(ctx, link_changes(cfg, venv, links["current"], links["previous"]))
