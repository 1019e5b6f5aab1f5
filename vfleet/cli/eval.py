"""eval and eval.compare: a fixed prompt set against a host, the gateway or each host of a group,
and the gate between two reports.

eval measures and exits 0 unless a target could not be reached; eval.compare judges (exit 1 over
a threshold). What eval needs of a host comes from its HostConfig through
vfleet/clients/eval/targets.py (URL, served model name, key, the `measured` record)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from invoke import Collection, task
from invoke.exceptions import Exit

from vfleet.cli.common import cli_errors, helptext, load, select
from vfleet.cli.options import TaskOptions
from vfleet.config.variables import VLLM_GROUP
from vfleet.engine.errors import VfleetError

EVAL_HELP = helptext(
    "inventory",
    "set",
    report="Also write the report(s) as JSON to this path",
    host="Evaluate this one vLLM host directly",
    target="Gateway host to send through (default: the first of group gateways)",
    limit="Evaluate each vLLM host of this group or pattern directly, one report a host",
    evalset='Eval set, JSONL of {"id", "messages", one of answer|regex|schema} (default: the built-in set)',
    seed="Sampling seed sent with every request (default 0; decoding is greedy)",
    max_tokens="Most tokens a reply may have (default 64; an item's own max_tokens wins)",
    concurrency="Items in flight at once (default 1: outputs drift with batch composition)",
    top_logprobs="Alternatives recorded per reply token (default 5)",
    timeout="Seconds one request may take (default 120)",
    reference="An earlier eval report: score its replies under this target (divergence, nats/token)",
    out="Folder for NAME.json, or NAME-HOST.json per host with --limit (default: eval-results)",
    name="Base name of the files (default eval)",
    measure="Read each vLLM host's setup over SSH for the report's measured record (default on; "
    "--no-measure: only what the inventory says)",
)


def _targets(fleet, opts: TaskOptions, host: str | None, target: str | None):
    """[(EvalTarget, HostConfig whose setup it measures)]: --host, each host of --limit, or a gateway."""
    from vfleet.clients.eval.targets import gateway_target, host_target

    inv = fleet.inventory
    if host:
        if host not in inv.hosts or VLLM_GROUP not in inv.hosts[host].groups:
            raise VfleetError(f"--host {host}: not a host of group '{VLLM_GROUP}' in {inv.path}")
        cfg = fleet.config(host)
        return [(host_target(cfg), cfg)]
    if opts.limit:
        hosts = select(fleet, opts.limit, VLLM_GROUP)
        if not hosts:
            raise VfleetError(f"--limit {opts.limit}: matches no host of group '{VLLM_GROUP}' in {inv.path}")
        return [(host_target(fleet.config(h)), fleet.config(h)) for h in hosts]
    gws = [g for g in fleet.gateways if target is None or g.name == target]
    if not gws:
        raise VfleetError(
            f"no gateway host{' ' + target if target else ''} in {inv.path}; "
            "give --target NAME, --host for one vLLM host or --limit GROUP"
        )
    behind = select(fleet, None, VLLM_GROUP)
    return [(gateway_target(fleet.config(gws[0])), fleet.config(behind[0]) if behind else fleet.config(gws[0]))]


def _live_records(fleet, opts: TaskOptions, targets, *, through_gateway: bool) -> dict[str, dict]:
    """What each target host runs, read over SSH (the live record wins over the inventory's):
    per host for --host/--limit; through a gateway, the fields every vLLM host behind it shares."""
    from vfleet.cli.measure import host_records, measured_record

    if through_gateway:
        behind = [h.name for h in select(fleet, None, VLLM_GROUP)]
        return (
            {targets[0][1].name: measured_record(fleet, opts, behind, one_host=False, task_name="eval")}
            if behind
            else {}
        )
    return host_records(fleet, opts, [cfg.name for _, cfg in targets], task_name="eval")


@task(help=EVAL_HELP, iterable=["set_"], auto_shortflags=False)
@cli_errors
def eval_task(
    c,
    inventory=None,
    limit=None,
    set_=None,
    report=None,
    host=None,
    target=None,
    evalset=None,
    seed=0,
    max_tokens=64,
    concurrency=1,
    top_logprobs=5,
    timeout=120,
    reference=None,
    out="eval-results",
    name="eval",
    measure=True,
):
    """Run a fixed prompt set against a host or the gateway: score it, record tokens and logprobs."""
    # imported here: httpx and jsonschema would cost every other command's start (see bench)
    from vfleet.clients.bench.output import console as output_console
    from vfleet.clients.eval.evalset import load_evalset
    from vfleet.clients.eval.report import EvalReport
    from vfleet.clients.eval.runner import EvalSettings, run_eval
    from vfleet.clients.eval.table import items_table, summary_line
    from vfleet.clients.eval.targets import batch_invariance_note, measured_for
    from vfleet.engine.report import write_json_atomic

    opts = TaskOptions.of(locals())
    settings = EvalSettings(
        seed=int(seed),
        max_tokens=int(max_tokens),
        top_logprobs=int(top_logprobs),
        concurrency=int(concurrency),
        timeout=float(timeout),
    )
    settings.check()
    items = load_evalset(evalset)
    ref = EvalReport.load(reference) if reference else None
    fleet = load(opts)
    targets = _targets(fleet, opts, host, target)
    per_host = bool(opts.limit) and not host  # --limit: one report a host, named after it
    console = output_console()
    live = _live_records(fleet, opts, targets, through_gateway=not host and not opts.limit) if measure else {}
    written = {}
    for tgt, cfg in targets:
        note = batch_invariance_note(cfg)
        result = run_eval(tgt, items, settings, reference=ref, measured={**measured_for(cfg), **live.get(cfg.name, {})})
        if note:
            result.notes.append(note)
            console.print(note, markup=False, highlight=False, soft_wrap=True)
        path = Path(out) / (f"{name}-{cfg.name}.json" if per_host else f"{name}.json")
        result.save(path)
        written[tgt.label] = result
        console.print(items_table(result))
        console.print(summary_line(result), markup=False, highlight=False)
        console.print(f"report written to {path}", markup=False, highlight=False)
    if report:
        data = (
            {"task": "eval", "reports": {label: r.to_dict() for label, r in written.items()}}
            if per_host
            else next(iter(written.values())).to_dict()
        )
        write_json_atomic(report, data)


@task(
    name="compare",
    positional=["a", "b"],
    help={
        "a": "The earlier report (JSON from vfleet eval): the baseline",
        "b": "The later report; run with --reference A for a divergence figure",
        "max_score_drop": "Largest accepted drop of the score, as a fraction (default 0.03 = 3 points)",
        "max_divergence": "Largest accepted mean divergence of B from A, nats/token (default 0.10)",
    },
)
@cli_errors
def compare(c, a, b, max_score_drop=0.03, max_divergence=0.10):
    """Compare two eval reports: items that flipped, divergence, setup changes; exit 1 over a threshold."""
    from vfleet.clients.bench.output import console as output_console
    from vfleet.clients.eval.compare import Thresholds, compare as compare_reports
    from vfleet.clients.eval.report import EvalReport
    from vfleet.clients.eval.table import compare_table

    limits = Thresholds(max_score_drop=float(max_score_drop), max_divergence=float(max_divergence))
    if not all(math.isfinite(v) and v >= 0 for v in (limits.max_score_drop, limits.max_divergence)):
        raise VfleetError(
            f"--max-score-drop {max_score_drop} --max-divergence {max_divergence}: both must be "
            "finite numbers, 0 or more (NaN would turn the check off)"
        )
    ra, rb = EvalReport.load(a), EvalReport.load(b)
    result = compare_reports(ra, rb, limits)
    console = output_console()
    console.print(compare_table(result, ra, rb, a, b))
    for change in result.measured_changes:
        console.print(f"setup changed: {change}", markup=False, highlight=False)
    for line in result.regressed:
        console.print(f"regressed: {line}", markup=False, highlight=False, soft_wrap=True)
    print(result.line(), file=sys.stdout)
    if not result.passed:
        raise Exit(code=1)


eval_ns = Collection("eval")
eval_ns.add_task(eval_task, name="eval", default=True)
eval_ns.add_task(compare)
