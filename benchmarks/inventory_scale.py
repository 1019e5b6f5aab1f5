"""How long load_inventory takes for a large fleet: N hosts from one range, in nested
groups, with a secret file and a --set, the shape of a real fleet's inventory.

    python benchmarks/inventory_scale.py                 # 100,000 hosts
    python benchmarks/inventory_scale.py --hosts 20000 --out benchmarks/results/inventory.json

Prints the result as JSON (seconds per phase); nothing here is a test: the unit tests
only assert a generous bound.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import emit  # noqa: E402
from vfleet.config.variables import SCHEMA  # noqa: E402
from vfleet.engine.inventory import MAX_HOSTS, load_inventory, parse_set_args  # noqa: E402


def write_inventory(folder: Path, hosts: int) -> Path:
    """A fleet of `hosts` GPU hosts in vllm > h100, a gateway, a secret file."""
    (folder / "api_key").write_text("sk-bench\n")
    (folder / "api_key").chmod(0o600)
    width = len(str(hosts))
    path = folder / "hosts.yml"
    path.write_text(
        "all:\n  vars:\n    model_name: m\n    api_key_file: api_key\n  children:\n"
        "    vllm:\n      vars: {tensor_parallel_size: 2}\n      children:\n        h100:\n"
        f"          hosts:\n            gpu[{1:0{width}d}:{hosts - 1:0{width}d}]:\n"
        "    gateways:\n      hosts:\n        gw01:\n"
    )
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=MAX_HOSTS, help="hosts in the inventory")
    ap.add_argument("--out", type=Path, help="also write the JSON result here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = write_inventory(Path(tmp), args.hosts)
        start = time.perf_counter()
        inv = load_inventory(path, parse_set_args(["max_num_seqs=64"]), schema=SCHEMA)
        loaded = time.perf_counter() - start
        start = time.perf_counter()
        selected = inv.select("vllm:!gw01")
        limited = time.perf_counter() - start
    return emit(
        {
            "benchmark": "inventory_scale",
            "hosts": len(inv.hosts),
            "load_seconds": round(loaded, 3),
            "limit_seconds": round(limited, 3),
            "selected": len(selected),
            "python": sys.version.split()[0],
        },
        args.out,
    )


if __name__ == "__main__":
    sys.exit(main())
