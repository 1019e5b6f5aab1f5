"""What every task shares: the common flags, loading the inventory, opening a Play, and ending
with the recap, the JSON report and the exit code. Operator mistakes (VfleetError) end as
one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

from invoke.exceptions import Exit
from rich.console import Console

from vfleet.cli.options import TaskOptions
from vfleet.config.fleet import Fleet
from vfleet.config.variables import GATEWAY_GROUP, SCHEMA, VLLM_GROUP
from vfleet.engine.errors import InventoryError, VfleetError
from vfleet.engine.inventory import Host, load_inventory, parse_set_args
from vfleet.engine.inventory.masking import remember_secrets
from vfleet.engine.report import print_recap, report_dict, write_json_atomic
from vfleet.engine.runner import Play, PlayAborted, RunOptions

if TYPE_CHECKING:
    from vfleet.roles.gateway import Backend

COMMON_HELP: dict[str, str] = {
    "inventory": "Inventory file (Ansible YAML format); default $VFLEET_INVENTORY",
    "limit": "Hosts to act on: names, groups, globs, '!excluded', '&intersect' (Ansible --limit syntax)",
    "set": "Override a variable for every host, highest precedence: --set key=value (repeatable)",
    "forks": "How many hosts are worked on at once (default 10)",
    "report": "Also write the run's results as JSON to this path",
    "check": "Change nothing; report what would change",
    "diff": "Show unified diffs of text files that would change (or did)",
    "no_host_key_checking": "Accept unknown SSH host keys (explicit opt-out; default: reject them)",
    "connect_timeout": "Seconds to wait for an SSH connection (default: connect_timeout var or 10)",
    "command_timeout": "Seconds a single remote command may run (default: command_timeout var or 600)",
    "verbose": "Also print operations that were already ok",
}


def helptext(*names: str, **extra: str) -> dict[str, str]:
    """help= dict for a task: the common flags it takes plus its own."""
    d = {("set_" if n == "set" else n): COMMON_HELP[n] for n in names}
    d.update(extra)
    return d


def cli_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn operator errors into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InventoryError as exc:
            for line in exc.errors:
                print(f"error: {line}", file=sys.stderr)
            raise Exit(code=2) from None
        except PlayAborted as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise Exit(code=1) from None
        except VfleetError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise Exit(code=2) from None
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            raise Exit(code=130) from None

    return wrapper


def resolve_inventory_path(inventory: str | None) -> str:
    path = inventory or os.environ.get("VFLEET_INVENTORY")
    if not path:
        raise VfleetError("no inventory given: pass --inventory PATH or set VFLEET_INVENTORY")
    return path


def load(opts: TaskOptions) -> Fleet:
    """The inventory, checked against vfleet's variables (its warnings go to stderr), as the
    run's one fleet model: a multi-host replica is checked here, before anything connects."""
    inv = load_inventory(resolve_inventory_path(opts.inventory), parse_set_args(list(opts.set_)), schema=SCHEMA)
    remember_secrets((h.vars for h in inv.hosts.values()), schema=SCHEMA)  # hidden in all output
    for line in inv.warnings:
        print(f"warning: {line}", file=sys.stderr)
    fleet = Fleet.of(inv)
    for line in fleet.warnings:
        print(f"warning: {line}", file=sys.stderr)
    return fleet


def select(fleet: Fleet, limit: str | None, group: str | None = None) -> list[Host]:
    hosts = fleet.inventory.select(limit)
    if group is not None:
        hosts = [h for h in hosts if group in h.groups]
    return hosts


def in_group(group: str, hosts: list[Host]) -> list[str]:
    return [h.name for h in hosts if group in h.groups]


def vllm_names(hosts: list[Host]) -> list[str]:
    return in_group(VLLM_GROUP, hosts)


def gateway_names(hosts: list[Host]) -> list[str]:
    return in_group(GATEWAY_GROUP, hosts)


def backends(fleet: Fleet, max_concurrency: dict[str, float | None] | None = None) -> list[Backend]:
    """Every vLLM host of the inventory that serves (single hosts, replica heads), as the gateways route to it (--limit or not);
    `max_concurrency`: the planner's per host, where preflight ran."""
    from vfleet.roles.gateway import Backend  # here, not above: it loads jinja2, which `run` never needs

    plans = max_concurrency or {}
    return [Backend.of(fleet.config(h), plans.get(h.name)) for h in fleet.serving_hosts]


def make_play(task: str, fleet: Fleet, hosts: list[Host], opts: TaskOptions, console: Console | None = None) -> Play:
    """The one way every task builds its Play: each host's context gets its config from the
    run's fleet model (built once there, not per play). `console`: where the play prints its
    banners and per-host lines (`status` draws its own screen and keeps them out of it)."""
    if opts.forks < 1:
        raise VfleetError(f"--forks must be at least 1, got {opts.forks}")
    options = RunOptions(
        forks=opts.forks,
        check=opts.check,
        diff=opts.diff,
        connect_timeout=opts.connect_timeout,
        command_timeout=opts.command_timeout,
        host_key_checking=False if opts.no_host_key_checking else None,
        verbose=opts.verbose,
    )
    # emoji=False: hosts' output is printed as they wrote it (":ok:" stays ":ok:", not an emoji),
    # and rich's 13 ms emoji table is not loaded at the first print.
    console = console or Console(highlight=False, emoji=False)
    return Play(task, hosts, options, console=console, configure=fleet.config)


def finish(play: Play, opts: TaskOptions, *, last_lines: Sequence[str] = ()) -> dict[str, Any]:
    """Close connections, print the recap, write the report (--report), then `last_lines`
    (a rollout ends saying, per host, why), and exit non-zero if a host failed."""
    play.finish()
    print_recap(play)
    data = report_dict(play)
    if opts.report:
        write_json_atomic(opts.report, data)
        play.console.print(f"report written to {opts.report}", highlight=False)
    for line in last_lines:
        play.console.print(line, markup=False, highlight=False, soft_wrap=True)
    if play.exit_code:
        raise Exit(code=play.exit_code)
    return data
