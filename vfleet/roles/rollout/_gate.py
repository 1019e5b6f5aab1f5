"""The eval gate of a rollout: `upgrade --gate eval.yaml`, `deploy --batch N --gate eval.yaml`.

Why: a rollout proves that each host serves again (health, the model listed, a real
completion), not that it still answers well. A vLLM upgrade that changes numerics, other
weights, a dtype or a quantization leaves every host healthy and the answers worse. So the
first batch is a canary: each of its hosts is evaluated as it serves now (the baseline),
restarted, and evaluated again against that baseline (the same prompts, greedy with a fixed
seed; the baseline's replies scored under the new server give the divergence). The rollout
goes on only when vfleet.clients.eval's compare passes under the gate file's thresholds. A
canary that regressed goes back to its saved point by the path a failed restart takes
(Rollout.roll_back: the previous venv for an upgrade, the rollback point for deploy); the
other batches never start, so every other host is left as it was. Judged per host: a batch
of several models gives each canary its own verdict.

Both evals run with the host drained: no client request shares its batches (outputs drift
with batch composition), and a canary that regressed never answers a client before it is
judged; it stays drained from its restart until then (Rollout.held).

The reports stay with the run: baseline and candidate are saved beside --report (or in the
current directory), the run's report gets a "gate" section (thresholds, settings, per host
the figures and the verdict), and the last lines say where the baseline is, so a later run
reuses it as `baseline:` in the gate file.

vfleet.clients.eval is imported by open_gate only: the tests hand EvalGate their own Evaluator."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Collection, Mapping

from vfleet.config.fleet import Fleet
from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed, Play
from vfleet.roles.rollout._lines import failed, waiting
from vfleet.roles.rollout._records import RolloutInfo

if TYPE_CHECKING:
    from vfleet.clients.eval.compare import Comparison
    from vfleet.clients.eval.report import EvalReport
    from vfleet.roles.rollout._rolling import Rollout

__all__ = ["Evaluator", "GateVerdict", "GateRecord", "EvalGate", "open_gate", "refusal", "reports_prefix", "gate_lines"]

# decoding settings that change the replies themselves: a baseline made with others is not comparable
REPLY_SETTINGS = ("seed", "max_tokens")
# fields of the live measured record that come from the inventory (HostConfig), i.e. describe
# what is being rolled out: true of the candidate, not of what the baseline ran
FROM_INVENTORY = ("model", "dtype", "quantization", "kv_cache_dtype", "planned_weights_gib")


def baseline_measured(live: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a canary's live record, read before its restart, that the host itself said."""
    return {k: v for k, v in live.items() if k not in FROM_INVENTORY}


@dataclass(frozen=True)
class Evaluator:
    """The calls the gate makes, bound to the gate file: `measure(ctx)` reads what the host
    runs now (vfleet/roles/status/_measured.py host_record: one SSH round trip), `run(config,
    reference, measured)` evaluates one host (run_eval, with the reference's replies scored
    too when given, the live record kept as the report's `measured`), `judge(baseline,
    candidate)` compares two reports (compare.compare under the file's thresholds). The
    baseline is measured before the restart and the candidate after, so the verdict says what
    changed (vLLM version, argv, weights copy)."""

    run: Callable[[HostConfig, "EvalReport | None", dict[str, Any]], "EvalReport"]
    judge: Callable[["EvalReport", "EvalReport"], "Comparison"]
    measure: Callable[[HostContext], dict[str, Any]]


@dataclass(frozen=True)
class GateVerdict:
    """One canary's verdict: the comparison's line (with where its baseline is), the reports
    it compared, and the comparison's figures (empty when the canary could not be evaluated)."""

    passed: bool
    line: str
    baseline: str
    candidate: str | None
    figures: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, cmp: Comparison, baseline: str, candidate: str, reused: bool) -> GateVerdict:
        where = (
            f"baseline {baseline} (from the gate file)"
            if reused
            else f"baseline saved in {baseline} (a later run reuses it as `baseline:` in the gate file)"
        )
        figures = {
            "score_baseline": cmp.score_a,
            "score_candidate": cmp.score_b,
            "score_drop": cmp.score_drop,
            "divergence": cmp.divergence,
            "divergence_signed": cmp.divergence_signed,
            "regressed": list(cmp.regressed),
            "measured_changes": list(cmp.measured_changes),
        }
        return cls(cmp.passed, f"{cmp.line()}; {where}", baseline, candidate, figures)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "baseline": self.baseline,
            "candidate": self.candidate,
            **self.figures,
            "line": self.line,
        }


