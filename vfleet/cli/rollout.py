"""restart, upgrade, drain and undrain: maintenance that drops no request. The roles that do it
(rollout, gateway, install) are imported when a task runs, not for every command's menu."""
from __future__ import annotations

from typing import TYPE_CHECKING

from invoke import task

from vfleet.engine.errors import VfleetError
from vfleet.engine.lock import locked
from vfleet.engine.runner import HostContext
from vfleet.config.replicas import find_replicas
from vfleet.config.variables import GATEWAY_GROUP, VLLM_GROUP
from vfleet.cli.common import backends, cli_errors, finish, gateway_names, helptext, load, make_play, select

if TYPE_CHECKING:
    from vfleet.roles.rollout.rolling import Rollout

ROLL = ("inventory", "limit", "set", "report", "no_host_key_checking", "connect_timeout", "command_timeout",
        "verbose")
ROLL_HELP = dict(
    batch="Hosts per batch: a count (1), a percentage (25%) or a list (1,25%,100%; the last repeats)",
    max_fail_percentage="Stop before the next batch when more than this % of a batch failed (default 0)",
    drain_timeout="Seconds to wait for a drained host's in-flight requests (default 180)",
)


def _rollout_play(name, inventory, limit, set_, forks=10, **kw):
    inv = load(inventory, set_)
    selected = select(inv, limit)
    vllm = [h.name for h in selected if VLLM_GROUP in h.groups]
    gws = [h for h in inv.hosts.values() if GATEWAY_GROUP in h.groups]
    if not vllm:
        raise VfleetError(f"no host of group '{VLLM_GROUP}' selected in {inv.path}"
                          + (f" by --limit {limit}" if limit else ""))
    # every vLLM host is in the play (drained ones may need undraining) but only the
    # selected ones are restarted
    others = [h for h in inv.hosts.values() if VLLM_GROUP in h.groups and h.name not in vllm]
    hosts = [h for h in selected if VLLM_GROUP in h.groups] + others + [g for g in gws if g.name not in vllm]
    play = make_play(name, hosts, forks=forks, **kw)
    return inv, play, vllm, [g.name for g in gws]


def _rollout(inv, play, vllm: list[str], gws: list[str], **kw) -> Rollout:
    """The rollout over these hosts; with multi-host replicas, over units (a replica counts once
    and restarts as a whole: vfleet/roles/replica/rollout.py)."""
    from vfleet.roles.replica.rollout import ReplicaRollout, unit_keys
    from vfleet.roles.rollout.rolling import Rollout

    replicas = find_replicas(inv)
    if not replicas:
        return Rollout(play, backends(inv), vllm, gws, **kw)
    return ReplicaRollout(play, backends(inv), unit_keys(vllm, replicas), gws, inventory=inv, **kw)


@task(help=helptext(*ROLL, **ROLL_HELP), iterable=["set_"])
@cli_errors
def restart(c, inventory=None, limit=None, set_=None, report=None, no_host_key_checking=False, connect_timeout=None,
            command_timeout=None, verbose=False, batch="1", max_fail_percentage=0, drain_timeout=180):
    """Rolling restart of the vLLM hosts: drain, wait in-flight, restart, wait ready, undrain."""
    inv, play, vllm, gws = _rollout_play("restart", inventory, limit, set_, no_host_key_checking=no_host_key_checking,
                                         connect_timeout=connect_timeout, command_timeout=command_timeout,
                                         verbose=verbose)
    with locked(play):  # a second controller would interleave its drains and restarts with ours
        r = _rollout(inv, play, vllm, gws, upgrade=False, drain_timeout=float(drain_timeout))
        play.data["rollout"] = r.run(str(batch), float(max_fail_percentage))
    finish(play, report)


@task(help=helptext(*ROLL, "forks", **ROLL_HELP), iterable=["set_"])
@cli_errors
def upgrade(c, inventory=None, limit=None, set_=None, report=None, no_host_key_checking=False, connect_timeout=None,
            command_timeout=None, verbose=False, forks=10, batch="1", max_fail_percentage=0, drain_timeout=180):
    """Rolling upgrade to the vllm_version in the inventory (or --set): install first, then roll."""
    from vfleet.roles.install import venv as vllm_install

    inv, play, vllm, gws = _rollout_play("upgrade", inventory, limit, set_, forks=forks,
                                         no_host_key_checking=no_host_key_checking, connect_timeout=connect_timeout,
                                         command_timeout=command_timeout, verbose=verbose)
    with locked(play):  # taken before the install: nothing changes on a fleet another run holds
        play.run_step("install (hosts keep serving)", lambda ctx: vllm_install.install_venv(ctx, switch=False),
                      hosts=vllm)
        r = _rollout(inv, play, [h for h in vllm if h in play.active], gws, upgrade=True,
                     drain_timeout=float(drain_timeout))
        play.data["rollout"] = r.run(str(batch), float(max_fail_percentage))
    finish(play, report)


def _drain_task(name: str, host: str, inventory, set_, report, no_host_key_checking, drained: bool) -> None:
    from vfleet.roles.gateway import nginx as gateway

    inv = load(inventory, set_)
    if host not in inv.hosts or VLLM_GROUP not in inv.hosts[host].groups:
        raise VfleetError(f"--host {host}: not a host of group '{VLLM_GROUP}' in {inv.path}")
    gws = [inv.hosts[n] for n in gateway_names(list(inv.hosts.values()))]
    if not gws:
        raise VfleetError(f"no host in group '{GATEWAY_GROUP}' in {inv.path}: nothing to drain from")
    play = make_play(name, gws, no_host_key_checking=no_host_key_checking)
    bs = backends(inv)
    model = next(b.model for b in bs if b.name == host)
    peers = {b.name for b in bs if b.model == model}   # the last healthy host is judged per model

    def step(ctx: HostContext) -> None:
        current = gateway.read_drained(ctx)
        wanted = (current | {host}) if drained else (current - {host})
        if drained and not (peers - wanted):
            from vfleet.engine.runner import HostFailed

            raise HostFailed(f"draining {host} would leave no host of model {model!r} behind {ctx.name}")
        gateway.set_drained(ctx, bs, wanted)

    with locked(play):  # not in the middle of another controller's rolling restart
        play.run_step(f"{name} {host}", step)
    finish(play, report)


@task(help=helptext("inventory", "set", "report", "no_host_key_checking", host="The vLLM host to take out"),
      iterable=["set_"])
@cli_errors
def drain(c, host, inventory=None, set_=None, report=None, no_host_key_checking=False):
    """Take one vLLM host out of every gateway for maintenance by hand (refuses the last one)."""
    _drain_task("drain", host, inventory, set_, report, no_host_key_checking, True)


@task(help=helptext("inventory", "set", "report", "no_host_key_checking", host="The vLLM host to put back"),
      iterable=["set_"])
@cli_errors
def undrain(c, host, inventory=None, set_=None, report=None, no_host_key_checking=False):
    """Put a drained vLLM host back into every gateway."""
    _drain_task("undrain", host, inventory, set_, report, no_host_key_checking, False)
