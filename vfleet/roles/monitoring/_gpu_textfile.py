#!/usr/bin/python3
"""GPU metrics for node_exporter's textfile collector, from nvidia-smi's query mode.

Why nvidia-smi and not NVML (DCGM exporter, pynvml): nvidia-smi is on every host with the
driver, its CSV query mode is a documented, stable interface, and it is what the lab's
simulated GPUs answer (vfleet/lab/nvidia_smi.py), so the lab exercises this very code.
Why a file for node_exporter rather than a daemon of our own: Debian's
prometheus-node-exporter serves it (and the host's CPU, memory and disks) with nothing of
ours listening; this script runs from a systemd timer, writes, and exits.

Standalone on purpose (stdlib only, no vfleet imports): `vfleet monitor --deploy` copies it
to each vLLM host (vfleet/roles/monitoring/_gpu_exporter.py), where the host's /usr/bin/python3
runs it. The file is written to a temp name beside the target and renamed over it, so
node_exporter never reads half a file.

What it says when things go wrong: nvidia-smi missing, failing (exit != 0: driver gone, a
GPU lost), hanging past --timeout, or printing a line that is not a GPU's row (`Unable to
determine the device handle for GPU 0000:3B:00.0: GPU is lost. ...`) -> vfleet_gpu_smi_ok 0;
the GPUs it did list are still reported, and vfleet_gpu_devices says how many."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

# `name` last: the real tool does not quote, and only a name could hold ", ".
FIELDS = (
    "index",
    "uuid",
    "pci.bus_id",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "ecc.errors.uncorrected.volatile.total",
    "name",
)
COMMAND = ("nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits")
MIB = 1024 * 1024
# Debian's prometheus-node-exporter reads *.prom in this folder (its README.textfile).
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
TEXTFILE_NAME = "vfleet-gpu.prom"
PREFIX = "vfleet_gpu_"

# (metric, TYPE, HELP, field, scale): one series per GPU, left out where the GPU says [N/A].
PER_GPU = (
    (
        "utilization_ratio",
        "gauge",
        "Fraction of the last sample period a kernel ran on the GPU (nvidia-smi utilization.gpu / 100).",
        "utilization.gpu",
        0.01,
    ),
    ("memory_used_bytes", "gauge", "GPU memory in use (nvidia-smi memory.used).", "memory.used", MIB),
    ("memory_total_bytes", "gauge", "GPU memory (nvidia-smi memory.total).", "memory.total", MIB),
    (
        "ecc_uncorrected_errors_total",
        "counter",
        "Uncorrected ECC errors since the driver loaded (nvidia-smi ecc.errors.uncorrected.volatile.total).",
        "ecc.errors.uncorrected.volatile.total",
        1,
    ),
)


@dataclass
class Reading:
    """What one nvidia-smi call said: each GPU's cells by field, and whether every GPU answered."""

    ok: bool
    gpus: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse(stdout: str, returncode: int) -> Reading:
    """nvidia-smi's `csv,noheader,nounits` rows -> Reading. A line that is not a row (an
    error about one GPU) or a non-zero exit makes the reading not ok; the rows still count."""
    gpus, problems = [], []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        cells = line.split(", ", len(FIELDS) - 1)
        if len(cells) == len(FIELDS) and cells[0].isdigit():
            gpus.append(dict(zip(FIELDS, cells)))
        else:
            problems.append(line.strip())
    if returncode != 0:
        problems.append(f"nvidia-smi exited {returncode}")
    return Reading(ok=not problems, gpus=gpus, problems=problems)


def read(timeout: float, smi: str = COMMAND[0]) -> Reading:
    """Run nvidia-smi once; a missing or hung tool is a reading that is not ok."""
    try:
        done = subprocess.run([smi, *COMMAND[1:]], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return Reading(ok=False, problems=[f"{smi} not found"])
    except subprocess.TimeoutExpired:
        return Reading(ok=False, problems=[f"{smi} did not answer within {timeout:g}s"])
    return parse(done.stdout, done.returncode)


def _label(value: str) -> str:
    """A label value in the text format: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(cell: str, scale: float) -> str | None:
    """`143771` -> its value times scale; `[N/A]`, `[Not Supported]`, `[Unknown Error]` -> None."""
    try:
        return f"{float(cell) * scale:.17g}"
    except ValueError:
        return None


def _metric(name: str, kind: str, help_: str, samples: list[str]) -> list[str]:
    return [f"# HELP {PREFIX}{name} {help_}", f"# TYPE {PREFIX}{name} {kind}", *samples]


def render(reading: Reading, expected: int) -> str:
    """The textfile: HELP and TYPE for every metric, one series per GPU that answered."""
    lines = _metric(
        "smi_ok",
        "gauge",
        "1 if nvidia-smi answered for every GPU, 0 if it failed, hung, is missing or reported a GPU it cannot reach.",
        [f"{PREFIX}smi_ok {int(reading.ok)}"],
    )
    lines += _metric("devices", "gauge", "GPUs nvidia-smi listed.", [f"{PREFIX}devices {len(reading.gpus)}"])
    lines += _metric(
        "devices_expected",
        "gauge",
        "GPUs this host should have (vfleet's inventory).",
        [f"{PREFIX}devices_expected {expected}"],
    )
    info = [
        f'{PREFIX}info{{gpu="{_label(g["index"])}",uuid="{_label(g["uuid"])}",name="{_label(g["name"])}",'
        f'pci_bus_id="{_label(g["pci.bus_id"])}"}} 1'
        for g in reading.gpus
    ]
    lines += _metric("info", "gauge", "One series per GPU nvidia-smi listed, naming it.", info)
    for name, kind, help_, key, scale in PER_GPU:
        samples = []
        for g in reading.gpus:
            value = _number(g[key], scale)
            if value is not None:
                samples.append(f'{PREFIX}{name}{{gpu="{_label(g["index"])}",uuid="{_label(g["uuid"])}"}} {value}')
        lines += _metric(name, kind, help_, samples)
    return "\n".join(lines) + "\n"


def write_atomically(path: str, text: str) -> None:
    """Temp file in the target's folder, then rename: a reader sees the old or the new file."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # node_exporter runs as `prometheus`
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", required=True, help="the .prom file node_exporter reads")
    ap.add_argument("--expected", type=int, required=True, help="GPUs this host should have")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds nvidia-smi may take")
    ap.add_argument("--nvidia-smi", default=COMMAND[0], dest="smi")
    args = ap.parse_args(argv)
    reading = read(args.timeout, args.smi)
    for problem in reading.problems:
        print(problem, file=sys.stderr)  # to the journal; the metric says it too
    write_atomically(args.output, render(reading, args.expected))
    return 0


if __name__ == "__main__":
    sys.exit(main())
