"""Whether the gateway's controller-side work stays linear in the fleet: `vfleet render` of the
gateway, and what a drain, an undrain and a rolling restart compute before they touch a host
(the new gateway config and its changes, the batches), at 1,000, 10,000 and 100,000 hosts.

    python benchmarks/render_scale.py                      # 1k, 10k, 100k
    python benchmarks/render_scale.py --hosts 1000 20000 --out benchmarks/results/render_scale.json

Prints, side by side from one run, the seconds of each phase and its time per host relative
to the smallest fleet (`per_host_ratio`: ~1 when linear; the quadratic duplicate check this
replaced gave ~100 at 100k, 399 s for `render`). drain and undrain reach the gateways over
SSH; here they stop at the changes they would apply (vfleet.roles.gateway._nginx.plan_config,
given the facts a converged gateway reports). Nothing here is a test."""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import emit  # noqa: E402
from benchmarks.inventory_scale import write_inventory  # noqa: E402
from vfleet.cli.common import backends  # noqa: E402
from vfleet.config.fleet import Fleet  # noqa: E402
from vfleet.config.variables import SCHEMA  # noqa: E402
from vfleet.engine.facts import FileState, UnitState  # noqa: E402
from vfleet.engine.inventory import load_inventory  # noqa: E402
from vfleet.roles.gateway._nginx import plan_config  # noqa: E402
from vfleet.roles.gateway._render import render_gateway  # noqa: E402
from vfleet.roles.rollout._batches import plan_batches  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    """Seconds of fn(), with Python's cyclic GC paused: when its full collections run depends on
    everything else in the heap (the whole inventory), which made the per-host times of a
    linear phase swing by 3-8x between runs; `cli_render_s` is the real process, GC and all."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        out = fn()
        return time.perf_counter() - start, out
    finally:
        gc.enable()


def converged_facts(text: str) -> dict:
    """What a gateway serving `text` reports (nginx up, no host drained, no caps kept)."""
    return {
        "nginx": True,
        "unit": UnitState("enabled", "active"),
        "default_site": FileState("missing"),
        "conf": FileState("file", hashlib.sha256(text.encode()).hexdigest(), "644", "root", "root"),
        "drained": FileState("missing"),
        "caps": FileState("missing"),
    }


def cli_render_seconds(inventory: Path) -> float:
    """`vfleet render --host gw01` as an operator runs it (a new process, output discarded)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "vfleet.cli", "render", "--inventory", str(inventory), "--host", "gw01"],
        check=True,
        stdout=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    return time.perf_counter() - start


def measure(hosts: int, cli: bool) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_inventory(Path(tmp), hosts)
        row: dict[str, float | int] = {"hosts": hosts}
        row["load_s"], inv = timed(lambda: load_inventory(path, [], schema=SCHEMA))
        row["fleet_s"], fleet = timed(lambda: Fleet.of(inv))
        row["backends_s"], bs = timed(lambda: backends(fleet))
        gw = fleet.config("gw01")
        row["render_s"], text = timed(lambda: render_gateway(bs, gw))
        facts = converged_facts(text)
        one = bs[len(bs) // 2].name
        row["drain_plan_s"], drained = timed(lambda: plan_config(gw, bs, facts, drained={one}))
        undrain_facts = {**facts, "drained": FileState("file", "x", "644", content=f"{one}\n")}
        row["undrain_plan_s"], _ = timed(lambda: plan_config(gw, bs, undrain_facts, drained=set()))
        names = [b.name for b in bs]
        models = {b.name: b.model for b in bs}
        row["batches_s"], batches = timed(lambda: plan_batches("1", names, models, {"m": len(names)}))
        assert len(batches) == len(names) and len(drained) >= 2
        if cli:
            row["cli_render_s"] = cli_render_seconds(path)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, nargs="+", default=[1000, 10_000, 100_000], help="fleet sizes")
    ap.add_argument("--no-cli", action="store_true", help="skip the `vfleet render` subprocess timings")
    ap.add_argument("--out", type=Path, help="also write the JSON result here")
    args = ap.parse_args()
    rows = [measure(n, not args.no_cli) for n in sorted(args.hosts)]
    base = rows[0]
    phases = [k for k in base if k.endswith("_s")]
    for row in rows:  # time per host against the smallest fleet: ~1 when linear
        row["per_host_ratio"] = {
            k: round((row[k] / row["hosts"]) / (base[k] / base["hosts"]), 2) if base[k] > 0 else None for k in phases
        }
        for k in phases:
            row[k] = round(row[k], 4)
    return emit({"benchmark": "render_scale", "rows": rows, "python": sys.version.split()[0]}, args.out)


if __name__ == "__main__":
    sys.exit(main())
