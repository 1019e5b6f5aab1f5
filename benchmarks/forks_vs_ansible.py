"""Wall time of `uname -a` on N lab hosts: vfleet with --forks 1 vs --forks N, and
ansible-core's ad-hoc `command` module with the same forks, on the same hosts in one run.
Prints JSON with medians and ratios. Needs the lab (root) and ansible-core (pip install
'vfleet[bench]').

    python benchmarks/forks_vs_ansible.py --hosts 10 --repeat 5 [--out results.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import emit  # benchmarks/common.py (scripts run from benchmarks/ or by path)


def timed(cmd: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed ({p.returncode}): {(p.stderr or p.stdout)[-800:]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from vfleet.lab import api

    inv = api.up(args.hosts, gateways=0, echo=lambda _l: None).inventory
    vfleet = [sys.executable, "-m", "vfleet.cli", "run", "--inventory", str(inv), "--command", "uname -a", "--quiet"]
    ansible = shutil.which("ansible") or str(Path(sys.executable).with_name("ansible"))
    env = dict(
        os.environ,
        ANSIBLE_HOST_KEY_CHECKING="True",
        ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
        ANSIBLE_LOCALHOST_WARNING="False",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
    )
    results: dict[str, list[float]] = {}
    cases = {
        "vfleet_forks1": vfleet + ["--forks", "1"],
        f"vfleet_forks{args.hosts}": vfleet + ["--forks", str(args.hosts)],
    }
    if Path(ansible).exists():
        base = [ansible, "all", "-i", str(inv), "-m", "command", "-a", "uname -a"]
        cases["ansible_forks1"] = base + ["-f", "1"]
        cases[f"ansible_forks{args.hosts}"] = base + ["-f", str(args.hosts)]
    for _ in range(args.repeat):  # interleaved, so drift hits every case alike
        for name, cmd in cases.items():
            results.setdefault(name, []).append(timed(cmd, env))
    med = {k: round(statistics.median(v), 3) for k, v in results.items()}
    n = args.hosts
    out = {
        "hosts": n,
        "repeat": args.repeat,
        "median_s": med,
        "runs_s": results,
        "ratio_vfleet_forks1_over_forksN": round(med["vfleet_forks1"] / med[f"vfleet_forks{n}"], 2),
    }
    if "ansible_forks1" in med:
        out["ratio_ansible_forks1_over_forksN"] = round(med["ansible_forks1"] / med[f"ansible_forks{n}"], 2)
        out["ratio_ansible_over_vfleet_forksN"] = round(med[f"ansible_forks{n}"] / med[f"vfleet_forks{n}"], 2)
        out["ratio_ansible_over_vfleet_forks1"] = round(med["ansible_forks1"] / med["vfleet_forks1"], 2)
    else:
        out["ansible"] = "not installed: pip install 'vfleet[bench]'"
    return emit(out, args.out)


if __name__ == "__main__":
    sys.exit(main())