@dataclass
class GateRecord:
    """The run's "gate" section: what judged the canary (file, eval set, thresholds, decoding
    settings) and each canary's verdict."""

    REPORT_KEY: ClassVar[str] = "gate"

    file: str
    evalset: str
    thresholds: dict[str, Any]
    settings: dict[str, Any]
    hosts: dict[str, GateVerdict] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "evalset": self.evalset,
            "thresholds": self.thresholds,
            "settings": self.settings,
            "hosts": {h: v.to_dict() for h, v in self.hosts.items()},
        }

    def lines(self) -> list[str]:
        return [f"{host}: {v.line}" for host, v in self.hosts.items()]


class EvalGate:
    """The BatchGate of vfleet/roles/rollout/_rolling.py: a baseline on each canary before its
    restart (`saved`: one loaded from the gate file instead), its verdict after."""

    def __init__(
        self, evaluator: Evaluator, record: GateRecord, prefix: str, saved: tuple[EvalReport, str] | None = None
    ) -> None:
        self.evaluator, self.record, self.prefix, self.saved = evaluator, record, prefix, saved
        self.baselines: dict[str, tuple[EvalReport, str]] = {}
        self.passed: set[str] = set()

    def path(self, kind: str, host: str) -> str:
        return f"{self.prefix}-{kind}-{re.sub(r'[^A-Za-z0-9._-]', '_', host)}.json"

    # -- before the canary restarts ------------------------------------------------------------
    def before(self, rollout: Rollout, batch: list[str]) -> str | None:
        play = rollout.play
        play.note(self.record)
        if self.saved is not None:
            self.baselines = {h: self.saved for h in batch}
            return None
        play.run_step(
            "eval gate: baseline of the canary, drained", lambda ctx: self._baseline(rollout, ctx), hosts=batch
        )
        active = set(play.active)
        missing = [h for h in batch if h in active and h not in self.baselines]
        if not missing:
            return None
        for h in self.baselines:  # drained for their baseline: back in, nothing restarted
            rollout.undrain(play.contexts[h])
        return f"eval gate: no baseline on {', '.join(missing)}: the canary was not restarted"

    def _baseline(self, rollout: Rollout, ctx: HostContext) -> None:
        """Record one canary's baseline, drained; whatever stops it (the host, the eval, a
        bug), the host is put back in the gateways and the rollout stops before any restart."""
        if ctx.name in rollout.out_of_service:
            ctx.record(
                "eval gate",
                "baseline",
                Status.FAILED,
                "left drained and not healthy by an earlier run: no baseline to judge it by; not restarted",
            )
            return
        path = self.path("baseline", ctx.name)
        try:
            rollout.drain(ctx)
            rollout.wait_inflight(ctx)
            report = self.evaluator.run(ctx.config, None, self.evaluator.measure(ctx))
            report.save(path)
            problem = report.baseline_problem()
            if problem:  # e.g. HTTP 401 after a key change: every candidate would "pass" against it
                raise VfleetError(f"{problem}; see {path}")
        except Exception as exc:  # any failure leaves the canary unjudged: it must not restart
            rollout.undrain(ctx)
            ctx.record(
                "eval gate", "baseline", Status.FAILED, f"no baseline: {type(exc).__name__}: {exc}; not restarted"
            )
            return
        self.baselines[ctx.name] = (report, path)
        ctx.record("eval gate", path, Status.OK, f"baseline recorded as it serves now, score {report.score}")

    # -- after it restarted --------------------------------------------------------------------
    def after(self, rollout: Rollout, batch: list[str]) -> str | None:
        play = rollout.play
        active = set(play.active)
        judged = [h for h in batch if h in rollout.held and h in active]  # restarted, held drained
        if play.aborted:  # no step runs any more: unjudged, they go back as a failed restart does
            for h in judged:
                self._unjudged(rollout, play.contexts[h], play.aborted)
            return None
        play.run_step(
            "eval gate: the canary against its baseline, drained", lambda ctx: self._judge(rollout, ctx), hosts=judged
        )
        regressed = [h for h in judged if h not in self.passed]
        if not regressed:
            return None
        return (
            f"eval gate: the canary {', '.join(regressed)} regressed and was rolled back: not starting the next batch"
        )

    def _unjudged(self, rollout: Rollout, ctx: HostContext, why: str) -> None:
        """A restarted canary the gate cannot judge (the run aborted: no step runs any more)
        goes back to what it served before by the path a failed restart takes, directly on its
        context; never into the gateways on the version nobody judged."""
        info = ctx.result.get(RolloutInfo)
        ctx.step_name = "canary"
        where = rollout.roll_back(ctx, info, switched=info.serving != info.from_venv)
        line = f"eval gate: not judged: {why}; {where}"
        self.record.hosts[ctx.name] = GateVerdict(False, line, self.baselines[ctx.name][1], None)
        ctx.record("eval gate", ctx.name, Status.FAILED, line)

    def _judge(self, rollout: Rollout, ctx: HostContext) -> None:
        """Evaluate a restarted canary against its baseline: passed, it goes back into the
        gateways; failed (or not evaluated), it goes back to what it served before."""
        info = ctx.result.get(RolloutInfo)  # noted by the restart it judges
        baseline, base_path = self.baselines[ctx.name]
        cand_path = self.path("candidate", ctx.name)
        waiting(ctx, "the eval gate")
        try:
            candidate = self.evaluator.run(ctx.config, baseline, self.evaluator.measure(ctx))
            candidate.save(cand_path)
            verdict = GateVerdict.of(
                self.evaluator.judge(baseline, candidate), base_path, cand_path, reused=self.saved is not None
            )
        except Exception as exc:  # a canary that cannot be evaluated is not proven: it goes back
            verdict = GateVerdict(
                False,
                f"eval gate: FAILED: could not evaluate the canary after its restart: {type(exc).__name__}: {exc}",
                base_path,
                None,
            )
        self.record.hosts[ctx.name] = verdict
        if verdict.passed:
            self.passed.add(ctx.name)
            info.undrain_s = round(rollout.undrain(ctx), 2)
            ctx.record("eval gate", ctx.name, Status.OK, verdict.line)
            rollout.play.print(f"[{ctx.name}] {verdict.line}", markup=False, soft_wrap=True)
            return
        failed(ctx, info, HostFailed(verdict.line))
        where = rollout.roll_back(ctx, info, switched=info.serving != info.from_venv)
        ctx.step_name = "canary"
        raise HostFailed(f"{verdict.line}; {where}")


