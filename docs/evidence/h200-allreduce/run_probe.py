"""Runs roles/replica_allreduce.py's PROBE as `vfleet preflight --replica-allreduce` would, on
one host with a GPU: world size 1 (the device lends one H200; NCCL refuses two ranks on one
GPU), so what it checks is the nccl code path (init over TCP rendezvous, all-reduce on cuda:0,
the sum, the timing loop), not a cross-host link. Prints the probe's JSON line."""
import json
import subprocess
import sys
from pathlib import Path

src = Path(__file__).resolve().parents[3].joinpath("roles/replica_allreduce.py").read_text()
probe = src.split('PROBE = r"""', 1)[1].split('"""', 1)[0]
job = {"head": "127.0.0.1", "port": 29599, "rank": 0, "world": 1, "numel": 1 << 24, "iters": 20,
       "timeout_s": 60, "env": {"NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"}}
r = subprocess.run([sys.executable, "-c", probe], input=json.dumps(job), capture_output=True, text=True, timeout=240)
print(r.stdout.strip() or r.stderr[-2000:])
