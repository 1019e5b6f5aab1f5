"""One example of the property-based suite, end to end: write the inventory, run the real CLI
in-process (`vfleet render --dest`, `vfleet monitor --dest`), and judge every outcome.

The property (issue 22): each run either exits 2 with one `error:` line per problem and no
traceback, or exits 0 and every file it wrote passes its real validator
(tests/unit/property_validators.py); and no secret is in any output but the env file meant for it
(and there only unmasked by deploy, never by render). Besides the CLI, the same fleet feeds the
renderers deploy uses in-process: the unmasked env file (secrets round-trip byte for byte through
systemd's reader and sh), the vLLM argv (ExecStart= read back equals it), and the shell commands
deploy runs or prints (bash -n)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import tempfile
from pathlib import Path
from unittest import mock

import vfleet.engine.runner
from tests.unit.property_fleet import fleet_checks
from tests.unit.property_support import Example, inventory_text, secret_tokens
from tests.unit.property_validators import Check, promtool_check, run_checks
from vfleet.cli.main import program

__all__ = ["run_example", "cli"]

_LINE_SAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_BINARIES = ("vllm", "python", "ray")


def cli(*argv: str) -> tuple[int, str, str]:
    """The real `vfleet` in this process (no fork per example); no host is ever contacted."""
    out, err = io.StringIO(), io.StringIO()

    def no_connection(*a, **k):
        raise AssertionError(f"render/monitor tried to connect: {a}")

    with (
        mock.patch.object(vfleet.engine.runner, "open_connection", no_connection),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            program.run(["vfleet", *argv])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception as exc:  # what a user would see as a traceback
            return -1, out.getvalue(), err.getvalue() + f"Traceback: {type(exc).__name__}: {exc}"[:500]
    return code, out.getvalue(), err.getvalue()


def judge_cli(what: str, code: int, out: str, err: str) -> list[str]:
    """Exit 0, or exit 2 with `error:` lines (one a problem: a list may hold several); stderr holds only error/warning lines,
    each one line of printable text (a value's newline or ESC must not reach the terminal raw)."""
    bad = []
    if code not in (0, 2):
        bad.append(f"{what}: exit {code}")
    lines = err[:-1].split("\n") if err.endswith("\n") else (err.split("\n") if err else [])
    if "Traceback" in out + err or "internal error" in out + err:
        bad.append(f"{what}: traceback")
    stray = [ln for ln in lines if not ln.startswith(("error: ", "warning: "))]
    if stray:
        bad.append(f"{what}: stderr line that is neither error nor warning: {stray[0][:300]!r}")
    raw = [ln for ln in lines if _LINE_SAFE.search(ln)]
    if raw:
        bad.append(f"{what}: control character in a message: {raw[0][:300]!r}")
    errors = [ln for ln in lines if ln.startswith("error: ")]
    if code == 2 and not errors:
        bad.append(f"{what}: exit 2 without an error line: {err[-600:]!r}")
    if code == 0 and errors:
        bad.append(f"{what}: exit 0 with an error line: {errors[0][:300]!r}")
    for token in secret_tokens():
        if token in out + err:
            bad.append(f"{what}: secret in the terminal output: {(out + err)[-600:]!r}")
    return bad


def _fake_root(tmp: Path) -> Path:
    """vllm_root of the base fleet: real executables, so systemd-analyze checks ExecStart=."""
    root = tmp / "opt vllm"
    (root / "current" / "bin").mkdir(parents=True)
    for name in _BINARIES:
        exe = root / "current" / "bin" / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    return root


def _leaks(folder: Path) -> list[str]:
    found = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = f.read_text(errors="replace")
        found += [f"secret in {f.relative_to(folder)}" for t in secret_tokens() if t in text]
    return found


def run_example(example: Example) -> list[str]:
    """Every failure of the property for this example (empty: it holds)."""
    with tempfile.TemporaryDirectory(prefix="vfleet-prop-") as t:
        tmp = Path(t)
        inv = tmp / "inventory.yaml"
        inv.write_text(inventory_text(example, _fake_root(tmp)), encoding="utf-8")
        failures: list[str] = []
        checks: list[Check] = []
        code, out, err = cli("render", "--inventory", str(inv), "--dest", str(tmp / "render"))
        failures += judge_cli("render", code, out, err)
        if code == 0:
            failures += _leaks(tmp / "render")
            more, fail = fleet_checks(inv, tmp)
            checks += more
            failures += fail
        mcode, mout, merr = cli("monitor", "--inventory", str(inv), "--dest", str(tmp / "monitor"))
        failures += judge_cli("monitor", mcode, mout, merr)
        if mcode == 0:
            failures += _leaks(tmp / "monitor")
            checks.append(promtool_check(tmp / "monitor"))
            for f in (tmp / "monitor").rglob("*.json"):
                try:
                    json.loads(f.read_text())
                except ValueError as exc:
                    failures.append(f"{f.name}: not JSON: {exc}")
        return failures + run_checks(checks)
