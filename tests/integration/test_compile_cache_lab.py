"""compile_cache_share on the deployed lab fleet (vLLM 0.32.0's CPU build keeps a torch.compile
cache too: docs/lab-vllm-notes.md). The lab serves with enforce_eager (no compile); `deploy
--batch 1 --gate --set enforce_eager=false` changes both units, so lab1 restarts first and
compiles, its cache is packed once it serves and the eval gate found its answers unchanged,
copied to lab2 through the controller before lab2 restarts, and lab2's vLLM loads the graphs
instead of compiling them. Then the lab is put back (eager, each host bound to its own core)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.integration.deploy_env import vfleet

pytestmark = pytest.mark.integration

ROOT = "/var/cache/vllm/vllm"


def on_host(inv, host: str, command: str) -> str:
    p = vfleet("run", "--inventory", str(inv), "--limit", host, "--command", command, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_second_host_gets_the_first_hosts_compile_cache_and_starts_warm(deployed, tmp_path):
    inv = deployed["inv"]
    report_path = tmp_path / "deploy.json"
    gate = tmp_path / "eval.yaml"  # no --gate, no sharing (rolling.py share_cache)
    gate.write_text(yaml.safe_dump({"seed": 0, "max_tokens": 24, "concurrency": 1}))
    try:
        # one OpenMP binding for both: the lab binds each host to a core of its own, which vLLM
        # hashes (VLLM_CPU_OMP_THREADS_BIND), so as the lab is, lab2 is refused with one line:
        # "env VLLM_CPU_OMP_THREADS_BIND differs ('0' in lab1, '1' on lab2): lab2 compiles its own (env)"
        p = vfleet(
            "deploy",
            "--inventory",
            str(inv),
            "--batch",
            "1",
            "--gate",
            str(gate),
            "--set",
            "enforce_eager=false",
            "--set",
            "compile_cache_share=true",
            "--set",
            'vllm_env={"VLLM_CPU_OMP_THREADS_BIND": "0"}',
            "--report",
            str(report_path),
            timeout=2400,
        )
        out = p.stdout + p.stderr
        print(out[-2500:])
        assert p.returncode == 0, out[-4000:]
        check(inv, json.loads(report_path.read_text()), out)
    finally:
        back = vfleet("deploy", "--inventory", str(inv), "--batch", "1", timeout=2400)
        assert back.returncode == 0, (back.stdout + back.stderr)[-3000:]


def check(inv, report: dict, out: str) -> None:
    assert report["gate"]["hosts"]["lab1"]["passed"], report["gate"]  # what vouches for the cache
    lab2 = [s for s in report["hosts"]["lab2"]["steps"] if s["action"] == "compile cache"]
    assert any("compile cache of lab1 installed before the restart" in s["message"] for s in lab2), (lab2, out[-3000:])
    lab1 = [s for s in report["hosts"]["lab1"]["steps"] if s["action"] == "compile cache"]
    assert any(s["message"].startswith("packed ") for s in lab1), lab1
    shown = on_host(inv, "lab2", f"cat {ROOT}/.vfleet-compile-key.json").splitlines()
    key = json.loads(next(ln for ln in shown if ln.startswith("[lab2] "))[len("[lab2] ") :])
    assert key["source"] == "lab1" and key["entries"], key
    # lab2's vLLM, restarted after the copy, computed the same hash and went to the installed entry at
    # the identical path (vLLM 0.32's CPU build then fails to load the AOT artifact, "'function' object
    # has no attribute 'finalize_loading'", and compiles again with the copied Inductor cache)
    logs = {h: journal(inv, h) for h in ("lab1", "lab2")}
    print(logs)
    assert "Compiling a graph" in logs["lab1"] or "saved AOT" in logs["lab1"], logs
    for entry in key["entries"]:
        assert f"{ROOT}/torch_compile_cache/{entry}/" in logs["lab2"], (entry, logs["lab2"])


def journal(inv, host: str) -> str:
    """The compile lines of the host's latest vLLM start (its journal after the last banner); the
    first line of `vfleet run`'s output, which echoes the command, left out."""
    out = on_host(
        inv,
        host,
        'journalctl -u vllm -o cat --no-pager -n 3000 | awk \'/non-default args/ {buf=""} '
        '/torch.compile|Compiling|Directly load|AOT/ {buf=buf $0 "\\n"} END {printf "%s", buf}\'',
    )
    return out.split("\n", 1)[1] if "\n" in out else ""
