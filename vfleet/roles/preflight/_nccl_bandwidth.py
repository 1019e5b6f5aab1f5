"""Optional preflight check `nccl_bandwidth`: an all-reduce across the GPUs the service will
use, with the venv's torch and the NCCL environment the unit will get, one process per GPU,
compared with the expected bus bandwidth for the link between them
(vfleet/roles/preflight/data/nccl_bandwidth.yaml, each row with its source).

The probe script is written to a temp file on the host and run there (torch.multiprocessing's
spawn re-imports the main module, so it cannot come from stdin). On one GPU the all-reduce
moves nothing between GPUs: it still runs (proving NCCL initialises), and the check says the
bandwidth does not apply."""

from __future__ import annotations

import fnmatch
import json
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from vfleet.config.quoting import env_name

from ._checks import Check

DATA = Path(__file__).resolve().parent / "data" / "nccl_bandwidth.yaml"

PROBE = r"""
import json, os, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def worker(rank, world, gpus, size_bytes, iters, port, out):
    torch.cuda.set_device(gpus[rank])
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    x = torch.ones(size_bytes // 4, dtype=torch.float32, device="cuda")
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    elapsed = (time.perf_counter() - t0) / iters
    ok = bool(torch.allclose(x[:16], torch.full((16,), float(world) ** (5 + iters), device="cuda")))
    if rank == 0:
        algbw = size_bytes / elapsed / 1e9
        busbw = algbw * 2 * (world - 1) / world
        with open(out, "w") as f:
            json.dump({"world_size": world, "gpus": gpus, "size_bytes": size_bytes, "iters": iters,
                       "time_s": elapsed, "algbw_gbps": algbw, "busbw_gbps": busbw, "correct": ok,
                       "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}, f)
    dist.destroy_process_group()

if __name__ == "__main__":
    p = json.loads(sys.argv[1])
    gpus = p["gpus"]
    out = p["out"]
    mp.spawn(worker, args=(len(gpus), gpus, p["size_bytes"], p["iters"], p["port"], out), nprocs=len(gpus))
    print("VFLEET_NCCL " + open(out).read())
"""


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return yaml.safe_load(DATA.read_text())


def link_class(worst_link: str | None, min_cc: str | None) -> str:
    """NV<n> as printed; any PCIe path by generation (CC >= 8.0 cards are PCIe 4 or newer)."""
    if worst_link and worst_link.upper().startswith("NV"):
        return worst_link.upper()
    try:
        major = float(min_cc or "0")
    except ValueError:
        major = 0.0
    return "PCIE_GEN4" if major >= 8.0 else "PCIE_GEN3"


def expected(link: str) -> dict[str, Any] | None:
    for row in table()["links"]:
        if fnmatch.fnmatchcase(link, row["match"]):
            return row
    return None


def probe_command(
    gpus: list[int], python: str, env: dict[str, str], size_mib: int = 256, iters: int = 20, port: int = 29533
) -> str:
    """A sh command that writes the probe to a temp file and runs it with NCCL multicast off
    (a program using it can take shared GPUs out of service) plus the unit's NCCL env."""
    params = json.dumps(
        {
            "gpus": gpus,
            "size_bytes": size_mib << 20,
            "iters": iters,
            "port": port,
            "out": "/tmp/vfleet-nccl-result.json",
        }
    )
    # each KEY=value is one shell word, the name checked too: an inventory key must never
    # become shell syntax (the schema refuses such names; this is the last line)
    exports = " ".join(
        shlex.quote(f"{env_name(k)}={v}")
        for k, v in {
            "NCCL_NVLS_ENABLE": "0",
            "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1",
            **env,
        }.items()
    )
    return (
        f"f=$(mktemp /tmp/vfleet-nccl-XXXXXX.py) && cat > \"$f\" <<'VFLEET_EOF'\n{PROBE}\nVFLEET_EOF\n"
        f'P={shlex.quote(python)}; [ -x "$P" ] || P=python3; '
        f'env {exports} "$P" "$f" {shlex.quote(params)}; rc=$?; rm -f "$f"; exit $rc'
    )


def parse_result(stdout: str) -> dict[str, Any] | None:
    for line in stdout.splitlines():
        if line.startswith("VFLEET_NCCL "):
            return json.loads(line.split(" ", 1)[1])
    return None


def evaluate(result: dict[str, Any] | None, worst_link: str | None, min_cc: str | None, error: str = "") -> Check:
    cid = "nccl.bandwidth"
    if result is None:
        return Check(
            cid,
            "fail",
            f"all-reduce probe did not run: {error or 'no result'}",
            "run it by hand with NCCL_DEBUG=INFO; check the NCCL environment and /dev/shm",
        )
    if not result.get("correct", False):
        return Check(cid, "fail", "all-reduce returned wrong sums", "check GPU health (ECC, XID errors in dmesg)")
    n = int(result["world_size"])
    if n < 2:
        return Check(
            cid,
            "pass",
            f"1 GPU: all-reduce ran with NCCL {result.get('nccl')} in "
            f"{result['time_s'] * 1000:.2f} ms per {result['size_bytes'] >> 20} MiB, "
            f"no inter-GPU traffic, so bus bandwidth does not apply",
            "",
        )
    link = link_class(worst_link, min_cc)
    row = expected(link)
    got = float(result["busbw_gbps"])
    if row is None:
        return Check(
            cid,
            "warn",
            f"{got:.1f} GB/s bus bandwidth over {link}: no expected figure",
            "add a row for this link to vfleet/roles/preflight/data/nccl_bandwidth.yaml",
        )
    want = float(row["busbw_gbps"])
    t = table()
    ratio = got / want
    msg = f"{got:.1f} GB/s bus bandwidth across {n} GPUs over {link} ({ratio:.0%} of the expected {want:g} GB/s)"
    if ratio < t["fail_fraction"]:
        return Check(
            cid,
            "fail",
            msg,
            "check the NCCL environment (P2P disabled on NVLink?), ACS on PCIe "
            "bridges, and that the GPUs share the links topo -m shows",
        )
    if ratio < t["warn_fraction"]:
        return Check(cid, "warn", msg, "below the usual figure: compare NCCL_DEBUG=INFO transports with the topology")
    return Check(cid, "pass", msg, "")
