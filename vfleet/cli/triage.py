"""`vfleet triage`: why a vLLM host failed to start or died, and the next step.

`--log FILE` classifies a saved journal or vLLM log (pasted from anywhere) without an
inventory; `--inventory` reads the journal of every selected vLLM host whose unit is failed or
restarting, one round trip a host, and classifies it. The classifier (vfleet/roles/triage/) is
imported when the task runs; docs/triage.md lists its classes and rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from invoke import task

from vfleet.cli.common import cli_errors, finish, helptext, load, make_play, select
from vfleet.cli.options import TaskOptions
from vfleet.config.variables import VLLM_GROUP
from vfleet.engine.errors import VfleetError
from vfleet.engine.report import write_json_atomic
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed

if TYPE_CHECKING:
    from vfleet.roles.triage import Verdict


def verdict_lines(source: str, verdict: "Verdict") -> list[str]:
    """What an operator reads: the class (and where), the numbers, the deciding lines with
    their numbers, the next step (log text with its control characters escaped)."""
    from vfleet.roles.triage import printable

    where = f", {verdict.where}" if verdict.where else ""
    out = [f"{printable(source)}: {verdict.cls.title}{where}"]
    if verdict.numbers:
        out.append(f"  numbers: {verdict.numbers_text()}")
    if verdict.note:
        out.append(f"  read: {verdict.note}")
    out.append("  deciding lines:" if verdict.cls.id != "unknown" else "  lines to read:")
    out += [f"    {ln.number}: {ln.shown()}" for ln in verdict.lines] or ["    (none)"]
    out.append(f"  next step: {verdict.cls.next_step}")
    return out


def _triage_log(path: str, report: str | None) -> None:
    from vfleet.roles.triage import classify_lines, read_log

    text = read_log(path)
    verdict = classify_lines(text.lines, first_line=text.first_line, note=text.note)
    for line in verdict_lines(path, verdict):
        print(line)
    if report:
        write_json_atomic(report, {"task": "triage", "log": path, **verdict.to_dict()})
        print(f"report written to {report}")


@task(
    help=helptext(
        "inventory",
        "limit",
        "set",
        "forks",
        "report",
        "no_host_key_checking",
        "connect_timeout",
        log="Classify this saved journal or vLLM log instead of reading hosts (its last 8 MiB)",
    ),
    iterable=["set_"],
)
@cli_errors
def triage(
    c,
    inventory=None,
    limit=None,
    log=None,
    set_=None,
    forks=10,
    report=None,
    no_host_key_checking=False,
    connect_timeout=None,
):
    """Why vLLM failed to start or died, and the next step (--log FILE, or the hosts' journals).

    Prints the class (out of memory while loading or after, KV cache too small, NCCL, chat
    template, port in use, no kernel for the GPU, or unknown), the lines that decided it and
    the fixed next step. With an inventory: each vLLM host whose unit is failed or restarting;
    exit 1 when there is one."""
    opts = TaskOptions.of(locals())
    if log is not None:
        if inventory or limit:
            raise VfleetError("--log reads a saved file: leave out --inventory and --limit")
        _triage_log(log, report)
        return
    from vfleet.roles.triage import triage_host

    fleet = load(opts)
    hosts = select(fleet, opts.limit, VLLM_GROUP)
    if not hosts:
        raise VfleetError(
            f"{fleet.inventory.path}: no host of group '{VLLM_GROUP}'"
            + (f" matches --limit {opts.limit}" if opts.limit else "")
        )
    play = make_play("triage", fleet, hosts, opts)
    found: dict[str, list[str]] = {}

    def step(ctx: HostContext) -> None:
        t = triage_host(ctx)
        if not t.health.read:
            raise HostFailed(
                f"{t.unit}: state unknown: `systemctl show` printed no ActiveState (no systemd on "
                "the host, or systemctl failed); check that the host runs systemd and the unit exists"
            )
        if t.verdict is None:
            ctx.record("triage", t.unit, Status.OK, f"{t.health.describe()}: not down, nothing to triage")
            return
        found[ctx.name] = verdict_lines(f"{ctx.name} {t.unit}", t.verdict)
        data: dict[str, Any] = {"triage": t.verdict.to_dict(), "systemd": t.health.describe()}
        raise HostFailed(f"{t.unit} {t.health.describe()}: {t.verdict.one_line()}", data)

    play.run_step("triage", step)
    finish(play, opts, last_lines=[line for name in sorted(found) for line in found[name]])
