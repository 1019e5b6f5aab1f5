"""deploy and its steps as tasks of their own: weights, install, service, gateway, smoke,
verify. Each is idempotent: a second run reports zero changes and restarts nothing. The steps
themselves are in vfleet/cli/deploy_steps.py, loaded when one of these tasks runs."""

from __future__ import annotations

from invoke import task

from vfleet.cli.common import cli_errors, finish, helptext, load, select
from vfleet.cli.options import TaskOptions
from vfleet.engine.lock import locked

CHANGING = (
    "inventory",
    "limit",
    "set",
    "forks",
    "report",
    "check",
    "diff",
    "no_host_key_checking",
    "connect_timeout",
    "command_timeout",
    "verbose",
)
READING = ("inventory", "limit", "set", "forks", "report", "no_host_key_checking", "connect_timeout")
BATCH_HELP = (
    "Restart hosts that were serving in rolling batches through the gateways (a count, "
    "25%, or 1,25%,100%), dropping no request; default: restart changed hosts at once"
)
GATE_HELP = (
    "With --batch: eval gate file (YAML: evalset, max_score_drop, max_divergence, seed, max_tokens, "
    "concurrency, baseline): the first batch is a canary, evaluated before and after its restart; one "
    "that regressed goes back to its rollback point and the other batches do not start (docs/rollouts.md)"
)


@task(name="weights", help=helptext(*CHANGING), iterable=["set_"])
@cli_errors
def weights_task(
    c,
    inventory=None,
    limit=None,
    set_=None,
    forks=10,
    report=None,
    check=False,
    diff=False,
    no_host_key_checking=False,
    connect_timeout=None,
    command_timeout=None,
    verbose=False,
):
    """Copy the model to every vLLM host's local disk.

    rsync into staging, verify sha256 manifest and shard index, switch atomically; hosts with
    a copy feed the next (fan-out)."""
    from vfleet.cli import deploy_steps as steps

    opts = TaskOptions.of(locals())
    _, play = steps.open_play("weights", opts)
    with locked(play):
        steps.step_weights(play)
    finish(play, opts)


@task(help=helptext(*CHANGING), iterable=["set_"])
@cli_errors
def install(
    c,
    inventory=None,
    limit=None,
    set_=None,
    forks=10,
    report=None,
    check=False,
    diff=False,
    no_host_key_checking=False,
    connect_timeout=None,
    command_timeout=None,
    verbose=False,
):
    """Install the pinned vLLM into /opt/vllm/<package>-<version>.

    Online or from the wheelhouse; verify it imports with that version, point `current` at it."""
    from vfleet.cli import deploy_steps as steps

    opts = TaskOptions.of(locals())
    _, play = steps.open_play("install", opts)
    with locked(play):
        steps.step_install(play)
    finish(play, opts)


@task(name="service", help=helptext(*CHANGING, batch=BATCH_HELP, gate=GATE_HELP), iterable=["set_"])
@cli_errors
def service_task(
    c,
    inventory=None,
    limit=None,
    set_=None,
    forks=10,
    report=None,
    check=False,
    diff=False,
    no_host_key_checking=False,
    connect_timeout=None,
    command_timeout=None,
    verbose=False,
    batch=None,
    gate=None,
):
    """Render the vLLM unit + environment file, enable it, restart only on change, wait ready."""
    from vfleet.cli import deploy_steps as steps

    opts = TaskOptions.of(locals())
    fleet, play = steps.open_play("service", opts, batch=batch)
    steps.require_serving(play)
    judge = steps.open_gate(play, fleet, gate, opts, batch)
    with locked(play):
        steps.step_unit_names(play)
        steps.step_rollback_point(play, batch)
        steps.step_service(play, fleet, rolling=bool(batch))
        steps.step_restart_changed(play, fleet, batch, judge)
    finish(play, opts, last_lines=steps.last_lines(play))


