"""`vfleet status`: one screen for the fleet (vfleet/roles/status/, imported when it runs): per
vLLM host its unit, versions, model, place on each gateway, the server's numbers, GPUs,
starts in the last hour, drift from the inventory and the bottleneck verdict; per gateway
nginx and its backends. One round trip per host, all hosts at once; `--watch N` redraws every
N seconds until Ctrl-C."""

from __future__ import annotations

import io
import signal
import sys
import threading
import time

from invoke import task
from invoke.exceptions import Exit
from rich.console import Console

from vfleet.cli.common import cli_errors, helptext, load, make_play, select
from vfleet.cli.options import TaskOptions
from vfleet.config.variables import GATEWAY_GROUP, VLLM_GROUP
from vfleet.engine.errors import VfleetError
from vfleet.engine.report import write_json_atomic

STATUS_FORKS = 64  # hosts asked at once: a round is one short script per host, mostly waiting on the network


def _seconds(value: object) -> float | None:
    if value in (None, ""):
        return None
    try:
        seconds = float(str(value))
    except ValueError:
        raise VfleetError(f"--watch: {value!r} is not a number of seconds (e.g. --watch 5)") from None
    if not seconds >= 1:
        raise VfleetError(f"--watch: {value!r}: give at least 1 second between rounds")
    return seconds


@task(
    help=helptext(
        "inventory",
        "limit",
        "set",
        "report",
        "no_host_key_checking",
        "connect_timeout",
        forks=f"How many hosts are asked at once (default {STATUS_FORKS})",
        watch="Redraw every SECONDS until Ctrl-C (the report, if asked, is rewritten each round)",
    ),
    iterable=["set_"],
)
@cli_errors
def status(
    c,
    inventory=None,
    limit=None,
    set_=None,
    report=None,
    forks=STATUS_FORKS,
    watch=None,
    no_host_key_checking=False,
    connect_timeout=None,
):
    """Show every host's unit, versions, load, GPUs, drift and bottleneck verdict."""
    from vfleet.roles.model_source import never_download
    from vfleet.roles.status import Watch, run_round, screen

    never_download()  # the wanted unit reads hub adapters' ranks: from the cache, never a download
    opts = TaskOptions.of(locals())
    every = _seconds(watch)
    fleet = load(opts)
    hosts = [h for h in select(fleet, opts.limit) if VLLM_GROUP in h.groups or GATEWAY_GROUP in h.groups]
    if not hosts:
        raise VfleetError(
            f"{fleet.inventory.path}: no host of group '{VLLM_GROUP}' or '{GATEWAY_GROUP}'"
            + (f" matches --limit {opts.limit}" if opts.limit else "")
        )
    configs = fleet.configs_of(hosts)
    backends = [(c.name, c.base_url) for c in fleet.configs_of(fleet.serving_hosts)]
    # a pipe or a file gets whole rows (kubectl's way), a terminal its own width
    console, state = Console(highlight=False, width=None if sys.stdout.isatty() else 400), Watch()

    def one_round():
        play = make_play("status", fleet, hosts, opts, console=Console(file=io.StringIO()))
        try:
            rnd = run_round(play, configs, backends, state)
        finally:
            play.finish()
        if opts.report:
            write_json_atomic(opts.report, rnd.to_dict())
        return rnd

    if every is None:
        rnd = one_round()
        console.print(screen(rnd))
        if rnd.unanswered:
            raise Exit(code=1)
        return
    from rich.live import Live

    # Ctrl-C is how --watch ends (exit 0). It sets `stop` as well as raising KeyboardInterrupt:
    # twice, in fresh-clone `make test` runs (never in 37 tries by hand), --watch went on with
    # round after round for 30 s after one Ctrl-C: the interrupt was swallowed inside a round
    # (where, not found; tests/unit/test_status.py dumped only the main thread, in the sleep).
    # The loop's own flag ends it after that round whatever code caught the exception.
    stop = threading.Event()

    def interrupted(signum: int, frame: object) -> None:
        stop.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        with Live(console=console, auto_refresh=False) as live:
            while not stop.is_set():
                started = time.monotonic()
                live.update(screen(one_round()), refresh=True)
                stop.wait(max(0.0, every - (time.monotonic() - started)))
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
