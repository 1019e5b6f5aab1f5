"""What deploy and its step tasks (weights, install, service, gateway, smoke) run: the play over
the selection, the fleet lock, each step, the rolling restart of changed hosts, the smoke
checks. Apart from vfleet/cli/deploy.py so that the roles load only when one of those tasks
runs, not for every command's task menu (vfleet/cli/__init__.py)."""

from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass
from typing import ClassVar, Sequence

from vfleet.cli.common import backends, gateway_names, load, make_play, select, vllm_names
from vfleet.cli.options import TaskOptions
from vfleet.cli.preflight_steps import replica_checks
from vfleet.clients import smoke
from vfleet.config.fleet import Fleet
from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError
from vfleet.engine.results import Status
from vfleet.engine.runner import HostFailed, Play
from vfleet.roles.compile_cache import sharing
from vfleet.roles.gateway import nginx as gateway
from vfleet.roles.install import venv as vllm_install
from vfleet.roles.model_source import adapter_payload_of, draft_payload
from vfleet.roles.preflight import audit
from vfleet.roles.replica import deploy as replica_deploy
from vfleet.roles.rollout import (
    Converged,
    EvalGate,
    RestoredUntried,
    Rollout,
    RolloutInfo,
    RolloutSummary,
    batch_sizes,
    gate_lines,
    open_gate as open_eval_gate,
    rollback_point,
)
from vfleet.roles.service import ServiceOutcome, unit as service, unit_files
from vfleet.roles.triage import failure_journal
from vfleet.roles.weights import AdapterTotals, DraftTotals, WeightsBySource, sync as weights


@dataclass(frozen=True)
class CurlHint:
    """A command that works against the gateway (the report's "curl", printed last)."""

    REPORT_KEY: ClassVar[str] = "curl"

    command: str

    def to_dict(self) -> str:
        return self.command


# Tasks that write a gateway's config (the gateway step, or a drain through it with --batch):
# its checks run before they change anything on any host (check_gateways).
GATEWAY_WRITERS = ("deploy", "service", "gateway")


def open_play(name: str, opts: TaskOptions, batch: str | None = None) -> tuple[Fleet, Play]:
    """The run's fleet and the play over the --limit selection. With a --batch (checked here,
    before anything runs) it also holds every gateway, for draining only: steps that
    configure gateways still run on the selected ones."""
    fleet = load(opts)
    hosts = select(fleet, opts.limit)
    selected = [h.name for h in hosts]
    if batch:
        batch_sizes(str(batch), 1)
        chosen = set(selected)
        hosts += [g for g in fleet.gateways if g.name not in chosen]
    play = make_play(name, fleet, hosts, opts)
    play.selected = selected
    if name in GATEWAY_WRITERS:
        check_gateways(play, fleet)
    return fleet, play


def check_gateways(play: Play, fleet: Fleet) -> None:
    """Every check the gateway step can make before any host changes: each gateway of the play
    renders its config (served names, route prefixes, per-model values) and `nginx -t` accepts
    it, on the controller when it has nginx (before anything connects), else on the gateway
    itself (read only, in a scratch directory). A refusal is an operator error (exit 2):
    weights, install and service have not touched a host yet."""
    from vfleet.roles.gateway import check_gateway, check_on_host, controller_nginx

    names = gateway_names(play.hosts)
    if not names:
        return
    bs, nginx = backends(fleet), controller_nginx()
    for name in names:
        why = check_gateway(play.contexts[name].config, bs, nginx)
        if why:
            raise VfleetError(f"gateway {name}: {why}; nothing was changed on any host")
    if nginx is None:
        play.run_step("gateway: nginx -t before any change", lambda ctx: check_on_host(ctx, bs), hosts=names)
        for name in names:  # an unreachable gateway is left to its step, as before
            failed = [s for s in play.results[name].steps if s.status is Status.FAILED]
            if failed:
                raise VfleetError(f"gateway {name}: {failed[-1].message}; nothing was changed on any host")


def _selected_gateways(play: Play) -> list[str]:
    chosen = set(play.selected)
    return [n for n in gateway_names(play.hosts) if n in chosen]


