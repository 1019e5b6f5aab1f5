"""How long `vfleet status` takes on the controller for a large fleet: parsing N hosts' answers
(the probes' sections as a host prints them, with vLLM's real /metrics text), building the rows
(drift renders each host's unit once, the first round; a --watch round reuses it) and drawing
the screen.

    python benchmarks/status_scale.py                    # 100 and 1000 hosts
    python benchmarks/status_scale.py --hosts 100 --out benchmarks/results/status_scale.json

The network part is not here: every host is asked at once (--forks, default 64) in one round
trip each, bounded by SCRIPT_TIMEOUT_S, so a round costs about the slowest host's round trip
plus what this measures. Prints the result as JSON (seconds per phase); nothing here is a test.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402

from benchmarks.common import emit  # noqa: E402
from vfleet.config.fleet import Fleet  # noqa: E402
from vfleet.config.variables import SCHEMA  # noqa: E402
from vfleet.engine.fact_protocol import Output, sections  # noqa: E402
from vfleet.engine.inventory import load_inventory  # noqa: E402
from vfleet.roles.status._collect import Watch, answers, build_round, probes_for  # noqa: E402
from vfleet.roles.status._screen import screen  # noqa: E402

METRICS = (
    Path(__file__).resolve().parents[1] / "tests" / "unit" / "data" / "bench" / "metrics_vllm_new.txt"
).read_text()
UNIT = (
    "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\nNRestarts=0\n"
    "StateChangeTimestamp=Wed 2026-12-02 10:01:02 UTC\nStateChangeEpoch=1796205662\nNow=1796214894\n"
)


def fleet_of(folder: Path, hosts: int) -> Fleet:
    width = len(str(hosts))
    path = folder / "hosts.yml"
    path.write_text(
        "all:\n  vars: {vllm_version: '0.11.0', model_name: m, model_source: /srv/src/m, max_num_seqs: 64}\n"
        f"  children:\n    vllm:\n      hosts:\n        gpu[{1:0{width}d}:{hosts:0{width}d}]:\n"
        "    gateways:\n      hosts:\n        gw01:\n"
    )
    return Fleet.of(load_inventory(path, schema=SCHEMA))


def host_answer(i: int) -> str:
    """One host's answer: its numbers vary with i, so verdicts vary across the fleet."""
    text = METRICS.replace("} 3.0", f"}} {i % 70}", 1).replace("} 2.0", f"}} {i % 3}", 1)
    return sections(
        {
            "unit": Output(UNIT),
            "install": Output("venv=/opt/vllm/vllm-0.11.0\n"),
            "weights": Output("/srv/models/.versions/m-1a2b3c4d5e6f\n"),
            "metrics": Output(text),
            "gpu_memory": Output("".join(f"{g}, 70000, 81920\n" for g in range(8))),
            "gpu_util": Output("".join(f"{g}, {(i * 7) % 100}\n" for g in range(8))),
            "journal": Output("\n" * 20),
            "files": Output("systemd=systemd 252\nunit=0\nenv=0\n"),
        }
    )


def one_round(fleet: Fleet, wires: dict[str, str], watch: Watch) -> dict[str, float]:
    configs = fleet.configs_of(list(fleet.inventory.hosts.values()))
    backends = [(c.name, c.base_url) for c in fleet.configs_of(fleet.serving_hosts)]
    t0 = time.perf_counter()
    facts = {c.name: answers(probes_for(c, backends), wires[c.name]) for c in configs}
    t1 = time.perf_counter()
    rnd = build_round(configs, facts, {}, watch)
    t2 = time.perf_counter()
    Console(file=io.StringIO(), width=400).print(screen(rnd))
    t3 = time.perf_counter()
    json.dumps(rnd.to_dict())
    t4 = time.perf_counter()
    return {
        "parse_s": round(t1 - t0, 3),
        "rows_s": round(t2 - t1, 3),
        "screen_s": round(t3 - t2, 3),
        "report_s": round(t4 - t3, 3),
        "total_s": round(t4 - t0, 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, action="append", help="fleet sizes (default 100 and 1000)")
    ap.add_argument("--out", type=Path, help="also write the JSON result here")
    args = ap.parse_args()
    results = {}
    for n in args.hosts or [100, 1000]:
        with tempfile.TemporaryDirectory() as tmp:
            fleet = fleet_of(Path(tmp), n)
        names = sorted(fleet.inventory.hosts)
        backends = "".join(f"{h} 200\n" for h in names if h != "gw01")
        wires = {h: host_answer(i) for i, h in enumerate(names) if h != "gw01"}
        wires["gw01"] = sections({"nginx": Output("active\n"), "drained": Output(""), "backends": Output(backends)})
        watch = Watch()
        results[str(n)] = {"first_round": one_round(fleet, wires, watch), "watch_round": one_round(fleet, wires, watch)}
    return emit({"benchmark": "status_scale", "hosts": results, "python": sys.version.split()[0]}, args.out)


if __name__ == "__main__":
    sys.exit(main())
