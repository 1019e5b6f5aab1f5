"""restart, upgrade, drain and undrain: maintenance that drops no request. The roles that do it
(rollout, gateway, install) are imported when a task runs, not for every command's menu."""

from __future__ import annotations

from typing import TYPE_CHECKING

from invoke import task

from vfleet.cli.common import backends, cli_errors, finish, helptext, load, make_play, select
from vfleet.cli.options import TaskOptions
from vfleet.config.fleet import Fleet
from vfleet.config.variables import GATEWAY_GROUP, VLLM_GROUP
from vfleet.engine.errors import VfleetError
from vfleet.engine.lock import locked
from vfleet.engine.runner import HostContext, Play

if TYPE_CHECKING:
    from vfleet.roles.rollout import Rollout

ROLL = ("inventory", "limit", "set", "report", "no_host_key_checking", "connect_timeout", "command_timeout", "verbose")
ROLL_HELP = dict(
    batch="Hosts per batch: a count (1), a percentage (25%) or a list (1,25%,100%; the last repeats)",
    max_fail_percentage="Stop before the next batch when more than this % of a batch failed (default 0)",
    drain_timeout="Seconds to wait for a drained host's in-flight requests (default 180)",
)
GATE_HELP = (
    "Eval gate file (YAML: evalset, max_score_drop, max_divergence, seed, max_tokens, concurrency, "
    "baseline): the first batch is a canary, evaluated before and after its restart; one that "
    "regressed is rolled back and the other batches do not start (docs/rollouts.md)"
)


def _rollout_play(name: str, opts: TaskOptions) -> tuple[Fleet, Play, list[str], list[str]]:
    fleet = load(opts)
    selected = select(fleet, opts.limit)
    vllm = [h.name for h in selected if VLLM_GROUP in h.groups]
    gws = fleet.gateways
    if not vllm:
        raise VfleetError(
            f"no host of group '{VLLM_GROUP}' selected in {fleet.inventory.path}"
            + (f" by --limit {opts.limit}" if opts.limit else "")
        )
    # every vLLM host is in the play (drained ones may need undraining) but only the
    # selected ones are restarted
    chosen = set(vllm)  # a set: a list here made a rollout over 100,000 hosts quadratic
    others = [h for h in fleet.vllm_hosts if h.name not in chosen]
    hosts = [h for h in selected if VLLM_GROUP in h.groups] + others + [g for g in gws if g.name not in chosen]
    play = make_play(name, fleet, hosts, opts)
    return fleet, play, vllm, [g.name for g in gws]


def _rollout(fleet: Fleet, play: Play, vllm: list[str], gws: list[str], **kw) -> Rollout:
    """The rollout over these hosts; with multi-host replicas, over units (a replica counts once
    and restarts as a whole: vfleet/roles/replica/_rollout.py)."""
    from vfleet.roles.replica import ReplicaRollout, unit_keys
    from vfleet.roles.rollout import Rollout

    if not fleet.replicas:  # a replica restarts as a unit of hosts: its cache is not shared (docs/compile-cache.md)
        from vfleet.roles.compile_cache import sharing

        return Rollout(play, backends(fleet), vllm, gws, cache=sharing(play, vllm), **kw)
    return ReplicaRollout(play, backends(fleet), unit_keys(vllm, fleet.replicas), gws, fleet=fleet, **kw)


@task(help=helptext(*ROLL, **ROLL_HELP), iterable=["set_"])
@cli_errors
def restart(
    c,
    inventory=None,
    limit=None,
    set_=None,
    report=None,
    no_host_key_checking=False,
    connect_timeout=None,
    command_timeout=None,
    verbose=False,
    batch="1",
    max_fail_percentage=0,
    drain_timeout=180,
):
    """Rolling restart of the vLLM hosts: drain, wait in-flight, restart, wait ready, undrain."""
    opts = TaskOptions.of(locals())
    fleet, play, vllm, gws = _rollout_play("restart", opts)
    with locked(play):  # a second controller would interleave its drains and restarts with ours
        r = _rollout(fleet, play, vllm, gws, upgrade=False, drain_timeout=float(drain_timeout))
        summary = r.run(str(batch), float(max_fail_percentage))
        play.note(summary)
    finish(play, opts, last_lines=summary.closing_lines)


