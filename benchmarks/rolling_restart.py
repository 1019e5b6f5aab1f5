"""What vfleet is for, in one table: failed and truncated client requests while every vLLM
host restarts, under the same steady load through the gateway.

    vfleet restart --batch 1            drain, wait in-flight, restart, ready, undrain
    naive, all at once                  systemctl restart vllm on every host together
    naive, one at a time, no drain      systemctl restart, wait until /health, next host
    vfleet deploy --batch 1             a changed unit (max_num_seqs) rolled through the gateway
    vfleet deploy (no --batch)          the same change, every changed host restarted at once

Deploys the lab (as `make demo`) if needed. Prints JSON; needs root.

    python benchmarks/rolling_restart.py [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
from common import emit  # benchmarks/common.py (scripts run from benchmarks/ or by path)

from vfleet.clients.loadgen import LoadGenerator
from vfleet.lab import api
from vfleet.lab.demo import write_deploy_inventory

KEY = "sk-bench-rolling"


def vfleet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vfleet.cli", *args], capture_output=True, text=True)


def wait_ready(address: str, deadline_s: float = 900) -> None:
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            r = httpx.get(f"http://{address}:8000/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=5)
            if r.status_code == 200 and "tiny" in r.text:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit(f"{address} not ready after {deadline_s}s")


def measure(label: str, gateway: str, action) -> dict:
    gen = LoadGenerator(gateway, "tiny", KEY, concurrency=1, max_tokens=16, pause_s=1.5).start()
    time.sleep(5)  # steady state first
    t0 = time.time()
    action()
    took = time.time() - t0
    time.sleep(5)
    gen.stop()
    s = gen.summary()
    print(
        f"{label}: {s['requests']} requests, {s['failed']} failed, {s['truncated']} truncated, {took:.0f}s",
        file=sys.stderr,
    )
    return {"restart_wall_s": round(took, 1), **s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    lab_inv = api.up(3, backing="disk", echo=lambda _l: None).inventory
    inv = write_deploy_inventory(lab_inv, lab_inv.parent / "bench", KEY)
    d = vfleet("deploy", "--inventory", str(inv))
    if d.returncode:
        raise SystemExit(f"deploy failed: {d.stdout[-2000:]}")
    data = json.loads(vfleet("inventory", "--inventory", str(inv)).stdout)
    hv = data["_meta"]["hostvars"]
    vllm = [(h, hv[h]["ansible_host"]) for h in data["vllm"]["hosts"]]
    gateway = f"http://{hv[data['gateways']['hosts'][0]]['ansible_host']}:80"

    def rolling():
        r = vfleet("restart", "--inventory", str(inv), "--batch", "1")
        if r.returncode:
            raise SystemExit(f"vfleet restart failed: {r.stdout[-2000:]}")

    def all_at_once():
        vfleet("run", "--inventory", str(inv), "--limit", "vllm", "--quiet", "--command", "systemctl restart vllm")
        for _, addr in vllm:
            wait_ready(addr)

    def one_by_one():
        for name, addr in vllm:
            vfleet("run", "--inventory", str(inv), "--limit", name, "--quiet", "--command", "systemctl restart vllm")
            wait_ready(addr)

    def deploy_change(batch: bool, max_num_seqs: int):
        def action():
            changed = write_deploy_inventory(
                lab_inv, lab_inv.parent / "bench-changed", KEY, extra={"max_num_seqs": max_num_seqs}
            )
            r = vfleet("deploy", "--inventory", str(changed), *(["--batch", "1"] if batch else []))
            if r.returncode:
                raise SystemExit(f"vfleet deploy failed: {r.stdout[-2000:]}")

        return action

    out = {
        "hosts": len(vllm),
        "load": "1 client, 1.5 s pause, every 2nd request streamed, 16 tokens each",
        "vfleet_restart_batch1": measure("vfleet restart --batch 1", gateway, rolling),
        "naive_all_at_once": measure("naive: all at once", gateway, all_at_once),
        "naive_one_by_one_no_drain": measure("naive: one at a time, no drain", gateway, one_by_one),
        # both deploys change every unit (max_num_seqs 8 -> 6 -> 4), so both restart every host
        "vfleet_deploy_changed_unit_batch1": measure(
            "vfleet deploy --batch 1 (unit changed)", gateway, deploy_change(True, 6)
        ),
        "vfleet_deploy_changed_unit_no_batch": measure(
            "vfleet deploy, no --batch (unit changed)", gateway, deploy_change(False, 4)
        ),
    }
    return emit(out, args.out)


if __name__ == "__main__":
    sys.exit(main())
