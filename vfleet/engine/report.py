"""The recap table (Ansible's PLAY RECAP) and the JSON report (the contract in docs/architecture.md):
{"task", "hosts": {name: {"status", "steps", "facts", "checks"}}, "summary": {status: count}}."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vfleet.engine.redact import current
from vfleet.engine.results import Status, plain
from vfleet.engine.runner import Play


def summary(play: Play) -> dict[str, int]:
    counts = {s.value: 0 for s in Status}
    for r in play.results.values():
        counts[r.status.value] += 1
    return counts


def report_dict(play: Play, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {
        "task": play.task,
        "started_at": play.wall_started,
        "elapsed_s": round(play.elapsed_s, 3),
        "check": play.options.check,
        "aborted": play.aborted,
        "hosts": {name: r.to_dict() for name, r in play.results.items()},
        "summary": summary(play),
    }
    d.update(plain(play.data))
    if extra:
        d.update(extra)
    return d


def write_json_atomic(path: str | Path, data: Any) -> Path:
    """Write JSON so a reader never sees half a report (temp file + rename), with the run's
    secrets hidden (vfleet/engine/redact.py): a report is attached to tickets and CI logs."""
    redactor = current()
    data = redactor.tree(data)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=lambda o: redactor.text(str(o)))
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def print_recap(play: Play, console: Console | None = None) -> None:
    console = console or play.console
    table = Table(title=f"RECAP {play.task}", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("host", style="bold")
    for s in Status:
        table.add_column(s.value, justify="right")
    table.add_column("elapsed", justify="right")
    table.add_column("status")
    for name, r in play.results.items():
        c = r.counts()
        style = {"failed": "red", "unreachable": "red", "changed": "yellow", "ok": "green"}.get(r.status.value, "")
        table.add_row(
            name,
            *(str(c[s.value]) for s in Status),
            f"{r.elapsed_s:.1f}s",
            f"[{style}]{r.status.value}[/]" if style else r.status.value,
        )
    console.print(table)
    for name, r in play.results.items():
        if r.failed:
            last = next((s for s in reversed(r.steps) if s.status in (Status.FAILED, Status.UNREACHABLE)), None)
            if last:
                console.print(
                    f"[red]{r.status.value}[/]: " + escape(f"[{name}] {last.message}"), highlight=False, soft_wrap=True
                )
    if play.aborted:
        console.print(f"[bold red]aborted[/]: {play.aborted}")
    console.print(f"elapsed {play.elapsed_s:.1f}s", highlight=False)
