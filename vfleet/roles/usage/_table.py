"""The console view of a usage summary: one table for the fleet, then a line per thing the
reader must know (lines skipped, a gateway whose read hit the byte bound)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.table import Table

from vfleet.roles.usage._logread import MAX_BYTES

__all__ = ["usage_table", "notes"]


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def usage_table(rows: Sequence[Mapping[str, Any]], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("tenant", "model", "requests", "errors", "p50 s", "p95 s", "ttfb p50 s", "ttfb p95 s"):
        table.add_column(name, justify="right" if name not in ("tenant", "model", "errors") else "left")
    for r in rows:
        errors = ", ".join(f"{k} {n}" for k, n in r["errors"].items()) or "-"
        table.add_row(
            r["tenant"] or "(none)",
            r["model"] or "(none)",
            str(r["requests"]),
            errors,
            _s(r["p50_s"]),
            _s(r["p95_s"]),
            _s(r["ttfb_p50_s"]),
            _s(r["ttfb_p95_s"]),
        )
    return table


def notes(skipped: int, truncated: Sequence[str]) -> list[str]:
    out = []
    if skipped:
        out.append(f"{skipped} log line(s) skipped: not a JSON object with the access log's keys")
    for name in truncated:
        out.append(
            f"{name}: the window holds more than {MAX_BYTES // 2**20} MiB of log lines; read the "
            "oldest part up to that bound: give a shorter --since for the whole window"
        )
    return out
