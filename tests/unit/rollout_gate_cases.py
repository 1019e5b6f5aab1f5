"""Shared ground of the eval gate tests (test_rollout_gate, test_rollout_gate_refusals,
test_rollout_gate_cli): EvalReport-shaped data (the items of the eval set, each passed or failed,
with a divergence or an error) that saves itself like an EvalReport, and a fleet of local hosts
(ansible_connection: local) loaded through the inventory loader and schema."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.unit.configs import LAB_VARS
from vfleet.clients.eval.report import EvalReport
from vfleet.config.fleet import Fleet
from vfleet.config.variables import SCHEMA
from vfleet.engine.inventory import load_inventory

IDS = ["capital-france", "add-small", "json-person", "count-three"]
HASHES = {i: f"hash-{i}" for i in IDS}  # EvalItem.digest of each item of the eval set


# -- EvalReport-shaped data --------------------------------------------------------------------
@dataclass
class Report:
    """What the gate reads of an EvalReport: target, settings, items, score; save(path)."""

    data: dict[str, Any]

    @property
    def target(self) -> dict:
        return self.data["target"]

    @property
    def settings(self) -> dict:
        return self.data["settings"]

    @property
    def items(self) -> list:
        return [type("Item", (), item) for item in self.data["items"]]

    def baseline_problem(self) -> str | None:
        return EvalReport.baseline_problem(self)  # the real check, over these items

    @property
    def score(self) -> float:
        judged = [i for i in self.data["items"] if i["passed"] is not None]
        return sum(i["passed"] for i in judged) / len(judged)

    def save(self, path: str) -> None:
        Path(path).write_text(json.dumps(self.data))


def report(
    model: str = "tiny",
    failing: tuple[str, ...] = (),
    divergence: float | None = None,
    max_tokens: int = 24,
    error: str | None = None,
) -> Report:
    items = [
        {
            "id": i,
            "reply": "Lyon." if i in failing else "ok",
            "passed": i not in failing,
            "divergence": divergence,
            "error": error,
            "token_ids": [] if error else [7, 8],
            "item_hash": HASHES[i],
        }
        for i in IDS
    ]
    return Report(
        {
            "target": {"base_url": "http://x:8000", "model": model, "label": "x"},
            "settings": {"seed": 0, "max_tokens": max_tokens, "top_logprobs": 5, "concurrency": 1},
            "measured": {},
            "items": items,
            "created": "2026-12-02T16:00:00",
        }
    )


# -- a fleet of local hosts --------------------------------------------------------------------
def fleet_of(tmp_path: Path, models: dict[str, str], **more: Any) -> Fleet:
    hosts = {h: {"model_name": m} for h, m in models.items()}
    data = {
        "all": {"vars": {**LAB_VARS, "ansible_connection": "local", **more}, "children": {"vllm": {"hosts": hosts}}}
    }
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return Fleet.of(load_inventory(path, schema=SCHEMA))
