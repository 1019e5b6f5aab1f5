"""`model_source: hf://ORG/NAME@REVISION` on the deployed lab fleet: the lab's tiny model as a
Hugging Face cache on the controller (tests/hf_cache.py), resolved offline by huggingface_hub,
copied by `vfleet weights` into a model_dir of its own (the served copy is not touched), and
checked on each host by the host's own `sha256sum -c`. A branch that moves is a new copy that
`--check` names, with its commit, before anything is copied."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.hf_cache import add_revision, files_of
from tests.integration.deploy_env import ensure_model, vfleet
from vfleet.roles.model_source._manifest import MANIFEST_NAME

pytestmark = pytest.mark.integration

REPO = "vfleet-lab/tiny"
FIRST, SECOND = "1" * 40, "2" * 40
MODEL_DIR = "/srv/models-hf"


def weights(inv: Path, env: dict[str, str], report: Path, *extra: str) -> tuple[int, dict, str]:
    p = vfleet(
        "weights",
        "--inventory",
        str(inv),
        "--report",
        str(report),
        "--set",
        f"model_source=hf://{REPO}@main",
        "--set",
        f"model_dir={MODEL_DIR}",
        *extra,
        timeout=900,
        env=env,
    )
    return p.returncode, json.loads(report.read_text()) if report.exists() else {}, p.stdout + p.stderr


def on_hosts(inv: Path, command: str) -> dict[str, str]:
    """{host: its stdout} of `command` on lab1 and lab2."""
    p = vfleet("run", "--inventory", str(inv), "--limit", "lab1,lab2", "--command", command, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out: dict[str, str] = {}
    for line in p.stdout.splitlines():
        for host in ("lab1", "lab2"):
            if line.startswith(f"[{host}] "):
                out[host] = line[len(host) + 3 :]
    return out


def test_weights_from_an_hf_source_land_verified_pinned_and_a_moved_branch_shows(deployed, tmp_path):
    inv = deployed["inv"]
    cache = tmp_path / "hub"
    model = files_of(ensure_model(), skip=(MANIFEST_NAME,))
    add_revision(cache, REPO, FIRST, {**model, "README.md": b"# tiny, first commit\n"})
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    try:
        code, report, out = weights(inv, env, tmp_path / "first.json")
        assert code == 0, out
        totals = report["weights"]
        assert totals["hub_commit"] == FIRST and totals["copies"] == 2 and totals["controller_bytes_sent"] > 0, totals
        # each host: the link into a verified copy of plain files that passes the host's own check
        check = (
            f"cd {MODEL_DIR}/tiny/ && sha256sum --quiet --strict -c {MANIFEST_NAME} && "
            "echo files=$(find . -type f | wc -l) links=$(find . -type l | wc -l) readme=$(cat README.md)"
        )
        for host, line in on_hosts(inv, check).items():
            assert line == f"files={len(model) + 3} links=0 readme=# tiny, first commit", (host, line)

        code, report, out = weights(inv, env, tmp_path / "again.json")
        assert code == 0 and report["weights"]["copies"] == 0, out

        # the branch moves on the hub: --check names the new commit and copies nothing
        add_revision(cache, REPO, SECOND, {**model, "README.md": b"# tiny, second commit\n"})
        code, report, out = weights(inv, env, tmp_path / "moved.json", "--check")
        assert code == 0 and report["weights"]["hub_commit"] == SECOND, out
        assert f"would copy hf://{REPO}@main (commit {SECOND})" in json.dumps(report), out
        assert set(on_hosts(inv, "cat /srv/models-hf/tiny/README.md").values()) == {"# tiny, first commit"}

        # offline, a revision the cache does not hold: one line, nothing copied
        code, _, out = weights(
            inv, env, tmp_path / "missing.json", "--set", "model_revision=v9", "--set", f"model_source=hf://{REPO}"
        )
        assert code != 0 and "Traceback" not in out and "revision 'v9' is not in the Hugging Face cache" in out, out
    finally:
        on_hosts(inv, f"rm -rf -- {MODEL_DIR}; echo gone")