def step_unit_names(play: Play) -> None:
    """Before the first change on any host: a host whose service_name would shadow a unit it
    already has (ssh, nginx; vfleet/roles/service/_unit_files.py) leaves the run, whatever
    --skip-preflight or --force say."""
    play.run_step("service: unit names", unit_files.guard, hosts=vllm_names(play.hosts))


def step_rollback_point(play: Play, batch: str | None) -> None:
    """With --batch, before anything changes: save what each serving host runs (unit, env
    file, venv, weights), so a host whose new unit fails goes back to exactly that."""
    if batch and not play.options.check:
        play.run_step("rollback point", rollback_point.save, hosts=vllm_names(play.hosts))


def step_weights(play: Play) -> None:
    """One weights run per model_source (several models: each group gets its own weights)."""
    groups: dict[str, list[str]] = {}
    for n in vllm_names(play.hosts):
        groups.setdefault(weights.source_key(play.contexts[n].config), []).append(n)
    totals = {src: weights.run(play, names) for src, names in groups.items()}
    if len(groups) > 1:
        play.note(WeightsBySource(totals))
    step_adapters(play)


def step_adapters(play: Play) -> None:
    """Each LoRA adapter to the hosts of its model, and the speculative draft model to the
    hosts that use one, like the weights (a new or replaced one switches its link, which
    restarts the service like any other change)."""
    hosts_of: dict[str, list[str]] = {}
    for n in vllm_names(play.hosts):
        for adapter in play.contexts[n].config.lora_adapters:
            hosts_of.setdefault(adapter.name, []).append(n)
    if hosts_of:
        play.note(
            AdapterTotals(
                {
                    name: weights.run(play, names, adapter_payload_of(name), report=False)
                    for name, names in hosts_of.items()
                }
            )
        )
    drafts: dict[str, list[str]] = {}
    for n in vllm_names(play.hosts):
        cfg = play.contexts[n].config
        if cfg.speculative is not None and cfg.speculative.has_model:
            drafts.setdefault(draft_payload(cfg).key, []).append(n)
    if drafts:
        play.note(
            DraftTotals({src: weights.run(play, names, draft_payload, report=False) for src, names in drafts.items()})
        )


def step_install(play: Play) -> None:
    play.run_step("install", lambda ctx: vllm_install.install_venv(ctx), hosts=vllm_names(play.hosts))


def step_service(play: Play, fleet: Fleet, rolling: bool = False) -> None:
    """Single-host vLLM services; then the multi-host replicas, which start as one
    (vfleet/roles/replica/_deploy.py)."""
    members = fleet.members
    play.run_step(
        "service",
        service.configure,
        hosts=[n for n in vllm_names(play.hosts) if n not in members],
        handlers=service.ROLLING_HANDLERS if rolling else service.HANDLERS,
    )
    replica_deploy.run(play, fleet)


def step_gateway(play: Play, fleet: Fleet) -> None:
    """Preflight's capacity plans (when it ran) give each host's max_conns unless the
    inventory sets gateway_max_conns."""
    bs = backends(fleet, _planned(play))
    play.run_step("gateway", lambda ctx: gateway.configure(ctx, bs), hosts=_selected_gateways(play))


def _planned(play: Play) -> dict[str, float | None]:
    """Each host's planned max concurrency, where preflight ran in this play."""
    from vfleet.roles.preflight import CapacityRecord

    return {n: rec.max_concurrency if (rec := r.get(CapacityRecord)) else None for n, r in play.results.items()}


def _outcome(play: Play, name: str) -> ServiceOutcome:
    return play.results[name].get(ServiceOutcome) or ServiceOutcome(was_active=False)


def open_gate(play: Play, fleet: Fleet, path: str | None, opts: TaskOptions, batch: str | None) -> EvalGate | None:
    """--gate: the eval gate of the rolling restart (vfleet/roles/rollout/_gate.py), checked
    before anything changes. Only with --batch: the first batch is the canary it judges."""
    if not path:
        return None
    if not batch:
        raise VfleetError(
            f"--gate {path} needs --batch: the gate judges the first batch (the canary) before "
            "the others restart; add --batch 1"
        )
    return open_eval_gate(path, fleet, vllm_names(play.hosts), task=play.task, report=opts.report)


