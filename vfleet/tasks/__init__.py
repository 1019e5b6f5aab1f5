"""The task namespace shared by `invoke` (tasks.py) and the `vfleet` command.
A task is listed only when it works: no stubs in the menu."""
from invoke import Collection

from vfleet.tasks import core

namespace = Collection()
namespace.add_task(core.inventory)
namespace.add_task(core.run)

try:  # the lab collection (lab.up / lab.down / lab.status)
    from vfleet.tasks import lab as _lab

    namespace.add_collection(_lab.lab if hasattr(_lab, "lab") else Collection.from_module(_lab, name="lab"))
except ImportError:  # pragma: no cover - while the lab is being built
    pass
