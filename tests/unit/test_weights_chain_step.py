"""`weights_distribution: chain` through the CLI's weights step, on hosts reached by a local
connection (each its own model_dir): every host gets the verified copy moved into .versions
and its link switched, as with waves; a host that holds the copy feeds the next run's chain;
a HOST:/path source or an unknown value is refused before anything runs, in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from vfleet.roles.model_source._manifest import MANIFEST_NAME


def _inventory(tmp_path: Path, hosts: list[str], **extra: str) -> Path:
    lines = ["all:", "  children:", "    vllm:", "      hosts:"]
    for h in hosts:
        lines += [
            f"        {h}:",
            "          ansible_connection: local",
            f"          model_dir: {tmp_path / 'hosts' / h}",
        ]
    lines += [
        "  vars:",
        "    model_name: tiny",
        f"    model_source: {tmp_path / 'model'}",
        *[f"    {k}: {v}" for k, v in {"weights_distribution": "chain", **extra}.items()],
    ]
    inv = tmp_path / "inv.yaml"
    inv.write_text("\n".join(lines) + "\n")
    return inv


def _weights(inv: Path, report: Path) -> tuple[int, dict, str]:
    p = subprocess.run(
        [sys.executable, "-m", "vfleet.cli", "weights", "--inventory", str(inv), "--report", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return p.returncode, json.loads(report.read_text()) if report.exists() else {}, p.stdout + p.stderr


def test_chain_deploys_verified_copies_and_a_holder_feeds_the_next_host(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["X"]}\n')
    (model / "model.safetensors").write_bytes(os.urandom(5 << 20))
    code, report, out = _weights(_inventory(tmp_path, ["a", "b", "c"]), tmp_path / "r1.json")
    assert code == 0, out
    assert report["weights"]["copies"] == 3 and report["weights"]["chain_rounds"] == 1, report["weights"]
    assert report["weights"]["controller_bytes_sent"] >= 5 << 20
    for h in "abc":
        live = tmp_path / "hosts" / h / "tiny"
        assert live.is_symlink() and os.readlink(live).startswith(str(tmp_path / "hosts" / h / ".versions"))
        assert (live / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()
        assert (live / MANIFEST_NAME).exists() and (live / ".vfleet-verified").exists()
        assert not [p.name for p in (tmp_path / "hosts" / h / ".staging").iterdir()]  # nothing left behind
    # run again: nothing to copy; a new host is fed by one that holds the copy, not the controller
    code, report, out = _weights(_inventory(tmp_path, ["a", "b", "c", "d"]), tmp_path / "r2.json")
    assert code == 0, out
    assert report["weights"]["copies"] == 1 and report["weights"]["controller_bytes_sent"] == 0, report["weights"]
    assert (tmp_path / "hosts" / "d" / "tiny" / "model.safetensors").stat().st_size == 5 << 20


def test_chain_with_a_host_source_or_an_unknown_value_is_refused_in_one_line(tmp_path):
    inv = _inventory(tmp_path, ["a"])
    inv.write_text(inv.read_text().replace(f"model_source: {tmp_path / 'model'}", "model_source: a:/srv/m"))
    code, _, out = _weights(inv, tmp_path / "r.json")
    assert code != 0 and "Traceback" not in out
    assert "host 'a': weights_distribution chain needs model_source on the controller" in out, out
    inv = _inventory(tmp_path, ["a"], weights_distribution="tree")
    code, _, out = _weights(inv, tmp_path / "r.json")
    assert code != 0 and "Traceback" not in out and "weights_distribution" in out, out
