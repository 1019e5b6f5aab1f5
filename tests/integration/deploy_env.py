"""Shared set-up for the tests that deploy a real vLLM on the lab (the same inventory
`make demo` deploys), plus small helpers to run the CLI and read its JSON report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from vfleet.lab.demo import ensure_model, write_deploy_inventory as _write

API_KEY = "sk-lab-test-0123456789"

__all__ = ["API_KEY", "ensure_model", "write_deploy_inventory", "vfleet", "run_report", "restarts", "changed_targets"]


def write_deploy_inventory(
    lab_inventory: Path, dest_dir: Path, extra: dict | None = None, host_vars: dict[str, dict] | None = None
) -> Path:
    return _write(lab_inventory, dest_dir, API_KEY, extra, host_vars)


def vfleet(*args: str, timeout: float = 1800, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the CLI; one that runs past `timeout` is killed and returns exit 124 with what it
    printed until then (a TimeoutExpired would show pytest a cut repr: where it waited is
    in that output)."""
    argv = [sys.executable, "-m", "vfleet.cli", *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:

        def text(b: bytes | str | None) -> str:
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")

        return subprocess.CompletedProcess(
            argv, 124, text(exc.stdout) + f"\n[test] killed after {timeout:g}s\n", text(exc.stderr)
        )


def run_report(task: str, inventory: Path, report: Path, *extra: str, timeout: float = 1800) -> tuple[int, dict, str]:
    p = vfleet(task, "--inventory", str(inventory), "--report", str(report), *extra, timeout=timeout)
    data = json.loads(report.read_text()) if report.exists() else {}
    return p.returncode, data, p.stdout + p.stderr


def restarts(report: dict) -> dict[str, int]:
    return {h: d.get("restarts", 0) for h, d in report["hosts"].items()}


def changed_targets(report: dict, host: str) -> list[str]:
    return [f"{s['action']} {s['target']}" for s in report["hosts"][host]["steps"] if s["status"] == "changed"]
