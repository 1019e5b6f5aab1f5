"""A fourth lab host, lab4, serving vLLM beside lab1 and lab2, for the lab tests that need
a model on two hosts next to a model on one (test_models) or a single-host replica next to
a two-host one (test_replica).

Why this shape: every other module calls `lab.ensure(3)` and expects lab1, lab2 vLLM and the
gateway on lab3. So lab4 is started with ensure(4) as a vLLM host (no gateway: the lab holds
it to one core, as every vLLM host, lab4 on core 1 beside lab2 on a 2-core machine) and the
shared inventory is put back to the 3-host shape at once (ensure(3) leaves a running lab4 up,
on its core, but out of its inventory); lab4 joins `vllm` only in the module's own inventory. At the module's end `retire` stops and disables lab4's vLLM (its
memory goes back to the 2-core, 24 GiB machine); the idle host (~20 MiB) stays, so the next
module or a rerun reuses its venv instead of installing again (~110 s)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.integration.deploy_env import vfleet

EXTRA = "lab4"


def lab_inventory_with_lab4(lab, dest: Path) -> Path:
    """The lab's 3-host inventory (lab3 the gateway) with lab4 added to `vllm`, in dest."""
    four = yaml.safe_load(lab.ensure(4, gateways=0).read_text())
    entry = four["all"]["children"]["vllm"]["hosts"][EXTRA]
    data = yaml.safe_load(lab.ensure(3).read_text())
    data["all"]["children"]["vllm"]["hosts"][EXTRA] = entry
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "lab-with-lab4.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def retire(inventory: Path) -> None:
    """Stop and disable lab4's vLLM; a later deploy enables and starts it again."""
    vfleet(
        "run",
        "--inventory",
        str(inventory),
        "--limit",
        EXTRA,
        "--command",
        "systemctl disable --now vllm.service || true",
        timeout=300,
    )