def refusal(
    hosts: Mapping[str, HostConfig],
    baseline: EvalReport | None,
    item_hashes: Mapping[str, str],
    settings: Mapping[str, Any],
    replica_members: Collection[str] = (),
) -> str | None:
    """Why these hosts cannot be gated (None: they can): a multi-host replica (its rollback
    restarts only the head), a model served without chat, or a saved baseline that is no
    baseline (items that errored) or that was recorded on another model, over other items
    (`item_hashes`: the eval set's id -> EvalItem.digest) or with other decoding settings."""
    replicas = [h for h in hosts if h in replica_members]
    if replicas:
        return (
            f"{replicas[0]} is part of a multi-host replica: a replica's rollback restarts only its head, "
            "so the gate cannot put a canary replica back; leave the replicas out with --limit"
        )
    chatless = [h for h, c in hosts.items() if c.serve_completions_only]
    if chatless:
        return f"{chatless[0]} serves /v1/completions only (no chat template): the eval set is chat messages"
    if baseline is None:
        return None
    problem = baseline.baseline_problem()
    if problem:
        return f"the baseline is no baseline: {problem}; record a new one (drop `baseline:`)"
    model = baseline.target.get("model")
    other = next((h for h, c in hosts.items() if str(c.served_model_name) != model), None)
    if other is not None:
        return (
            f"the baseline was recorded on model {model!r}, {other} serves "
            f"{hosts[other].served_model_name!r}: --limit the run to hosts of {model!r}, or drop `baseline:`"
        )
    hashes = {i.id: getattr(i, "item_hash", None) for i in baseline.items}
    missing = [i for i in item_hashes if i not in hashes]
    if missing:
        return (
            f"the baseline has no result for {len(missing)} item(s) of the eval set (first: {missing[0]}): "
            "record a new one (drop `baseline:`)"
        )
    edited = [i for i, h in item_hashes.items() if hashes[i] != h]
    if edited:
        return (
            f"{len(edited)} item(s) of the eval set differ from the baseline's (first: {edited[0]}: messages, "
            "expectation or max_tokens changed, or the baseline predates item hashes): record a new one "
            "(drop `baseline:`)"
        )
    if not baseline.settings:
        return "the baseline records no decoding settings: record a new one (drop `baseline:`)"
    changed = [
        f"{k} {baseline.settings.get(k, 'unset')} -> {settings.get(k, 'unset')}"
        for k in REPLY_SETTINGS
        if baseline.settings.get(k) != settings.get(k)
    ]
    if changed:
        return f"the baseline was recorded with other decoding settings ({', '.join(changed)}): make them equal"
    return None