def step_restart_changed(play: Play, fleet: Fleet, batch: str | None, gate: EvalGate | None = None) -> None:
    """With --batch: restart the hosts whose service changed while they served, batch by
    batch through the gateways, like `vfleet restart --batch` (the failure budget is the
    inventory's max_fail_percentage, else 0: the first failed batch stops the rest); a host
    that fails goes back to its rollback point. Without: they were restarted at once by the
    service step; say so when that hit a serving fleet. Either way a healthy host that an
    earlier, killed run left drained goes back into the gateways."""
    if not batch:
        _warn_serving_restarted(play)
    if play.options.check:
        return
    active = set(play.active)  # Play.active is a list: one lookup per host, not one scan
    deferred = [n for n in vllm_names(play.hosts) if batch and n in active and _outcome(play, n).restart_deferred]
    gws = [g for g in gateway_names(play.hosts) if g in active]
    rollout = Rollout(
        play,
        backends(fleet, _planned(play)),
        deferred,
        gws,
        restore=rollback_point.restore,
        gate=gate,
        cache=None if fleet.replicas else sharing(play, deferred),
    )
    if not deferred:
        healed = rollout.converge() if gws else []
        if healed:
            play.note(Converged(healed))
        return
    summary = rollout.run(str(batch), _batch_budget(play, deferred))
    play.note(summary)
    if summary.stopped:
        _restore_untried(play, deferred)


def last_lines(play: Play) -> Sequence[str]:
    """What a rollout of this run says last, per host and in total, then its gate's verdicts (nothing when none ran)."""
    summary = play.get(RolloutSummary)
    return [*(summary.closing_lines if summary is not None else ()), *gate_lines(play)]


def _batch_budget(play: Play, among: list[str]) -> float:
    """--max-fail-percentage, else what the inventory itself sets (not the schema's default of
    100, which would restart every batch on a unit that just failed), else 0."""
    if play.options.max_fail_percentage is not None:
        return float(play.options.max_fail_percentage)
    chosen = set(among)
    set_ = [
        h.vars["max_fail_percentage"]
        for h in play.hosts
        if h.name in chosen and h.sources.get("max_fail_percentage", "default") != "default"
    ]
    return float(min(set_)) if set_ else 0.0


def _restore_untried(play: Play, deferred: list[str]) -> None:
    """The batches stopped: hosts never restarted still serve from their saved point; put
    their files back too, so none is left with a new unit on disk that its process never ran
    (the next crash or reboot would start it). When the play aborted (max_fail_percentage),
    run_step refuses every step, yet these files must still go back: then host by host on
    their contexts, each result recorded, so --report and the gate's lines are still written."""

    def put_back(ctx) -> None:
        what = rollback_point.restore(ctx)
        ctx.result.note(RestoredUntried())
        ctx.record(
            "rollout", ctx.name, Status.SKIPPED, f"not restarted: the batches stopped; {what} put back (what it serves)"
        )

    active = set(play.active)
    untried = [n for n in deferred if n in active and play.results[n].get(RolloutInfo) is None]
    if not play.aborted:
        play.run_step("rollout stopped: put back untried hosts", put_back, hosts=untried)
        return
    for name in untried:
        ctx = play.contexts[name]
        ctx.step_name = "rollout stopped: put back untried hosts"
        try:
            put_back(ctx)
        except VfleetError as exc:  # HostFailed, unreachable, a command that failed: say so and go on
            ctx.record("rollout", name, Status.FAILED, f"not restarted; putting its saved point back failed: {exc}")


def step_smoke(play: Play, fleet: Fleet) -> None:
    """Smoke every serving host and gateway; not after an abort (no step runs any more, and
    the run must still reach its report and last lines)."""
    if play.options.check or play.aborted:
        return
    workers = fleet.workers  # no HTTP on a replica's workers
    play.run_step("smoke: hosts", _smoke_host, hosts=[n for n in vllm_names(play.hosts) if n not in workers])
    play.run_step("smoke: gateway", _smoke_gateway(fleet), hosts=_selected_gateways(play))
    for host in play.hosts:
        done = play.results[host.name].get(smoke.SmokeResults)
        for label, ttft in done.ttfts() if done is not None else ():
            play.print(f"smoke [{host.name}] {label}: all checks passed, TTFT {ttft * 1000:.0f} ms", markup=False)


