"""The lab fleet for integration tests: real systemd hosts (systemd-nspawn), brought up once
per session and never torn down per test (a boot is cheap, but not free).

    def test_x(lab_inventory): ...            # DEFAULT_HOSTS hosts, default profiles

    @pytest.fixture(scope="module")           # a module that needs another fleet shape
    def v100_fleet(lab):
        return lab.ensure(3, profiles={"lab1": "v100-8-pcie", "lab2": "a100-8-sxm"})

`lab.ensure()` is `lab.api.up`: idempotent, running hosts stay (same PID), missing ones
start, a changed profile is swapped in place; it returns the inventory path (the same file
every time, rewritten for the shape asked). The session ends with `lab.down` only when this
session brought the lab up and VFLEET_LAB_KEEP is not set (keeping it makes reruns fast).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

DEFAULT_HOSTS = int(os.environ.get("VFLEET_LAB_HOSTS", "3"))
# Hosts write to disk, not RAM: each deployed vLLM venv is ~3.4 GiB, two per host in the upgrade test.
BACKING = os.environ.get("VFLEET_LAB_BACKING", "disk")


def lab_available() -> str | None:
    """Why the lab cannot run here, or None."""
    if os.geteuid() != 0:
        return "the lab needs root"
    for tool in ("systemd-nspawn", "ip", "ssh", "ssh-keygen"):
        if not shutil.which(tool):
            return f"{tool} missing (see vfleet/lab/README.md for the packages)"
    return None


class LabFleet:
    """Session handle on the lab: `ensure()` shapes it, `down()` removes it."""

    def __init__(self) -> None:
        from vfleet.lab import api

        self.api = api
        self.started_here = not any(s.pid for s in api.status())
        self.last: dict = {}

    def ensure(
        self,
        hosts: int = DEFAULT_HOSTS,
        gpu_profile: str | None = None,
        profiles: dict[str, str] | None = None,
        gateways: int | None = None,
    ) -> Path:
        """Bring the lab to `hosts` hosts with these profiles; returns the inventory path."""
        self.last = dict(hosts=hosts, gpu_profile=gpu_profile, profiles=profiles, gateways=gateways)
        return self.api.up(
            hosts,
            gpu_profile=gpu_profile,
            profiles_by_host=profiles,
            gateways=gateways,
            backing=BACKING,
            echo=lambda _line: None,
        ).inventory

    def pristine(self, hosts: int = DEFAULT_HOSTS) -> Path:
        """Hosts as `up` makes them, nothing deployed: a lab this session did not boot (left
        by `make demo`, say, with nginx enabled on its gateway) goes down and comes up anew
        first. Only the lab's own tests need this; every other test deploys what it needs."""
        if not self.started_here:
            self.down()
            self.started_here = True  # what comes up now is this session's, and goes down at its end
        return self.ensure(hosts)

    def restore(self, shape: dict | None = None) -> Path:
        """Re-apply `shape` (a saved `lab.last`), e.g. after a test took the lab down."""
        return self.ensure(**shape) if shape else self.ensure()

    def down(self):
        return self.api.down(echo=lambda _line: None)


@pytest.fixture(scope="session")
def lab() -> LabFleet:
    reason = lab_available()
    if reason:  # integration tests never skip: a skipped one proves nothing
        pytest.fail(f"lab unavailable: {reason}; run `make unit` for the tests that need no lab")
    fleet = LabFleet()
    yield fleet
    if fleet.started_here and not os.environ.get("VFLEET_LAB_KEEP"):
        fleet.down()


@pytest.fixture(scope="session")
def lab_inventory(lab: LabFleet) -> Path:
    """Inventory of DEFAULT_HOSTS lab hosts: vllm = all but the last, gateways = the last."""
    return lab.ensure(DEFAULT_HOSTS)


# The lab's own lifecycle tests (down/up) go first, then the engine, then the tests that
# deploy a real vLLM and share one deployed fleet (built once, see `deployed`), any module
# not named here among them; last the modules that reshape the lab around lab4 and deploy
# fleets of their own: nothing after them needs the shared fleet put back.
MODULE_ORDER = [
    "test_lab",
    "test_runner",
    "test_preflight_lab",
    "test_deploy",
    "test_faults",
    "test_faults_hosts",
    "test_faults_restart",
    "test_bench_lab",
    "test_eval_lab",
    "test_status",
    "test_monitor",
    "test_rollout",
    "test_rollout_gate",
]
RESHAPING_MODULES = ["test_models", "test_replica"]


def pytest_collection_modifyitems(items):
    def rank(item):
        if not item.nodeid.startswith("tests/integration/"):
            return -1  # unit tests first: they fail in seconds, the lab takes minutes
        name = item.module.__name__.rsplit(".", 1)[-1]
        if name in RESHAPING_MODULES:
            return len(MODULE_ORDER) + 1 + RESHAPING_MODULES.index(name)
        return MODULE_ORDER.index(name) if name in MODULE_ORDER else len(MODULE_ORDER)

    items.sort(key=rank)


# The session's deployed fleet once `deployed` made it: what `fleet_put_back` checks after a module.
_FLEET: dict = {}


@pytest.fixture(scope="session")
def deployed(lab, tmp_path_factory):
    """A real deploy on the lab (2 vLLM hosts + 1 gateway), made once per session; after each
    module that used it, `fleet_put_back` makes sure it is as deployed again."""
    from tests.integration.deploy_env import run_report, write_deploy_inventory

    lab_inv = lab.ensure(DEFAULT_HOSTS)
    work = tmp_path_factory.mktemp("deploy")
    inv = write_deploy_inventory(lab_inv, work)
    code, report, out = run_report("deploy", inv, work / "first.json", timeout=2400)
    assert code == 0, out[-4000:]
    _FLEET.update({"lab": lab_inv, "inv": inv, "work": work, "first": report})
    return _FLEET


def _fleet_needed_after(items: list, module) -> bool:
    """Whether a test run after the last one of `module` uses the shared fleet."""
    last = max(i for i, item in enumerate(items) if item.module is module)
    return any("deployed" in item.fixturenames for item in items[last + 1 :])


@pytest.fixture(scope="module", autouse=True)
def fleet_put_back(request):
    """After each module once the shared fleet exists and a later test uses it (test_models
    and test_replica reshape the lab under it, others change it on purpose), vfleet itself
    puts the fleet back: a `deploy` of its inventory (~3 s when nothing differs), and where
    that changed anything, one more, which must change nothing. So no module inherits what
    another left, and one that left the fleet changed is named in the run's output."""
    yield
    if not _FLEET or request.session.shouldfail or request.session.shouldstop:
        return
    if not _fleet_needed_after(request.session.items, request.module):
        return  # no test after this module uses the shared fleet: a put-back would serve none
    from tests.integration.deploy_env import run_report

    module = request.module.__name__.rsplit(".", 1)[-1]
    work = _FLEET["work"] / f"after-{module}"
    work.mkdir(exist_ok=True)
    code, report, out = run_report("deploy", _FLEET["inv"], work / "deploy.json", timeout=2400)
    assert code == 0, f"the fleet could not be put back after {module}: {out[-3000:]}"
    if not report["summary"]["changed"]:
        return
    code, report, out = run_report("deploy", _FLEET["inv"], work / "again.json", timeout=600)
    assert code == 0 and not report["summary"]["changed"], (
        f"after {module}, a deploy put the fleet back but the next one changed it again: {out[-3000:]}"
    )
    # at module teardown pytest still captures fd 1: without this the line goes to the last test's capture
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"[fleet] {module} left the fleet changed; a deploy put it back")