@task(help=helptext(*ROLL, "forks", gate=GATE_HELP, **ROLL_HELP), iterable=["set_"])
@cli_errors
def upgrade(
    c,
    inventory=None,
    limit=None,
    set_=None,
    report=None,
    no_host_key_checking=False,
    connect_timeout=None,
    command_timeout=None,
    verbose=False,
    forks=10,
    batch="1",
    max_fail_percentage=0,
    drain_timeout=180,
    gate=None,
):
    """Rolling upgrade to the vllm_version in the inventory (or --set): install first, then roll."""
    from vfleet.roles.install import venv as vllm_install
    from vfleet.roles.rollout import gate_lines, open_gate

    opts = TaskOptions.of(locals())
    fleet, play, vllm, gws = _rollout_play("upgrade", opts)
    judge = open_gate(gate, fleet, vllm, task="upgrade", report=opts.report) if gate else None
    with locked(play):  # taken before the install: nothing changes on a fleet another run holds
        play.run_step(
            "install (hosts keep serving)", lambda ctx: vllm_install.install_venv(ctx, switch=False), hosts=vllm
        )
        active = set(play.active)
        r = _rollout(
            fleet,
            play,
            [h for h in vllm if h in active],
            gws,
            upgrade=True,
            drain_timeout=float(drain_timeout),
            gate=judge,
        )
        summary = r.run(str(batch), float(max_fail_percentage))
        play.note(summary)
    finish(play, opts, last_lines=[*summary.closing_lines, *gate_lines(play)])


def _drain_task(name: str, host: str, opts: TaskOptions, drained: bool) -> None:
    from vfleet.roles.gateway import nginx as gateway

    fleet = load(opts)
    inv = fleet.inventory
    if host not in inv.hosts or VLLM_GROUP not in inv.hosts[host].groups:
        raise VfleetError(f"--host {host}: not a host of group '{VLLM_GROUP}' in {inv.path}")
    gws = fleet.gateways
    if not gws:
        raise VfleetError(f"no host in group '{GATEWAY_GROUP}' in {inv.path}: nothing to drain from")
    play = make_play(name, fleet, gws, opts)
    bs = backends(fleet)
    model = next((b.model for b in bs if b.name == host), None)
    if model is None:  # a multi-host replica's worker: the gateways route to its head only
        raise VfleetError(
            f"--host {host}: not behind the gateways (a replica's worker in {inv.path}); drain the replica's head"
        )
    peers = {b.name for b in bs if b.model == model}  # the last healthy host is judged per model

    def step(ctx: HostContext) -> None:
        current = gateway.read_drained(ctx)
        wanted = (current | {host}) if drained else (current - {host})
        if drained and not (peers - wanted):
            from vfleet.engine.runner import HostFailed

            raise HostFailed(f"draining {host} would leave no host of model {model!r} behind {ctx.name}")
        gateway.set_drained(ctx, bs, wanted)

    with locked(play):  # not in the middle of another controller's rolling restart
        play.run_step(f"{name} {host}", step)
    finish(play, opts)


@task(
    help=helptext("inventory", "set", "report", "no_host_key_checking", host="The vLLM host to take out"),
    iterable=["set_"],
)
@cli_errors
def drain(c, host, inventory=None, set_=None, report=None, no_host_key_checking=False):
    """Take one vLLM host out of every gateway for maintenance by hand (refuses the last one)."""
    _drain_task("drain", host, TaskOptions.of(locals()), True)


@task(
    help=helptext("inventory", "set", "report", "no_host_key_checking", host="The vLLM host to put back"),
    iterable=["set_"],
)
@cli_errors
def undrain(c, host, inventory=None, set_=None, report=None, no_host_key_checking=False):
    """Put a drained vLLM host back into every gateway."""
    _drain_task("undrain", host, TaskOptions.of(locals()), False)
