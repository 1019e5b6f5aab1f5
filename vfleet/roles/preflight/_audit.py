"""Preflight over a Play: gather every host's facts in one SSH round trip (or read them from
a snapshot folder, no SSH), run the host checks and the fleet checks, record them in the
report, and print a table per host. Shared by `vfleet preflight` and `vfleet deploy`."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from rich.table import Table

from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import Inventory
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed, Play
from vfleet.engine.strict_json import JsonFileError
from vfleet.roles.preflight import _capacity as capacity
from vfleet.roles.preflight._adapter_facts import with_adapters
from vfleet.roles.preflight._capacity.record import CapacityRecord
from vfleet.roles.preflight._checks import host_checks
from vfleet.roles.preflight._facts import gather_script
from vfleet.roles.preflight._fleet_checks import fleet_checks
from vfleet.roles.preflight._gathered import parse_gathered, snapshot_from_gathered
from vfleet.roles.preflight._model_facts import with_model_source
from vfleet.roles.preflight._snapshot import facts_from_snapshot
from vfleet.roles.weights import controller_folder

q = shlex.quote
STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}


def gather(play: Play, hosts: list[str] | None = None, capture_dir: str | Path | None = None) -> dict[str, dict]:
    """Facts of every host, one round trip each. With capture_dir, also write the host's
    snapshot (GPU profile layout + facts.json) to capture_dir/<host>/."""

    def step(ctx: HostContext) -> dict[str, Any]:
        r = ctx.run("sh -s", stdin=gather_script(ctx.config), timeout=120)
        if r.timed_out:
            raise HostFailed("gathering facts timed out after 120s")
        if capture_dir is not None:
            facts = snapshot_from_gathered(Path(capture_dir) / ctx.name, r.stdout, ctx.config)
            ctx.record("capture", str(Path(capture_dir) / ctx.name), Status.CHANGED, "snapshot written")
        else:
            facts = parse_gathered(r.stdout, ctx.config)
        ctx.result.facts = facts
        ctx.record(
            "facts",
            "gather",
            Status.OK,
            f"{len(facts.get('gpus') or [])} GPUs, driver {facts.get('driver_version') or 'none'}",
        )
        return facts

    return play.run_step("preflight: gather facts", step, hosts=hosts)


def from_snapshots(play: Play, snapshot_dir: str | Path) -> dict[str, dict]:
    """Facts from snapshot_dir/<host>/ for the hosts that have one; others are skipped."""
    root = Path(snapshot_dir)
    if not root.is_dir():
        raise VfleetError(f"--snapshot {snapshot_dir}: no such folder; make one with `vfleet preflight.capture`")
    out: dict[str, dict] = {}
    listed = {p.name for p in root.iterdir() if p.is_dir()}  # never a path built from a host name
    for name in list(play.active):
        ctx = play.contexts[name]
        d = root / name
        if name not in listed:
            ctx.step_name = "preflight: snapshot"
            ctx.record("facts", str(d), Status.SKIPPED, "no snapshot for this host")
            play.active.remove(name)
            continue
        try:
            facts = facts_from_snapshot(d, ctx.config)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise VfleetError(
                f"--snapshot {d}: unreadable snapshot ({type(exc).__name__}: {exc}); "
                "capture it again with `vfleet preflight.capture`"
            ) from None
        ctx.result.facts = facts
        out[name] = facts
    return out


def bandwidth_checks(play: Play, facts: dict[str, dict]) -> dict[str, dict]:
    """The optional nccl_bandwidth check: an all-reduce on each host's tensor-parallel GPUs."""
    from vfleet.roles.preflight import _nccl as nccl_rules, _nccl_bandwidth as nb

    out: dict[str, dict] = {}

    def step(ctx: HostContext) -> None:
        f = facts.get(ctx.name) or {}
        if f.get("gpu_state") != "ok" or not f.get("gpus"):
            return
        gpus = [i for i in nccl_rules.tp_gpu_indices(ctx.config) if i < len(f["gpus"])]
        topo = f.get("topology") or {}
        python = f"{ctx.config.current_link}/bin/python"
        r = ctx.run(nb.probe_command(gpus, python, dict(topo.get("nccl_env") or {})), timeout=600)
        result = nb.parse_result(r.stdout)
        ccs = [g.get("compute_capability") for g in f["gpus"] if g.get("compute_capability")]
        check = nb.evaluate(
            result, topo.get("worst_tp_link"), min(ccs) if ccs else None, error="" if result else r.tail(3)
        )
        out[ctx.name] = {"check": check.to_dict(), "result": result}
        ctx.result.data["nccl_bandwidth"] = result

    play.run_step("preflight: nccl bandwidth", step, hosts=list(facts))
    return out


def audit(
    play: Play,
    inventory: Inventory,
    facts: dict[str, dict],
    *,
    strict: bool = False,
    fail_hosts: bool = True,
    extra_checks: dict[str, list[dict]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Run host + fleet checks, record them, print a table per host. A failed check (or a
    warning with strict) fails the host; returns {host: [check dicts]}."""
    # model checks before the weights are on the host: read the controller's copy
    seen = {
        h: with_adapters(with_model_source(f, controller_folder(play.contexts[h].config)), play.contexts[h].config)
        for h, f in facts.items()
    }
    groups = {
        g: [h for h in grp_hosts if h in facts]
        for g, grp_hosts in ((name, inventory.group_hosts(name)) for name in inventory.groups)
        if g not in ("all", "ungrouped")
    }
    extra = fleet_checks(seen, groups)
    result: dict[str, list[dict[str, Any]]] = {}
    for host, f in seen.items():
        ctx = play.contexts[host]
        checks = [c.to_dict() for c in host_checks(ctx.config, f)] + [c.to_dict() for c in extra.get(host, [])]
        checks += (extra_checks or {}).get(host, [])
        try:
            plan = capacity.plan_for_host(ctx.config, f)
        except JsonFileError:  # a key the planner needs is missing: check_capacity said so
            plan = None
        ctx.result.checks = checks
        if plan is not None:
            CapacityRecord(plan).note_on(ctx.result)
        result[host] = checks
        print_checks(play, host, checks)
        bad = [c for c in checks if c["status"] == "fail" or (strict and c["status"] == "warn")]
        ctx.step_name = "preflight"
        if bad and fail_hosts:
            ctx.record(
                "preflight",
                "checks",
                Status.FAILED,
                f"{len(bad)} check(s) {'failed' if not strict else 'failed or warned (--strict)'}: "
                + ", ".join(c["id"] for c in bad),
            )
            if host in play.active:
                play.active.remove(host)
        else:
            warns = sum(c["status"] == "warn" for c in checks)
            ctx.record("preflight", "checks", Status.OK, f"{len(checks)} checks, {warns} warning(s)")
    return result


def print_checks(play: Play, host: str, checks: list[dict[str, Any]]) -> None:
    table = Table(title=f"preflight [{host}]", title_justify="left", show_edge=False, pad_edge=False, expand=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("message", overflow="fold")
    table.add_column("fix", overflow="fold")
    for c in checks:
        st = c["status"]
        table.add_row(c["id"], f"[{STYLE.get(st, '')}]{st}[/]", c.get("message") or "", c.get("fix") or "")
    play.print(table)