@task(name="gateway", help=helptext(*CHANGING), iterable=["set_"])
@cli_errors
def gateway_task(
    c,
    inventory=None,
    limit=None,
    set_=None,
    forks=10,
    report=None,
    check=False,
    diff=False,
    no_host_key_checking=False,
    connect_timeout=None,
    command_timeout=None,
    verbose=False,
):
    """Configure nginx on the gateways group: upstream of every vLLM host, `nginx -t`, graceful reload."""
    from vfleet.cli import deploy_steps as steps

    opts = TaskOptions.of(locals())
    fleet, play = steps.open_play("gateway", opts)
    with locked(play):
        steps.step_gateway(play, fleet)
    finish(play, opts)


@task(name="smoke", help=helptext(*READING), iterable=["set_"])
@cli_errors
def smoke_task(
    c, inventory=None, limit=None, set_=None, forks=10, report=None, no_host_key_checking=False, connect_timeout=None
):
    """Smoke-check every vLLM host and every gateway: health, models, completion, stream, metrics, auth."""
    from vfleet.cli import deploy_steps as steps

    opts = TaskOptions.of(locals())
    fleet, play = steps.open_play("smoke", opts)
    steps.step_smoke(play, fleet)
    finish(play, opts)


@task(
    help=helptext(
        *CHANGING,
        skip_preflight="Do not run the preflight audit first",
        force="Go on with hosts whose preflight checks failed",
        strict="Preflight warnings fail too",
        batch=BATCH_HELP,
        gate=GATE_HELP,
    ),
    iterable=["set_"],
)
@cli_errors
def deploy(
    c,
    inventory=None,
    limit=None,
    set_=None,
    forks=10,
    report=None,
    check=False,
    diff=False,
    no_host_key_checking=False,
    connect_timeout=None,
    command_timeout=None,
    verbose=False,
    skip_preflight=False,
    force=False,
    strict=False,
    batch=None,
    gate=None,
):
    """Bare hosts -> a load-balanced, smoke-checked vLLM service.

    Steps: preflight, weights, install, service, gateway, smoke. Prints a curl command that
    works against the gateway."""
    from vfleet.cli import deploy_steps as steps

    opts = TaskOptions.of(locals())
    fleet, play = steps.open_play("deploy", opts, batch=batch)
    steps.require_serving(play)
    judge = steps.open_gate(play, fleet, gate, opts, batch)
    with locked(play):
        steps.step_unit_names(play)
        if not skip_preflight:
            steps.step_preflight(play, fleet, strict=strict, force=force)
        steps.step_rollback_point(play, batch)
        steps.step_weights(play)
        steps.step_install(play)
        steps.step_service(play, fleet, rolling=bool(batch))
        steps.step_gateway(play, fleet)
        steps.step_restart_changed(play, fleet, batch, judge)
        steps.step_smoke(play, fleet)
    steps.note_curl(play)
    finish(play, opts, last_lines=steps.last_lines(play))
    curl = play.get(steps.CurlHint)
    if curl is not None:
        print("\nTry it:\n  " + curl.command, flush=True)  # plain print: no wrapping inside the command


@task(
    help=helptext("inventory", "limit", "set", "no_host_key_checking", junitxml="Also write a JUnit XML report here"),
    iterable=["set_"],
)
@cli_errors
def verify(c, inventory=None, limit=None, set_=None, no_host_key_checking=False, junitxml=None):
    """Run the testinfra suite over the deployed fleet.

    Unit enabled and active, port listening, venv version, weights manifest, env file private,
    nginx config valid."""
    from invoke.exceptions import Exit

    from vfleet.roles.verify import run_verify

    opts = TaskOptions.of(locals())
    fleet = load(opts)
    rc = run_verify(fleet, select(fleet, opts.limit), junitxml=junitxml, no_host_key_checking=opts.no_host_key_checking)
    if rc:
        raise Exit(code=rc)
