"""The status screen: a table of vLLM hosts (as `kubectl get pods -o wide` is of pods), one of
gateways, then one line per host whose verdict calls for action, naming the numbers it read.
Columns and their sources: docs/status.md."""

from __future__ import annotations

import posixpath
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from vfleet.clients.verdict import HEALTHY, IDLE
from vfleet.roles.status._collect import Round
from vfleet.roles.status._model import GatewayStatus, HostStatus

__all__ = ["HOST_COLUMNS", "GATEWAY_COLUMNS", "age", "host_cells", "gateway_cells", "screen"]

HOST_COLUMNS = (
    "HOST",
    "UNIT",
    "SINCE",
    "STARTS 1h",
    "VLLM",
    "VENV",
    "MODEL",
    "WEIGHTS",
    "GATEWAYS",
    "RUN",
    "WAIT",
    "KV",
    "PREEMPT",
    "GPU MEM",
    "GPU UTIL",
    "DRIFT",
    "VERDICT",
)
GATEWAY_COLUMNS = ("GATEWAY", "NGINX", "UP", "DOWN", "DRAINED")
NONE = "-"


def age(seconds: int | None) -> str:
    """kubectl's AGE: 45s, 12m, 3h20m, 4d."""
    if seconds is None or seconds < 0:
        return NONE
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        h, m = divmod(seconds // 60, 60)
        return f"{h}h{m}m" if m else f"{h}h"
    return f"{seconds // 86400}d"


def _num(value: Any, pct: bool = False) -> str:
    if value is None:
        return NONE
    return f"{value:.0%}" if pct else f"{value:g}"


def _gpu_memory(gpus: list[dict[str, Any]]) -> str:
    used = [g["memory_used_mib"] for g in gpus]
    total = [g["memory_total_mib"] for g in gpus]
    if not gpus or None in used or None in total:
        return NONE
    return f"{sum(used) / 1024:.0f}/{sum(total) / 1024:.0f}G"


def _gpu_util(gpus: list[dict[str, Any]]) -> str:
    utils = [g["util_pct"] for g in gpus if g["util_pct"] is not None]
    if not utils:
        return NONE
    return f"{len(gpus)}x {sum(utils) / len(utils):.0f}%"


def _gateways(places: dict[str, str]) -> str:
    if not places:
        return NONE
    if set(places.values()) == {"in"}:
        return "in"
    return ",".join(f"{gw}:{place}" for gw, place in sorted(places.items()))


def _model(h: HostStatus) -> str:
    name = h.model or NONE
    if h.served and h.served != [h.model]:
        return f"{name} (serves {','.join(h.served)})"
    return name


def host_cells(h: HostStatus) -> list[str]:
    """One row of the hosts' table, in HOST_COLUMNS' order."""
    if h.error:
        return [h.name, "no answer"] + [NONE] * (len(HOST_COLUMNS) - 2)
    u = h.unit
    unit = NONE if u is None else ("not-found" if u.load == "not-found" else "/".join(filter(None, (u.active, u.sub))))
    since = age(u.now - u.since) if u and u.now is not None and u.since is not None else NONE
    starts = NONE if h.starts_1h is None else f"{h.starts_1h}" + (f" ({h.exits_1h} exits)" if h.exits_1h else "")
    s = h.server
    return [
        h.name,
        unit,
        since,
        starts,
        h.vllm_version or NONE,
        posixpath.basename(h.venv.rstrip("/")) if h.venv else NONE,
        _model(h),
        h.weights or NONE,
        _gateways(h.gateways),
        _num(s.get("running")),
        _num(s.get("waiting")),
        _num(s.get("kv_cache_usage"), pct=True),
        _num(s.get("preemptions")),
        _gpu_memory(h.gpus),
        _gpu_util(h.gpus),
        h.drift.label if h.drift else NONE,
        h.verdict.kind,
    ]


def gateway_cells(g: GatewayStatus) -> list[str]:
    if g.error:
        return [g.name, "no answer", NONE, NONE, NONE]
    return [g.name, g.nginx or NONE, str(len(g.up)), ",".join(g.down) or NONE, ",".join(g.drained) or NONE]


def _table(columns: tuple[str, ...], rows: list[list[str]]) -> Table:
    t = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c in columns:
        t.add_column(c, no_wrap=True, overflow="ellipsis")
    for r in rows:
        t.add_row(*(Text(c) for c in r))  # Text: a value is never read as rich markup
    return t


def screen(rnd: Round) -> Group:
    """The whole screen of one round."""
    parts: list[Any] = [_table(HOST_COLUMNS, [host_cells(h) for h in rnd.hosts])]
    if rnd.gateways:
        parts += [Text(""), _table(GATEWAY_COLUMNS, [gateway_cells(g) for g in rnd.gateways])]
    notes = [f"{r.name}: no answer: {r.error}" for r in [*rnd.hosts, *rnd.gateways] if r.error]
    notes += [
        f"{h.name}: {h.verdict.line()}" for h in rnd.hosts if not h.error and h.verdict.kind not in (HEALTHY, IDLE)
    ]
    if notes:
        parts += [Text("")] + [Text(n) for n in notes]
    return Group(*parts)
