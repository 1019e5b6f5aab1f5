"""Bytes the controller sends to put a model on 1 host vs on N hosts, with and without
fan-out (hosts that hold a verified copy feed the next ones). Prints JSON with the ratios.
Needs the lab (root).

    python benchmarks/weights_fanout.py --hosts 6 --mib 64 [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from common import emit  # benchmarks/common.py (scripts run from benchmarks/ or by path)


def make_model(root: Path, mib: int) -> Path:
    model = root / "bench-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}))
    with open(model / "model.safetensors", "wb") as f:  # content only matters for the byte count
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
    return model


def inventory(lab_inv: Path, dest: Path, model: Path, fanout: bool, model_dir: str) -> Path:
    data = yaml.safe_load(lab_inv.read_text())
    data["all"]["vars"].update(
        {
            "model_source": str(model),
            "model_name": "bench",
            "model_dir": model_dir,
            "weights_fanout": fanout,
            "vllm_version": "0.32.0",
        }
    )
    dest.write_text(yaml.safe_dump(data))
    return dest


def run(inv: Path, limit: str, report: Path) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "vfleet.cli",
            "weights",
            "--inventory",
            str(inv),
            "--limit",
            limit,
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise SystemExit(f"weights failed: {p.stdout[-1500:]}{p.stderr[-800:]}")
    data = json.loads(report.read_text())
    w = data.get("weights", {})
    return {
        "controller_bytes_sent": w.get("controller_bytes_sent", 0),
        "waves": w.get("waves"),
        "copies": w.get("copies"),
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=6)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from vfleet.lab import api

    lab_inv = api.up(args.hosts, gateways=0, echo=lambda _l: None).inventory
    names = [f"lab{i}" for i in range(1, args.hosts + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        model = make_model(tmp_path, args.mib)
        out: dict = {"hosts": args.hosts, "model_bytes": args.mib << 20}
        stamp = int(time.time())
        for fanout in (False, True):
            key = "fanout" if fanout else "direct"
            # each case starts from hosts without the model (a fresh model_dir)
            inv1 = inventory(lab_inv, tmp_path / f"{key}-1.yaml", model, fanout, f"/srv/bench-{key}-1-{stamp}")
            invn = inventory(lab_inv, tmp_path / f"{key}-n.yaml", model, fanout, f"/srv/bench-{key}-n-{stamp}")
            one = run(inv1, names[0], tmp_path / f"{key}-1.json")
            many = run(invn, ",".join(names), tmp_path / f"{key}-n.json")
            out[key] = {
                "one_host": one,
                "n_hosts": many,
                "ratio_n_over_1": round(many["controller_bytes_sent"] / max(1, one["controller_bytes_sent"]), 2),
            }
        subprocess.run(
            [
                sys.executable,
                "-m",
                "vfleet.cli",
                "run",
                "--inventory",
                str(lab_inv),
                "--quiet",
                "--command",
                f"rm -rf /srv/bench-*{stamp}",
            ],
            capture_output=True,
        )
    return emit(out, args.out)


if __name__ == "__main__":
    sys.exit(main())