def reports_prefix(report: str | None, task: str) -> str:
    """Where a run keeps its gate's reports (PREFIX-baseline-HOST.json, PREFIX-candidate-HOST.json):
    beside --report, else in the current directory under the task's name and the time."""
    if report:
        return os.path.abspath((report[:-5] if report.endswith(".json") else report) + "-gate")
    return os.path.abspath(f"vfleet-{task}-gate-{time.strftime('%Y%m%dT%H%M%S')}")


def open_gate(path: str, fleet: Fleet, hosts: list[str], *, task: str, report: str | None) -> EvalGate:
    """The gate of a run over `hosts`, checked before anything changes: the gate file, its
    eval set, the baseline it names and the hosts (refusal). Bad: one VfleetError line."""
    from vfleet.clients.eval.compare import compare
    from vfleet.clients.eval.evalset import load_evalset
    from vfleet.clients.eval.gate_config import load_gate
    from vfleet.clients.eval.report import EvalReport
    from vfleet.clients.eval.runner import run_eval
    from vfleet.clients.eval.targets import host_target, measured_for
    from vfleet.roles.status import host_record

    config = load_gate(path)
    items = load_evalset(config.evalset)
    saved = EvalReport.load(config.baseline) if config.baseline else None
    settings = dataclasses.asdict(config.settings)
    why = refusal({h: fleet.config(h) for h in hosts}, saved, {i.id: i.digest for i in items}, settings, fleet.members)
    if why:
        raise VfleetError(f"--gate {path}: {why}")

    def run(cfg: HostConfig, reference: EvalReport | None, live: dict[str, Any]) -> EvalReport:
        # the inventory describes the setup being rolled out: what the candidate runs, not the baseline
        measured = {**measured_for(cfg), **live} if reference is not None else baseline_measured(live)
        return run_eval(host_target(cfg), items, config.settings, reference=reference, measured=measured)

    record = GateRecord(path, config.evalset or "built-in", dataclasses.asdict(config.thresholds), settings)

    def judge(a: EvalReport, b: EvalReport) -> Comparison:
        return compare(a, b, config.thresholds, reference_required=True)  # the gate always ran B against A

    return EvalGate(
        Evaluator(run, judge, host_record),
        record,
        reports_prefix(report, task),
        (saved, config.baseline) if saved is not None else None,
    )


def gate_lines(play: Play) -> list[str]:
    """The verdict lines of a run's gate (none without one), printed last with the rollout's."""
    record = play.get(GateRecord)
    return record.lines() if record is not None else []
