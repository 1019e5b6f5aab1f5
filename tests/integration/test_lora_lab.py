"""LoRA adapters on the deployed lab (issue 25): the tiny model served from an hf:// source and two
adapters of it built with peft (vfleet/lab/model/build_lora.py; one from a controller folder, one
from the hub cache), synced like the weights, rendered into the unit, smoke-checked one by one,
listed and routed by the gateway and asked through it with the official OpenAI SDK; then one
adapter replaced by `deploy --batch 1` under a steady stream of its own requests: none fails,
and afterwards it answers with its new weights. The lab's inventory is deployed again at the end."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import openai
import pytest

from tests.hf_cache import add_revision, files_of
from tests.integration.deploy_env import API_KEY, changed_targets, ensure_model, vfleet, write_deploy_inventory
from vfleet.clients.loadgen import LoadGenerator
from vfleet.lab.demo import CACHE
from vfleet.lab.model.build_lora import PROMPT, WORDS, build_lora_adapters
from vfleet.roles.model_source._manifest import MANIFEST_NAME

pytestmark = pytest.mark.integration

MODEL_REPO, BRAVO_REPO = "vfleet-lab/tiny", "vfleet-lab/tiny-bravo"
MODEL_COMMIT, BRAVO_COMMIT = "3" * 40, "4" * 40


def deploy(inv: Path, env: dict[str, str], report: Path, *extra: str) -> tuple[dict, str]:
    p = vfleet("deploy", "--inventory", str(inv), "--report", str(report), *extra, timeout=1800, env=env)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    return json.loads(report.read_text()), out


def ask(client: openai.OpenAI, model: str) -> str:
    r = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": PROMPT}], max_tokens=8, temperature=0
    )
    return (r.choices[0].message.content or "").strip()


def gateway(inv: Path) -> str:
    data = json.loads(vfleet("inventory", "--inventory", str(inv)).stdout)
    gw = data["gateways"]["hosts"][0]
    return f"http://{data['_meta']['hostvars'][gw]['ansible_host']}:80"


def test_an_hf_model_and_two_adapters_served_smoked_routed_and_one_replaced_under_load(deployed, tmp_path):
    base = ensure_model()
    adapters = build_lora_adapters(base, CACHE / "models" / "lora")
    cache = tmp_path / "hub"
    add_revision(cache, MODEL_REPO, MODEL_COMMIT, files_of(base, skip=(MANIFEST_NAME,)))
    add_revision(cache, BRAVO_REPO, BRAVO_COMMIT, files_of(adapters["tiny-bravo"]))
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    alpha = {"name": "tiny-alpha", "source": str(adapters["tiny-alpha"])}
    bravo = {"name": "tiny-bravo", "source": f"hf://{BRAVO_REPO}@main"}
    inv = write_deploy_inventory(
        deployed["lab"], tmp_path, extra={"model_source": f"hf://{MODEL_REPO}@main", "lora_adapters": [alpha, bravo]}
    )
    try:
        report, out = deploy(inv, env, tmp_path / "lora.json")
        assert report["weights"]["hub_commit"] == MODEL_COMMIT, report["weights"]
        assert report["lora_adapters"]["tiny-bravo"]["hub_commit"] == BRAVO_COMMIT, report["lora_adapters"]
        for host in ("lab1", "lab2"):
            smoke = report["hosts"][host]["smoke"]["host"]
            assert smoke["adapter tiny-alpha"]["ok"] and smoke["adapter tiny-bravo"]["ok"], smoke
        gw_smoke = report["hosts"]["lab3"]["smoke"]["gateway"]
        assert gw_smoke["adapter tiny-alpha"]["ok"] and gw_smoke["adapter tiny-bravo"]["ok"], gw_smoke
        units = vfleet(
            "run",
            "--inventory",
            str(inv),
            "--limit",
            "vllm",
            "--command",
            "systemctl show -p ExecStart --value vllm | grep -o -- '--enable-lora[^;]*'",
        ).stdout
        # two adapters, ranks 8 and 16, and the CPU build's empty last slot (lora_flags.py)
        assert (
            units.count(
                "--enable-lora --max-loras 3 --max-lora-rank 16 --lora-modules "
                "tiny-alpha=/srv/models/lora/tiny-alpha tiny-bravo=/srv/models/lora/tiny-bravo"
            )
            == 2
        ), units

        client = openai.OpenAI(base_url=gateway(inv) + "/v1", api_key=API_KEY, max_retries=0, timeout=120)
        listed = {m.id: getattr(m, "parent", None) for m in client.models.list().data}
        assert listed == {"tiny": None, "tiny-alpha": "tiny", "tiny-bravo": "tiny"}, listed
        assert [ask(client, m) for m in ("tiny-alpha", "tiny-bravo")] == [WORDS["tiny-alpha"], WORDS["tiny-bravo"]]
        assert ask(client, "tiny") not in WORDS.values()

        # tiny-alpha gets new weights (bravo's files in a folder of its own): a new copy on each
        # host, its link switched and the hosts restarted one at a time behind the gateway
        replaced = tmp_path / "tiny-alpha-v2"
        shutil.copytree(adapters["tiny-bravo"], replaced)
        inv2 = write_deploy_inventory(
            deployed["lab"],
            tmp_path / "v2",
            extra={
                "model_source": f"hf://{MODEL_REPO}@main",
                "lora_adapters": [{**alpha, "source": str(replaced)}, bravo],
            },
        )
        gen = LoadGenerator(
            gateway(inv), "tiny-alpha", API_KEY, concurrency=1, max_tokens=16, pause_s=1.5, prompt=PROMPT
        ).start()
        try:
            report, out = deploy(inv2, env, tmp_path / "replace.json", "--batch", "1")
        finally:
            gen.stop()
        load = gen.summary()
        assert load["requests"] >= 10 and load["failed"] == 0 and load["truncated"] == 0, (load["errors"], load)
        # a copy made by an earlier run is kept on the host and reused: then nothing is sent
        assert (
            report["lora_adapters"]["tiny-alpha"]["copies"] in (0, 2)
            and report["lora_adapters"]["tiny-bravo"]["copies"] == 0
        )
        for host in ("lab1", "lab2"):
            assert "symlink /srv/models/lora/tiny-alpha" in changed_targets(report, host), changed_targets(report, host)
        assert [len(b) for b in report["rollout"]["batches"]] == [1, 1], report["rollout"]
        assert ask(client, "tiny-alpha") == WORDS["tiny-bravo"]
        kept = vfleet(
            "run",
            "--inventory",
            str(inv),
            "--limit",
            "vllm",
            "--command",
            "ls -d /srv/models/.versions/lora-tiny-alpha-* | wc -l",
        ).stdout
        assert len(re.findall(r"\] [2-9]", kept)) == 2, kept  # the first copy kept beside the new one
    finally:
        p = vfleet("deploy", "--inventory", str(deployed["inv"]), timeout=1800)
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
