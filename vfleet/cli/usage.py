"""`vfleet usage`: who used the gateways, and how it went. Reads each gateway's JSON access log
(the current file and the rotated copies that reach into the window) over SSH, all gateways in
one play, and summarises it per (tenant, model): requests, errors by kind, p50/p95 request
time and time to first byte (vfleet/roles/usage/, imported when it runs). `--json OUT` writes
the same rows atomically for a script or a ticket."""

from __future__ import annotations

import io
import time

from invoke import task
from rich.console import Console

from vfleet.cli.common import cli_errors, helptext, load, make_play, select
from vfleet.cli.options import TaskOptions
from vfleet.config.access_log import ACCESS_LOG
from vfleet.config.variables import GATEWAY_GROUP
from vfleet.engine.errors import VfleetError
from vfleet.engine.report import write_json_atomic


@task(
    help=helptext(
        "inventory",
        "limit",
        "set",
        "forks",
        "no_host_key_checking",
        "connect_timeout",
        "command_timeout",
        since="Start of the window: a duration back from --until (10m, 2h, 1d; default 1h) or an "
        "ISO time (2026-12-02T20:00:00+00:00; UTC when no offset is given)",
        until="End of the window, an ISO time (default: now)",
        json="Also write the summary as JSON to this path (atomically)",
    ),
    iterable=["set_"],
)
@cli_errors
def usage(
    c,
    inventory=None,
    limit=None,
    set_=None,
    since=None,
    until=None,
    json=None,
    forks=10,
    no_host_key_checking=False,
    connect_timeout=None,
    command_timeout=None,
):
    """Requests, errors and latency per tenant and model, from the gateways' access logs."""
    from vfleet.roles.usage import notes, read_logs, summarise, usage_table, window

    opts = TaskOptions.of(locals())
    win = window(since, until, time.time())
    fleet = load(opts)
    gateways = [h.name for h in select(fleet, opts.limit, GATEWAY_GROUP)]
    if not gateways:
        raise VfleetError(
            f"{fleet.inventory.path}: no host of group '{GATEWAY_GROUP}'"
            + (f" matches --limit {opts.limit}" if opts.limit else "")
            + ": no access log to read"
        )
    play = make_play(
        "usage", fleet, [fleet.inventory.hosts[n] for n in gateways], opts, console=Console(file=io.StringIO())
    )
    try:
        read = read_logs(play, gateways, win)
    finally:
        play.finish()
    unread = [f"{n}: {play.results[n].steps[-1].message}" for n in gateways if n not in read and play.results[n].steps]
    if unread or len(read) < len(gateways):
        raise VfleetError("; ".join(unread) or f"could not read {ACCESS_LOG} on every gateway")
    summary = summarise((line for n in gateways for line in read[n].lines), win.since, win.until)
    truncated = [n for n in gateways if read[n].truncated]
    data = {
        "window": win.to_dict(),
        "gateways": gateways,
        "rows": summary.rows,
        "skipped": summary.skipped,
        "truncated": truncated,
    }
    console = Console(highlight=False, emoji=False)
    title = f"{data['window']['since']} .. {data['window']['until']}, gateways: {', '.join(gateways)}"
    console.print(usage_table(summary.rows, title))
    for line in notes(summary.skipped, truncated):
        console.print(line, markup=False)
    if json:
        write_json_atomic(json, data)
        console.print(f"summary written to {json}", markup=False)
