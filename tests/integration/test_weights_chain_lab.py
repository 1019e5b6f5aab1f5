"""`weights_distribution: chain` on the deployed lab fleet: the deploy's weights step copies the
lab's model by the pipelined chain (controller -> lab1 -> lab2 over the hosts' own SSH) into a
model_dir of its own (the served copy is not touched); each host's copy passes the host's own
`sha256sum -c` and its link points into .versions. A second run copies nothing; a host whose
copy is removed is fed by the host that still holds it, not by the controller, and the
controller reads the pieces' hashes it kept instead of hashing the model again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.deploy_env import vfleet
from vfleet.roles.model_source._manifest import MANIFEST_NAME

pytestmark = pytest.mark.integration

MODEL_DIR = "/srv/models-chain"


def weights(inv: Path, report: Path) -> tuple[int, dict, str]:
    p = vfleet(
        "weights",
        "--inventory",
        str(inv),
        "--report",
        str(report),
        "--set",
        "weights_distribution=chain",
        "--set",
        f"model_dir={MODEL_DIR}",
        timeout=900,
    )
    return p.returncode, json.loads(report.read_text()) if report.exists() else {}, p.stdout + p.stderr


def on_hosts(inv: Path, command: str, limit: str = "lab1,lab2") -> dict[str, str]:
    """{host: its stdout} of `command` on the hosts of `limit`."""
    p = vfleet("run", "--inventory", str(inv), "--limit", limit, "--command", command, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out: dict[str, str] = {}
    for line in p.stdout.splitlines():
        for host in limit.split(","):
            if line.startswith(f"[{host}] "):
                out[host] = line[len(host) + 3 :]
    return out


def test_weights_by_chain_land_verified_and_a_holder_feeds_a_new_copy(deployed, tmp_path):
    inv = deployed["inv"]
    try:
        code, report, out = weights(inv, tmp_path / "first.json")
        assert code == 0, out
        totals = report["weights"]
        assert totals["copies"] == 2 and totals["chain_rounds"] == 1 and totals["controller_bytes_sent"] > 0, totals
        check = (
            f"cd {MODEL_DIR}/tiny/ && sha256sum --quiet --strict -c {MANIFEST_NAME} && "
            f"echo $(readlink {MODEL_DIR}/tiny) $(ls -A {MODEL_DIR}/.staging | wc -l)"
        )
        for host, line in on_hosts(inv, check).items():  # verified, linked, nothing left in staging
            assert line.startswith(f"{MODEL_DIR}/.versions/tiny-") and line.endswith(" 0"), (host, line)

        code, report, out = weights(inv, tmp_path / "again.json")
        assert code == 0 and report["weights"]["copies"] == 0, out

        # lab2 loses its copy: lab1, which holds it, feeds the chain; the controller sends nothing
        on_hosts(inv, f"rm -rf -- {MODEL_DIR}/tiny {MODEL_DIR}/.versions; echo gone", limit="lab2")
        code, report, out = weights(inv, tmp_path / "refill.json")
        assert code == 0, out
        assert report["weights"]["copies"] == 1 and report["weights"]["controller_bytes_sent"] == 0, report["weights"]
        assert "their hashes kept from an earlier deploy" in out, out  # the controller did not re-read the model
        assert on_hosts(
            inv, f"cd {MODEL_DIR}/tiny/ && sha256sum --quiet --strict -c {MANIFEST_NAME} && echo ok", limit="lab2"
        ) == {"lab2": "ok"}
    finally:
        on_hosts(inv, f"rm -rf -- {MODEL_DIR}; echo gone")
