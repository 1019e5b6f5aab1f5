"""Host checks on storage: /dev/shm, and the free space and filesystem under the model directory.

Thresholds (documented choices):
- /dev/shm: FAIL below 1 GiB when TP > 1 (NCCL's SHM transport and vLLM's inter-worker
  shared-memory queues live there; the 64 MiB container default is known to break NCCL); WARN
  below 1 GiB with a single GPU, and below 2 GiB with TP > 1 (NCCL's per-peer buffers grow with
  TP size and channel count: leave headroom). Bare metal defaults to half of RAM: far above.
- Disk: FAIL when free space < weights; WARN below weights x 1.2 (a download writes partial
  files beside the final ones, and a model upgrade keeps the old weights until the switch).
- Filesystem: WARN on a network or FUSE filesystem (slow loads, a stalled mount hangs the start).
"""

from __future__ import annotations

from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.strict_json import JsonFileError
from vfleet.roles.preflight import _capacity as capacity

from ._check_base import FAIL, GIB, PASS, WARN, Check, gib as _gib

__all__ = ["check_disk", "check_model_fs", "check_shm"]

SHM_FAIL_BYTES = 1 * GIB
SHM_WARN_BYTES = 2 * GIB
DISK_HEADROOM = 1.2


def check_shm(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    shm = facts.get("shm_bytes")
    tp = cfg.tensor_parallel_size
    fix = "enlarge /dev/shm: `mount -o remount,size=16G /dev/shm` (persist in /etc/fstab); in a container `--shm-size=16g` or `--ipc=host`"
    if shm is None:
        return Check("host.shm", WARN, "/dev/shm size unknown (df failed)", "check `df -h /dev/shm`")
    if shm < SHM_FAIL_BYTES:
        status = FAIL if tp > 1 else WARN
        return Check(
            "host.shm",
            status,
            f"/dev/shm is {shm / 2**20:.0f} MiB (< 1 GiB): NCCL's shared-memory "
            f"transport and vLLM's worker queues break or fall back{' with TP ' + str(tp) if tp > 1 else ''}",
            fix,
        )
    if tp > 1 and shm < SHM_WARN_BYTES:
        return Check("host.shm", WARN, f"/dev/shm is {_gib(shm)} with TP {tp}: little headroom for NCCL buffers", fix)
    return Check("host.shm", PASS, f"/dev/shm is {_gib(shm)}")


def _weights_needed(cfg: HostConfig, facts: dict[str, Any]) -> tuple[int | None, str]:
    if cfg.model_size_bytes:
        return cfg.model_size_bytes, "model_size_bytes"
    model = facts.get("model_config")
    if model:
        try:
            shape = capacity.ModelShape.from_config(model)
            return capacity.estimate_weight_bytes(shape), "estimate from config.json"
        except JsonFileError:  # a key the estimate needs is missing: size unknown
            pass
    return None, ""


def _dummy_weights(cfg: HostConfig) -> bool:
    """`--load-format dummy` in vllm_extra_args: a sizing or test start with no weight files."""
    args = list(cfg.vllm_extra_args)
    return "--load-format=dummy" in args or any(a == "--load-format" and b == "dummy" for a, b in zip(args, args[1:]))


def check_disk(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    fs = facts.get("model_fs") or {}
    free = fs.get("free_bytes")
    where = fs.get("path") or (facts.get("paths") or {}).get("model_dir")
    if facts.get("weights_bytes"):
        return Check(
            "model.disk",
            PASS,
            f"weights already present: {_gib(facts['weights_bytes'])} (safetensors) under {where}; {_gib(free)} free",
        )
    if _dummy_weights(cfg):
        return Check(
            "model.disk",
            PASS,
            f"no weights read (--load-format dummy: vLLM fills random ones); {_gib(free)} free under {where}",
        )
    need, how = _weights_needed(cfg, facts)
    if free is None:
        return Check("model.disk", WARN, f"free space under {where} unknown (df failed)", "check `df -h` on the host")
    if need is None:
        return Check(
            "model.disk",
            PASS,
            f"{_gib(free)} free under {where}; model size unknown (no config.json, "
            "no model_size_bytes): space not checked",
        )
    fix = f"free space under {where}, or set model_dir to a larger local disk"
    if free < need:
        return Check("model.disk", FAIL, f"{_gib(free)} free under {where}, weights need {_gib(need)} ({how})", fix)
    if free < need * DISK_HEADROOM:
        return Check(
            "model.disk",
            WARN,
            f"{_gib(free)} free under {where}, weights need {_gib(need)} ({how}): "
            f"less than {int((DISK_HEADROOM - 1) * 100)}% headroom for partial downloads and upgrades",
            fix,
        )
    return Check("model.disk", PASS, f"{_gib(free)} free under {where}; weights need {_gib(need)} ({how})")


def check_model_fs(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    fs = facts.get("model_fs") or {}
    fstype, where = fs.get("fstype"), fs.get("path")
    if not fstype:
        return Check("model.filesystem", WARN, f"filesystem under {where} unknown", "check `df -T` on the host")
    if fs.get("network"):
        return Check(
            "model.filesystem",
            WARN,
            f"model directory {where} is on {fstype} (network/FUSE): loading "
            "weights is slow and a stalled mount hangs the service start",
            "keep weights on a local disk (ext4/xfs), e.g. model_dir: /srv/models",
        )
    return Check("model.filesystem", PASS, f"model directory {where} is on local {fstype}")
