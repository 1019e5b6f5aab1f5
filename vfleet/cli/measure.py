"""The `measured` record of a bench result or an eval report, read live from the vLLM hosts
behind the target (vfleet/roles/status/_measured.py: one SSH round trip a host), so that
bench.compare and eval.compare can say which setup field changed between two runs."""

from __future__ import annotations

from vfleet.cli.common import make_play
from vfleet.cli.options import TaskOptions
from vfleet.config.fleet import Fleet


def host_records(fleet: Fleet, opts: TaskOptions, names: list[str], task_name: str = "bench") -> dict[str, dict]:
    """Each host's measured record, all hosts in one play (one SSH round trip each, in
    parallel). A host that could not be read is left out, with one line saying why."""
    import io

    from rich.console import Console

    from vfleet.roles.status import measured_records

    play = make_play(
        task_name, fleet, [fleet.inventory.hosts[n] for n in names], opts, console=Console(file=io.StringIO())
    )
    try:
        records = measured_records(play, names)
    finally:
        play.finish()
    for n in names:
        if n not in records and play.results[n].steps:
            print(f"warning: {n}: no measured record ({play.results[n].steps[-1].message})")
    return records


def measured_record(
    fleet: Fleet, opts: TaskOptions, names: list[str], *, one_host: bool, task_name: str = "bench"
) -> dict:
    """The measured record of the hosts behind the target: that host's record for --host, the
    hosts' shared fields plus each host's own record through a gateway."""
    from vfleet.roles.status import common_record

    records = host_records(fleet, opts, names, task_name)
    if one_host:
        return records.get(names[0], {})
    return common_record(records)
