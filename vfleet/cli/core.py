"""Tasks that only need the engine: inspect an inventory, run an ad-hoc command."""

from __future__ import annotations

import json

from invoke import task

from vfleet.cli.common import cli_errors, finish, helptext, load, make_play, select
from vfleet.cli.options import TaskOptions
from vfleet.engine.inventory import masked_vars
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed


@task(
    help=helptext(
        "inventory",
        "set",
        "limit",
        host="Show only this host's merged variables",
        graph="Print the group tree instead of JSON (like ansible-inventory --graph)",
    ),
    iterable=["set_"],
)
@cli_errors
def inventory(c, inventory=None, host=None, graph=False, limit=None, set_=None):
    """Print resolved hosts, groups and merged variables as JSON (secrets masked).

    Exit 2 with every error when the inventory is invalid."""
    inv = load(TaskOptions.of(locals())).inventory
    if graph:
        print(inv.graph())
        return
    if host:
        if host not in inv.hosts:
            from vfleet.engine.errors import VfleetError

            raise VfleetError(f"host '{host}' is not in {inv.path}; known hosts: {', '.join(inv.hosts)}")
        print(json.dumps(masked_vars(inv.hosts[host].vars, schema=inv.schema), indent=2, default=str))
        return
    data = inv.to_list_json()
    if limit:
        names = {h.name for h in inv.select(limit)}
        data["_meta"]["hostvars"] = {k: v for k, v in data["_meta"]["hostvars"].items() if k in names}
    print(json.dumps(data, indent=2, default=str))


@task(
    help=helptext(
        "inventory",
        "limit",
        "set",
        "forks",
        "report",
        "no_host_key_checking",
        "connect_timeout",
        "command_timeout",
        command="The shell command to run on every selected host",
        quiet="Do not print each host's output",
    ),
    iterable=["set_"],
)
@cli_errors
def run(
    c,
    command,
    inventory=None,
    limit=None,
    set_=None,
    forks=10,
    report=None,
    no_host_key_checking=False,
    connect_timeout=None,
    command_timeout=None,
    quiet=False,
):
    """Run one shell command on every selected host in parallel (like `ansible all -a CMD`)."""
    opts = TaskOptions.of(locals())
    fleet = load(opts)
    play = make_play("run", fleet, select(fleet, opts.limit), opts)

    def step(ctx: HostContext) -> None:
        r = ctx.run(command)
        data = {"rc": r.exited, "stdout": r.stdout, "stderr": r.stderr}
        if r.timed_out:
            raise HostFailed(f"timed out after {ctx.settings().command_timeout:g}s", data)
        if not r.ok:
            raise HostFailed(f"exit {r.exited}: {r.tail()}", data)
        ctx.record("command", command, Status.CHANGED, data=data)
        if not quiet:
            play.print(f"[{ctx.name}] {r.stdout.rstrip()}", markup=False, soft_wrap=True)

    play.run_step("command", step)
    finish(play, opts)
