"""How many idle lab hosts fit this machine: boot N hosts, time them to all-running,
measure memory, print JSON, tear down.

    python benchmarks/lab_scale.py --hosts 20 [--out result.json] [--keep]

Memory is measured three ways, because each alone misleads on an overlay-of-/ lab:
  - mem_used_delta: MemTotal-MemAvailable after minus before (what the machine lost),
  - pss: proportional set size of every lab process (nspawn + everything in the hosts'
    namespaces; shared pages such as libc are split among their users),
  - tmpfs: bytes the hosts wrote into their overlay upper dirs (RAM, too).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vfleet.lab import api, hosts, network  # noqa: E402
from vfleet.lab.state import LabState  # noqa: E402


def meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, val = line.split(":")
        out[key] = int(val.split()[0]) * 1024
    return out


def used_bytes() -> int:
    m = meminfo()
    return m["MemTotal"] - m["MemAvailable"]


def pss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def lab_pids() -> list[int]:
    pids = set(hosts.lab_nspawn_pids())
    for ns in network.lab_netns():
        pids.update(network.netns_pids(ns))
    return sorted(pids)


def tmpfs_bytes(state: LabState) -> int:
    total = 0
    for rec in state.hosts():
        st = os.statvfs(state.host_dir(rec.name) / "disk")
        total += (st.f_blocks - st.f_bfree) * st.f_frsize
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--settle", type=float, default=10, help="seconds idle before measuring")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--keep", action="store_true", help="leave the hosts up")
    args = ap.parse_args()
    if any(s.pid for s in api.status()):
        print("lab hosts are up already; run `invoke lab.down` first", file=sys.stderr)
        return 2
    state = LabState()
    base = used_bytes()
    t0 = time.monotonic()
    result = api.up(args.hosts, echo=lambda _l: None)
    boot_s = time.monotonic() - t0
    time.sleep(args.settle)
    pids = lab_pids()
    delta = used_bytes() - base
    pss = sum(pss_bytes(p) for p in pids)
    tmpfs = tmpfs_bytes(state)
    n = args.hosts
    ready = sorted(r.seconds for r in result.readiness)
    report = {
        "hosts": n,
        "machine": {"cpus": os.cpu_count(), "mem_total_gib": round(meminfo()["MemTotal"] / 2**30, 1)},
        "boot_all_running_s": round(boot_s, 2),
        "ready_s": {"min": round(ready[0], 2), "median": round(ready[n // 2], 2), "max": round(ready[-1], 2)},
        "states": {s: sum(r.state == s for r in result.readiness) for s in {r.state for r in result.readiness}},
        "not_running": {
            r.name: r.failed_units or r.detail for r in result.readiness if r.state != "running" or r.detail
        },
        "processes": len(pids),
        "mem_used_delta_mib": round(delta / 2**20, 1),
        "mem_used_delta_per_host_mib": round(delta / n / 2**20, 1),
        "pss_mib": round(pss / 2**20, 1),
        "pss_per_host_mib": round(pss / n / 2**20, 1),
        "tmpfs_mib": round(tmpfs / 2**20, 1),
        "tmpfs_per_host_mib": round(tmpfs / n / 2**20, 2),
        "settle_s": args.settle,
    }
    if not args.keep:
        t1 = time.monotonic()
        left = api.down(echo=lambda _l: None)
        report["down_s"] = round(time.monotonic() - t1, 2)
        report["residue"] = bool(left)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
