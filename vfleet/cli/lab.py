"""`invoke lab.up|down|status`: the local fleet of systemd-nspawn hosts (logic in vfleet/lab/)."""

from __future__ import annotations

from invoke import Collection, Exit, task

from vfleet.engine.errors import VfleetError


def _operator_errors(fn):
    """Turn VfleetError into Invoke's Exit: one line for the operator, exit code 2."""

    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except VfleetError as exc:
            raise Exit(f"error: {exc}", code=2) from None

    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


@task(
    help={
        "hosts": "number of hosts, named <prefix>1..<prefix>N (default 2)",
        "gpu_profile": "GPU profile for every host: a name under vfleet/lab/profiles "
        "(h200-1, v100-8-pcie, a100-8-sxm, no-gpu, broken-driver) or a directory; "
        "default: keep each running host's profile, h200-1 for new hosts",
        "profiles": "per-host profiles, e.g. lab1=v100-8-pcie,lab2=a100-8-sxm (wins over --gpu-profile)",
        "prefix": "host name prefix (default lab)",
        "gateways": "how many of the last hosts form the `gateways` group; -1 = 1 when N >= 2 else 0",
        "timeout": "seconds to wait for each host to reach running/degraded (default 180)",
        "backing": "where host writes go: tmpfs (RAM, default) or disk (state dir, for big installs)",
    }
)
def up(c, hosts=2, gpu_profile="", profiles="", prefix="lab", gateways=-1, timeout=180, backing="tmpfs"):
    """Start lab hosts (idempotent), wait for SSH + systemd, write the inventory."""
    from vfleet.lab import api

    _operator_errors(api.up)(
        int(hosts),
        gpu_profile=gpu_profile or None,
        profiles_by_host=_operator_errors(api.parse_profiles)(profiles),
        prefix=prefix,
        gateways=None if int(gateways) < 0 else int(gateways),
        timeout=float(timeout),
        backing=backing,
    )


@task
def down(c):
    """Stop and remove every lab host, mount, namespace, veth and the bridge (keeps the key)."""
    from vfleet.lab import api

    left = _operator_errors(api.down)()
    if left:
        raise Exit(f"error: lab: residue left after down: {left}; fix: see vfleet/lab/README.md", code=1)


@task
def status(c):
    """Show each lab host: address, systemd state, nspawn PID, GPU profile."""
    from vfleet.lab import api

    print(api.format_status(api.status(), api.residue()))


lab = Collection("lab")
lab.add_task(up)
lab.add_task(down)
lab.add_task(status)
