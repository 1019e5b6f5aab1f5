"""Install a pinned vLLM into a versioned venv per host, online or from a wheelhouse.

    <vllm_root>/<package>-<version>/   one venv per version (plus an optional suffix)
    <vllm_root>/current  -> the venv the service runs
    <vllm_root>/previous -> the venv it ran before (kept for rollback)
A venv is trusted only once its marker file says it was installed from the same spec AND
`import vllm` in it printed the pinned version; a half-finished install has no marker and is
rebuilt. Offline (air-gapped hosts): the controller pushes the wheelhouse it downloaded once
with rsync, and pip installs with --no-index from it, ignoring any pip config on the host."""
from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
import time
from pathlib import Path
from typing import Any

from fleet.errors import VfleetError
from fleet.operations import ensure_directory, ensure_symlink
from fleet.results import Status
from fleet.runner import HostContext, HostFailed
from fleet.transfer import rsync_push

q = shlex.quote
MARKER = ".vfleet-install.json"

VERIFY_SCRIPT = r"""
import json, sys
out = {}
try:
    import vllm
    out["version"] = getattr(vllm, "__version__", None)
except Exception as exc:
    out["error"] = "import vllm failed: %s: %s" % (type(exc).__name__, exc)
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["arch_list"] = torch.cuda.get_arch_list() if torch.version.cuda else []
except Exception as exc:
    out.setdefault("error", "import torch failed: %s" % exc)
print("VFLEET_VERIFY " + json.dumps(out))
"""


def install_spec(vars: dict[str, Any]) -> dict[str, Any]:
    if not vars.get("vllm_version"):
        raise VfleetError("vllm_version is not set in the inventory; pin one (see `vfleet preflight`)")
    return {
        "package": vars.get("vllm_package") or "vllm",
        "version": str(vars["vllm_version"]),
        "pins": list(vars.get("vllm_extra_pins") or []),
        "remove": list(vars.get("vllm_remove_packages") or []),
        "python": vars.get("vllm_python") or "/usr/bin/python3",
        "offline": bool(vars.get("vllm_wheelhouse")),
    }


def venv_path(vars: dict[str, Any]) -> str:
    spec = install_spec(vars)
    name = vars.get("vllm_venv_name") or f"{spec['package']}-{spec['version']}"
    return posixpath.join(vars.get("vllm_root") or "/opt/vllm", name)