def _smoke_gateway(fleet: Fleet):
    """Smoke every model through each gateway with the gateway's checks, asking for it by
    name the way its clients do (results labelled "gateway", or "gateway <model>" when
    there are several). The models are the fleet's, not the run's hosts': `smoke --limit
    gateways` asked for the gateway's own served name, which no host of a two-model fleet serves."""
    models: dict[str, tuple[bool, tuple[str, ...]]] = {}  # name -> (chat, its adapters)
    for cfg in fleet.configs_of(fleet.serving_hosts):
        models.setdefault(
            str(cfg.served_model_name), (not cfg.serve_completions_only, tuple(a.name for a in cfg.lora_adapters))
        )

    def step(ctx) -> None:
        if len(models) <= 1:
            adapters = next(iter(models.values()))[1] if models else ()
            smoke.run_smoke(ctx, dataclasses.replace(smoke.gateway_target(ctx.config), adapters=adapters))
            return
        for model, (chat, adapters) in models.items():  # kind stays "gateway" (the gateway's checks), kept per model
            t = smoke.gateway_target(ctx.config)
            smoke.run_smoke(
                ctx, dataclasses.replace(t, model=model, chat=chat, adapters=adapters), label=f"gateway {model}"
            )

    return step


def _smoke_host(ctx) -> None:
    """Smoke one vLLM host; when it fails, say what systemd saw (a vLLM that exited while
    serving shows its restarts and its last journal lines in the report, not only 'refused')."""
    try:
        smoke.run_smoke(ctx, smoke.host_target(ctx.config))
    except HostFailed as exc:
        unit = ctx.config.unit
        props = ctx.run(f"systemctl show -p ActiveState,NRestarts,ExecMainStatus -- {shlex.quote(unit)}").stdout
        state = ", ".join(ln.strip() for ln in props.splitlines() if ln.strip())
        journal = failure_journal(ctx, unit)
        raise HostFailed(
            f"{exc}; {unit}: {state}{journal.seen()}; journal: {journal.tail()}",
            {**(exc.data or {}), **journal.data(), "systemd": state},
        ) from None


def step_preflight(play: Play, fleet: Fleet, *, strict: bool, force: bool) -> None:
    """The preflight audit of the vLLM hosts; a host that fails it leaves the run unless --force."""
    facts = audit.gather(play, hosts=vllm_names(play.hosts))
    audit.audit(
        play,
        fleet.inventory,
        facts,
        strict=strict,
        fail_hosts=not force,
        extra_checks=replica_checks(play, fleet, facts),
    )


def _warn_serving_restarted(play: Play) -> None:
    hit = [n for n in vllm_names(play.hosts) if _outcome(play, n).was_active and _outcome(play, n).restarts]
    if len(hit) > 1:
        play.print(
            f"note: {len(hit)} serving hosts were restarted at once ({', '.join(hit)}); "
            f"on a live fleet use `deploy --batch 1` to roll them through the gateways",
            markup=False,
        )


def require_serving(play: Play) -> None:
    """Every vLLM host's config has what serving needs, before anything connects."""
    for name in vllm_names(play.hosts):
        play.contexts[name].config.require_serving()


def note_curl(play: Play) -> None:
    """When the run ends serving through a gateway: a curl command against the first one,
    for the first vLLM host's model (printed after the recap, and in the report)."""
    gws = [n for n in gateway_names(play.hosts) if n in play.active]
    if gws and not play.options.check:
        first = next((play.contexts[n].config for n in vllm_names(play.hosts)), None)
        play.note(CurlHint(curl_line(play.contexts[gws[0]].config, first.served_model_name if first else None)))


def curl_line(cfg: HostConfig, model: str | None = None) -> str:
    """A command that works against the gateway, every inventory value quoted for the shell
    (the key stays in $VLLM_API_KEY: never printed; a TLS gateway's CA file as --cacert);
    `model`: a served name behind it."""
    body = json.dumps(
        {"model": model or cfg.served_model_name, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16}
    )
    key = '-H "Authorization: Bearer $VLLM_API_KEY" ' if cfg.api_key else ""
    ca = f"--cacert {shlex.quote(cfg.gateway_verify)} " if isinstance(cfg.gateway_verify, str) else ""
    return (
        f"curl -s {ca}{key}{shlex.quote(cfg.gateway_url + '/v1/chat/completions')} "
        f"-H 'Content-Type: application/json' -d {shlex.quote(body)}"
    )
