"""The task namespace shared by `invoke` (tasks.py) and the `vfleet` command.
A task is listed only when it works: no stubs in the menu."""
from invoke import Collection

from vfleet.tasks import bench, core, deploy, lab, monitor, preflight, render, rollout

namespace = Collection()
for t in (core.inventory, core.run, preflight.plan, deploy.deploy, deploy.weights_task, deploy.install,
          deploy.service_task, deploy.gateway_task, deploy.smoke_task, deploy.verify, rollout.restart,
          rollout.upgrade, rollout.drain, rollout.undrain, render.render,
          monitor.monitor):
    namespace.add_task(t)
namespace.add_collection(preflight.preflight)
namespace.add_collection(lab.lab)
namespace.add_collection(bench.bench_ns)