def spec_id(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


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


def installed(ctx: HostContext, venv: str, spec: dict[str, Any]) -> bool:
    r = ctx.run(f"cat {q(venv)}/{MARKER} 2>/dev/null")
    try:
        return r.ok and json.loads(r.stdout).get("spec_id") == spec_id(spec)
    except json.JSONDecodeError:
        return False


def _gpu_compute_caps(ctx: HostContext) -> list[str]:
    r = ctx.run("nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null")
    return [line.strip() for line in r.stdout.splitlines() if r.ok and line.strip()[:1].isdigit()]


def push_wheelhouse(ctx: HostContext, wheelhouse: str) -> str:
    src = Path(wheelhouse).expanduser()
    if not src.is_dir() or not any(src.glob("*.whl")):
        raise VfleetError(f"vllm_wheelhouse {wheelhouse}: no wheels there; build it first (`vfleet wheelhouse`) or unset it")
    dest = posixpath.join(ctx.vars.get("vllm_root") or "/opt/vllm", "wheelhouse")
    if ctx.check:
        ctx.record("wheelhouse", dest, Status.SKIPPED, "check mode: would sync")
        return dest
    t0 = time.monotonic()
    ctx.run(f"mkdir -p {q(dest)}")
    stats = rsync_push(ctx, str(src), dest, delete=False,
                       on_progress=lambda done, pct: ctx.progress(pct, 100, "wheelhouse %"))
    status = Status.CHANGED if stats.literal_bytes else Status.OK
    ctx.record("wheelhouse", dest, status, f"{stats.bytes_sent} bytes sent", elapsed_s=time.monotonic() - t0,
               data={"bytes_sent": stats.bytes_sent})
    return dest


def install_venv(ctx: HostContext, *, switch: bool = True) -> str:
    """Make sure the pinned venv exists and is verified; with switch, point `current` at it.
    Returns the venv path."""
    spec = install_spec(ctx.vars)
    root = ctx.vars.get("vllm_root") or "/opt/vllm"
    venv = venv_path(ctx.vars)
    ensure_directory(ctx, root, mode="0755")
    if installed(ctx, venv, spec):
        ctx.record("venv", venv, Status.OK, f"{spec['package']}=={spec['version']} verified")
    elif ctx.check:
        ctx.record("venv", venv, Status.CHANGED, f"would install {spec['package']}=={spec['version']}")
    else:
        _install(ctx, spec, venv)
    if switch:
        link_current(ctx, venv)
    return venv


def link_current(ctx: HostContext, venv: str) -> bool:
    """Point <root>/current at venv, keeping the old target as <root>/previous. True if changed."""
    root = posixpath.dirname(venv)
    cur = ctx.run(f"readlink {q(root)}/current").stdout.strip()
    if cur == venv:
        ctx.record("symlink", f"{root}/current", Status.OK, f"-> {venv}")
        return False
    if cur and not ctx.check:
        ensure_symlink(ctx, f"{root}/previous", cur)
    ensure_symlink(ctx, f"{root}/current", venv)
    ctx.result.data["install_changed"] = not ctx.check
    return True


def _install(ctx: HostContext, spec: dict[str, Any], venv: str) -> None:
    t0 = time.monotonic()
    req = [f"{spec['package']}=={spec['version']}", *spec["pins"]]
    pip_env = ""
    source = ""
    if spec["offline"]:
        wh = push_wheelhouse(ctx, ctx.vars["vllm_wheelhouse"])
        pip_env = "PIP_CONFIG_FILE=/dev/null "
        source = f" --no-index --find-links {q(wh)}"
    remove = ""
    if spec["remove"]:
        remove = f" && {q(venv)}/bin/pip uninstall -y {' '.join(q(p) for p in spec['remove'])}"
    script = (f"set -e; rm -rf {q(venv)}; {q(spec['python'])} -m venv {q(venv)}; "
              f"{pip_env}{q(venv)}/bin/pip install --no-cache-dir --disable-pip-version-check -q{source} "
              f"{' '.join(q(r) for r in req)}{remove}")
    ctx.progress(0, None, "pip install")
    r = ctx.run(script, timeout=float(ctx.vars.get("install_timeout", 3600)))
    if not r.ok:
        raise HostFailed(f"installing {' '.join(req)} into {venv} failed: {r.tail(3)}")
    v = ctx.run(f"cd / && {q(venv)}/bin/python -", stdin=VERIFY_SCRIPT, timeout=600)
    line = next((ln for ln in v.stdout.splitlines() if ln.startswith("VFLEET_VERIFY ")), None)
    info = json.loads(line.split(" ", 1)[1]) if line else {"error": v.tail()}
    if info.get("error"):
        raise HostFailed(f"{venv}: {info['error']}")
    got = str(info.get("version") or "")
    if not got.startswith(spec["version"]):
        raise HostFailed(f"{venv}: vllm reports version {got}, pinned {spec['version']}")
    for cc in _gpu_compute_caps(ctx):
        if info.get("cuda") and not arch_covers(info.get("arch_list") or [], cc):
            raise HostFailed(f"{venv}: torch {info.get('torch')} is built for {info.get('arch_list')}, "
                             f"which does not cover this host's GPUs (compute capability {cc}); pin a vLLM built for it")
    marker = json.dumps({"spec_id": spec_id(spec), "spec": spec, "verified": info})
    ctx.must(f"cat > {q(venv)}/{MARKER}", stdin=marker, what="write install marker")
    ctx.record("venv", venv, Status.CHANGED, f"installed {' '.join(req)} (vllm {got}, torch {info.get('torch')})",
               elapsed_s=time.monotonic() - t0, data=info)
