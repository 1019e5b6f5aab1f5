"""Speculative decoding on the deployed lab (issue 25): a draft model (a copy of the lab's tiny
model, from a controller folder) synced like the weights to <model_dir>/draft/vllm, rendered as
--speculative-config, started by the lab's CPU vLLM; smoke reads the acceptance vLLM exports,
and the planner's CPU KV figure, the draft's layers included, equals what vLLM logs. The lab's
inventory is deployed again at the end."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.integration.deploy_env import ensure_model, run_report, vfleet, write_deploy_inventory
from vfleet.roles.preflight import _capacity as capacity
from vfleet.roles.preflight._capacity.draft import Draft
from vfleet.roles.preflight._model_files import read_config

pytestmark = pytest.mark.integration


def test_a_draft_model_is_synced_rendered_and_its_acceptance_and_kv_reported(deployed, tmp_path):
    base = ensure_model()
    draft = tmp_path / "draft"
    shutil.copytree(base, draft)
    inv = write_deploy_inventory(
        deployed["lab"],
        tmp_path,
        extra={"speculative_decoding": {"method": "draft_model", "source": str(draft), "num_speculative_tokens": 3}},
    )
    try:
        code, report, out = run_report("deploy", inv, tmp_path / "spec.json")
        assert code == 0, out[-4000:]
        [copies] = report["speculative_draft"].values()
        assert copies["copies"] == 2, report["speculative_draft"]
        for host in ("lab1", "lab2"):
            check = report["hosts"][host]["smoke"]["host"]["speculative decoding"]
            # the draft is the model itself: greedy proposals are all kept
            assert check["ok"] and check["draft_tokens"] > 0 and check["acceptance_rate"] > 0.9, check
        logged = vfleet(
            "run",
            "--inventory",
            str(inv),
            "--limit",
            "vllm",
            "--command",
            "journalctl -u vllm -o cat | grep -o 'KV cache size: [0-9,]* tokens' | tail -1",
        ).stdout
        tokens = {int(n.replace(",", "")) for n in re.findall(r"KV cache size: ([\d,]+) tokens", logged)}
        config = read_config(base / "config.json")
        planned = capacity.cpu_kv_capacity_tokens(config, 1, draft=Draft(config))
        assert tokens == {planned} and planned * 2 == capacity.cpu_kv_capacity_tokens(config, 1), (
            tokens,
            planned,
            logged,
        )
        units = vfleet(
            "run",
            "--inventory",
            str(inv),
            "--limit",
            "vllm",
            "--command",
            "systemctl show -p ExecStart --value vllm | grep -o -- '--speculative-config [^ ]*'",
        ).stdout
        assert (
            units.count(
                '--speculative-config {"method":"draft_model","num_speculative_tokens":3,'
                '"model":"/srv/models/draft/vllm"}'
            )
            == 2
        ), units
    finally:
        p = vfleet("deploy", "--inventory", str(deployed["inv"]), timeout=1800)
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
