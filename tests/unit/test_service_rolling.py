"""`deploy --batch`'s restart handler (vfleet/roles/service/_unit.py, restart_now_or_defer): a
host that was serving is not restarted by the service step; its restart is recorded as
deferred, both as the typed ServiceOutcome that deploy's rolling phase reads to choose the
hosts it restarts through the gateways, and as a row of the host's report."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml

from tests.unit.configs import LAB_VARS
from vfleet.config.hostconfig import HostConfig
from vfleet.config.variables import SCHEMA
from vfleet.engine.inventory import load_inventory
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, Play
from vfleet.roles.service._unit import RESTART, ROLLING_HANDLERS, ServiceOutcome


def play_of_one_local_host() -> Play:
    data = {"all": {"children": {"vllm": {"hosts": {"gpu01": {**LAB_VARS, "ansible_connection": "local"}}}}}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "inventory.yaml"
        path.write_text(yaml.safe_dump(data))
        inv = load_inventory(path, schema=SCHEMA)
    return Play("deploy", inv.select(None), configure=HostConfig.from_host)


def serving_and_changed(ctx: HostContext) -> None:
    """What the service step leaves on a host that served when its unit changed."""
    ctx.result.note(ServiceOutcome(was_active=True))
    ctx.notify(RESTART)


def test_a_serving_hosts_restart_is_recorded_as_deferred():
    play = play_of_one_local_host()
    play.run_step("service", serving_and_changed, handlers=ROLLING_HANDLERS)
    result = play.results["gpu01"]
    outcome = result.get(ServiceOutcome)
    assert outcome is not None and outcome.restart_deferred and outcome.restarts == 0
    assert result.data["restart_deferred"] is True
    (row,) = [s for s in result.steps if s.step == f"service: handler {RESTART}"]
    assert (row.action, row.target, row.status) == ("service", "vllm.service", Status.OK)
    assert "restart deferred to the rolling batches" in row.message
