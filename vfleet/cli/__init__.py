"""The task namespace shared by `invoke` (tasks.py) and the `vfleet` command.
A task is listed only when it works: no stubs in the menu.

Every command loads this whole menu (Invoke parses the command line against all tasks'
flags), so a task module imports at its top only what the menu and the common path need
(invoke, vfleet/engine/, vfleet.cli.common); a task's roles are imported when that task runs, in
its body or through its *_steps module. Why: importing every role for every command cost
`vfleet run` ~0.2 s of its start (httpx, jinja2, the audit), more than pyinfra's whole lead
at 5 and 20 hosts (docs/measurements.md "Speed against Ansible and pyinfra"; tests/unit/test_startup.py)."""

from invoke import Collection

from vfleet.cli import (
    bench,
    core,
    deploy,
    eval as eval_cli,
    lab,
    monitor,
    preflight,
    render,
    rollout,
    status,
    triage,
    usage,
    variants,
)

namespace = Collection()
for t in (
    core.inventory,
    core.run,
    preflight.plan,
    deploy.deploy,
    deploy.weights_task,
    deploy.install,
    deploy.service_task,
    deploy.gateway_task,
    deploy.smoke_task,
    deploy.verify,
    rollout.restart,
    rollout.upgrade,
    rollout.drain,
    rollout.undrain,
    render.render,
    monitor.monitor,
    triage.triage,
    status.status,
    usage.usage,
):
    namespace.add_task(t)
namespace.add_collection(preflight.preflight)
namespace.add_collection(lab.lab)
namespace.add_collection(bench.bench_ns)
eval_cli.eval_ns.add_task(variants.variants)
namespace.add_collection(eval_cli.eval_ns)
