"""Rolling restarts and upgrades that drop no request (Ansible's serial + pre/post tasks).

Per host, in batches: take it out of every gateway (`down` + nginx -t + graceful reload),
wait until its in-flight requests finish (vllm:num_requests_running reaches 0), stop it
(SIGTERM; vLLM drains for --shutdown-timeout where it has it), switch the venv for an
upgrade (installed beforehand, while the host still served), start it, wait until it serves
(port refused = loading, then /health, the model listed, a real completion), and put it
back. Never more hosts out than the batch allows, never the last healthy one. A host that
does not come back is rolled back (previous venv and unit) and left out if still broken; a
batch whose failures pass the budget stops the run. With a gate (_gate.py), the first batch
is a canary: judged before and after its restart, and kept out of the gateways until judged.
Batches are planned in _batches.py. Before the first batch it says what the batches should
take, from each host's last measured restart, and each restart that serves is recorded on its
host for the next run (_estimate.py, vfleet/roles/service/_measured_restart.py).

A controller that died mid-run leaves at most a drained host behind; the next run starts by
undraining every drained host that is healthy, so re-running converges."""

from __future__ import annotations

import dataclasses
import json
import posixpath
import shlex
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import httpx
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from vfleet.clients import smoke
from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError
from vfleet.engine.facts import FileFact, LinkFact, gather
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed, Play
from vfleet.engine.systemd import start
from vfleet.roles.gateway import Backend, nginx as gateway
from vfleet.roles.install import venv as vllm_install
from vfleet.roles.rollout._batches import plan_batches
from vfleet.roles.rollout._estimate import estimate, expect_line, measured_of, spent_s, total_line
from vfleet.roles.rollout._lines import failed, host_lines, waiting
from vfleet.roles.rollout._records import RestartTimes, RolloutInfo, RolloutSummary
from vfleet.roles.service import measured_restart, readiness, unit as service

q = shlex.quote

INFLIGHT_PROBE = r"""
import json, sys, urllib.request
p = json.loads(sys.stdin.read())
try:
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % p["port"], timeout=5) as r:
        text = r.read().decode()
except Exception as e:
    print("unavailable %s" % type(e).__name__); sys.exit(0)
total = 0.0
seen = False
for line in text.splitlines():
    if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting")):
        seen = True
        total += float(line.rsplit(" ", 1)[1])
print("inflight %d" % total if seen else "unavailable no-gauge")
"""


class BatchGate(Protocol):
    """What judges the first batch, the canary, of a rollout (the eval gate: _gate.py). Each
    hook returns None to go on, else why the rollout stops there."""

    def before(self, rollout: Rollout, batch: list[str]) -> str | None: ...

    def after(self, rollout: Rollout, batch: list[str]) -> str | None: ...


class BatchCache(Protocol):
    """What copies the first batch's torch.compile cache to the later hosts before they restart
    (vfleet/roles/compile_cache/_share.py); returns the lines of the hosts left to compile their own."""

    def share(self, sources: list[str], targets: list[str]) -> list[str]: ...


@dataclass
class Rollout:
    """`backends` are every vLLM host behind the gateways, selected by --limit or not: "the
    last healthy host" is judged against all of them."""

    play: Play
    backends: list[Backend]
    vllm_hosts: list[str]
    gateways: list[str]
    upgrade: bool = False
    drain_timeout: float = 180.0
    drained: set[str] = field(default_factory=set)
    # deploy --batch: puts a host's saved unit, env, venv and weights back (vfleet.roles.rollout._rollback_point)
    restore: Callable[[HostContext], str] | None = None
    gate: BatchGate | None = None
    cache: BatchCache | None = None

    def __post_init__(self) -> None:
        self._gw_lock = threading.Lock()
        self._cond = threading.Condition(self._gw_lock)
        self.backend_names: set[str] = {b.name for b in self.backends}
        self.model_of: dict[str, str] = {b.name: b.model for b in self.backends}
        self.hosts_of: dict[str, set[str]] = {}  # model -> its hosts, so a drain does not scan the fleet
        for b in self.backends:
            self.hosts_of.setdefault(b.model, set()).add(b.name)
        self.out_of_service: set[str] = set()  # drained or failed: not serving through the gateways
        self.held: set[str] = set()  # restarted canaries the gate has yet to judge: they stay drained

    # -- gateway ---------------------------------------------------------------------------
    def _apply_drained(self) -> None:
        for gw in self.gateways:
            if gw in self.play.active:
                gateway.set_drained(self.play.contexts[gw], self.backends, set(self.drained))

    def read_state(self) -> None:
        """Union of the drained sets on every gateway (what an earlier run may have left)."""
        for gw in self.gateways:
            self.drained |= gateway.read_drained(self.play.contexts[gw])
        self.drained &= self.backend_names

    def peers(self, name: str) -> set[str]:
        """The hosts serving the same model as `name` (itself included)."""
        return self.hosts_of.get(self.model_of.get(name, ""), set())

    def drain(self, ctx: HostContext) -> float:
        t0 = time.monotonic()
        with self._cond:
            deadline = time.monotonic() + self.drain_timeout
            while not any(p != ctx.name and p not in self.out_of_service for p in self.peers(ctx.name)):
                if not self._cond.wait(timeout=max(0.1, deadline - time.monotonic())) and time.monotonic() > deadline:
                    raise HostFailed(
                        f"{ctx.name} is the last healthy host of model "
                        f"{self.model_of.get(ctx.name)!r} behind the gateways: waited "
                        f"{time.monotonic() - t0:.0f}s for another to serve, not taking it out"
                    )
            self.out_of_service.add(ctx.name)
            self.drained.add(ctx.name)
            self._apply_drained()
        return time.monotonic() - t0

    def undrain(self, ctx: HostContext) -> float:
        t0 = time.monotonic()
        with self._cond:
            self.drained.discard(ctx.name)
            self._apply_drained()
            self.out_of_service.discard(ctx.name)
            self._cond.notify_all()
        return time.monotonic() - t0

    # -- host --------------------------------------------------------------------------------
    def wait_inflight(self, ctx: HostContext) -> float:
        """Until vllm:num_requests_running + waiting is 0 (requests nginx already sent finish)."""
        t0 = time.monotonic()
        cfg: HostConfig = ctx.config

        def probe() -> str:
            r = ctx.run(
                f"{q(cfg.vllm_python)} -c {q(INFLIGHT_PROBE)}", stdin=json.dumps({"port": cfg.vllm_port}), timeout=30
            )
            return r.stdout.strip()

        state = Retrying(
            stop=stop_after_delay(self.drain_timeout),
            wait=wait_fixed(0.5),
            retry=retry_if_result(lambda s: s.startswith("inflight") and s != "inflight 0"),
            retry_error_callback=lambda rs: rs.outcome.result(),
        )(probe)
        if state.startswith("inflight") and state != "inflight 0":
            ctx.record(
                "drain",
                "in-flight",
                Status.OK,
                f"still {state.split()[1]} after {self.drain_timeout:g}s: "
                f"stopping anyway (vLLM's --shutdown-timeout lets them finish)",
            )
        return time.monotonic() - t0

    @staticmethod
    def _render_unit(ctx: HostContext, version: str) -> None:
        service.write_files(ctx, dataclasses.replace(ctx.config, vllm_version=version))

    def restart_host(self, ctx: HostContext, new_venv: str | None) -> RestartTimes:
        cfg: HostConfig = ctx.config
        t0 = time.monotonic()
        waiting(ctx, "vLLM to stop")
        stop_s = service.stop_and_check(ctx)  # also: no vLLM process left behind
        if new_venv:
            vllm_install.link_current(ctx, cfg, new_venv)
            self._render_unit(ctx, str(cfg.vllm_version))
        t1 = time.monotonic()
        waiting(ctx, "vLLM to be ready")
        start(ctx, cfg.unit, no_block=True)
        waited = self.wait_loaded(ctx, plain=not new_venv and self.restore is None)
        waiting(ctx, "a real completion from vLLM")
        try:  # the first answer of a host that loaded slowly is slow too: what is left of ready_timeout
            with httpx.Client(timeout=max(120.0, float(cfg.ready_timeout) - waited)) as client:
                chat = smoke.chat(client, smoke.host_target(cfg), max_tokens=4)
        except httpx.HTTPError as exc:  # a failure like any other: rolled back, not left drained
            raise HostFailed(f"ready but a real completion failed: {type(exc).__name__}: {exc}") from None
        if not smoke.reply_text(chat):
            raise HostFailed("ready but a real completion returned no text")
        return RestartTimes(ready_s=time.monotonic() - t1, restart_s=time.monotonic() - t0, stop_s=stop_s)

    @staticmethod
    def wait_loaded(ctx: HostContext, *, plain: bool) -> float:
        """wait_ready; on a plain restart (nothing to roll back to: same unit, same venv) a
        vLLM still loading at ready_timeout gets one more ready_timeout instead of a restart
        that would start its loading over: a host starved of CPU by the load the others
        serve (a small shared machine) loads slowly, not wrongly. A dead unit fails at once."""
        try:
            return readiness.wait_ready(ctx)
        except HostFailed:
            if not plain or readiness.probe(ctx).startswith("dead"):
                raise
        limit = float(ctx.config.ready_timeout)
        ctx.record(
            "ready",
            ctx.config.unit,
            Status.OK,
            f"still loading after {limit:g}s, alive, nothing to roll back "
            f"to (a plain restart): waiting up to {limit:g}s more instead of restarting it",
        )
        return limit + readiness.wait_ready(ctx)

    def rollback(self, ctx: HostContext, old_venv: str | None, old_version: str | None) -> bool:
        """Previous venv and unit, restart; True when the host serves again."""
        cfg: HostConfig = ctx.config
        unit = cfg.unit
        ctx.step_name = "rollback"
        try:
            ctx.run(f"systemctl stop -- {q(unit)}", timeout=float(cfg.shutdown_timeout) + 120)
            back = old_venv or "the same venv"
            if self.restore is not None:
                back = self.restore(ctx)
            elif old_venv:
                vllm_install.link_current(ctx, cfg, old_venv)
                self._render_unit(ctx, old_version or str(cfg.vllm_version))
            start(ctx, unit, no_block=True)
            readiness.wait_ready(ctx)
            ctx.record("rollback", unit, Status.CHANGED, f"back on {back}: serving")
            return True
        except HostFailed as exc:
            ctx.record("rollback", unit, Status.FAILED, f"still not serving after rollback: {exc}")
            return False

    def roll_back(self, ctx: HostContext, info: RolloutInfo, *, switched: bool) -> str:
        """A drained host back on what it served before (its previous venv when the restart
        `switched` it, or deploy's saved point), into the gateways once it serves: where it was left."""
        ok = self.rollback(ctx, info.from_venv if switched else None, info.from_version)
        info.rolled_back, info.serving = True, (info.from_venv if ok else None)
        if ok:
            self.undrain(ctx)
            return "rolled back and serving again"
        with self._cond:  # stays drained and out of service
            self._cond.notify_all()
        return "rolled back but still failing: left out of the gateways"

    def one_host(self, ctx: HostContext) -> None:
        info = RolloutInfo()
        ctx.result.note(info)
        cfg: HostConfig = ctx.config
        old_venv = _current_venv(ctx)
        new_venv = cfg.venv_path if self.upgrade else None
        if new_venv == old_venv:
            new_venv = None
        info.started, info.from_venv, info.from_version = True, old_venv, _venv_version(ctx, old_venv)
        waiting(ctx, "another host of its model to serve")
        try:
            info.drain_s = round(self.drain(ctx), 2)
        except HostFailed as exc:
            failed(ctx, info, exc)
            raise
        try:
            waiting(ctx, "its in-flight requests to finish")
            info.inflight_wait_s = round(self.wait_inflight(ctx), 2)
            info.took(self.restart_host(ctx, new_venv))
        except HostFailed as exc:
            failed(ctx, info, exc)
            raise HostFailed(f"did not come back ready: {exc}; {self.roll_back(ctx, info, switched=bool(new_venv))}")
        info.serving = new_venv or old_venv
        if ctx.name not in self.held:
            info.undrain_s = round(self.undrain(ctx), 2)
        record = measured_of(info)
        if record is not None:  # it restarted and serves: what the next rollout's estimate reads
            measured_restart.save(ctx, record)
        ctx.record(
            "rollout",
            ctx.name,
            Status.CHANGED,
            f"drain {info.drain_s:.1f}s, in-flight wait {info.inflight_wait_s:.1f}s, "
            f"restart {info.restart_s:.1f}s (ready {info.ready_s:.1f}s)",
        )

    # -- the run ---------------------------------------------------------------------------
    def converge(self) -> list[str]:
        """Undrain drained hosts that are healthy (left behind by a crashed run or a forgotten
        `vfleet drain`); the others stay out and count as out of service."""
        self.read_state()
        healed: list[str] = []
        for name in sorted(self.drained):
            ctx = self.play.contexts.get(name)
            try:
                healthy = ctx is not None and readiness.probe(ctx) == "ready"
            except VfleetError:
                healthy = False
            if healthy:
                ctx.step_name = "converge"
                self.undrain(ctx)
                healed.append(name)
                ctx.record("undrain", name, Status.CHANGED, "was left drained and is healthy: back in the gateways")
            else:
                self.out_of_service.add(name)
        return healed

    def run(self, batch_spec: str, max_fail_percentage: float) -> RolloutSummary:
        healed = self.converge()
        active = set(self.play.active)  # a list: one scan per host would be quadratic
        hosts = [h for h in self.vllm_hosts if h in active]
        sizes: dict[str, int] = {}
        for m in self.model_of.values():
            sizes[m] = sizes.get(m, 0) + 1
        batches = plan_batches(batch_spec, hosts, {h: self.model_of.get(h, "") for h in hosts}, sizes)
        expected_s = self.expect(batches)
        started = time.monotonic()
        stopped = None
        for n, batch in enumerate(batches, 1):
            gate = self.gate if n == 1 else None  # the first batch is the canary
            stopped = gate.before(self, batch) if gate else None
            if stopped is None:
                self.held = set(batch) if gate else set()
                self.play.run_step(
                    f"rollout batch {n}/{len(batches)}: {', '.join(batch)}",
                    self.one_host,
                    hosts=batch,
                    forks=len(batch),
                )
                failed = [h for h in batch if self.play.results[h].failed]
                if failed and 100.0 * len(failed) / len(batch) > max_fail_percentage:
                    stopped = (
                        f"batch {n}: {len(failed)} of {len(batch)} hosts failed "
                        f"(> {max_fail_percentage:g}%): not starting the next batch"
                    )
                stopped = (gate.after(self, batch) if gate else None) or stopped
            if stopped:
                self.play.print(f"[bold red]STOP[/]: {stopped}")
                break
            if n == 1 and len(batches) > 1:
                self.share_cache(batch, [h for later in batches[1:] for h in later])
        took_s = round(time.monotonic() - started, 1)
        serving = {h: self._serving(h) for h in self.vllm_hosts if h in self.play.contexts}
        spent = spent_s([self.play.results[h].get(RolloutInfo) for batch in batches for h in batch])
        return RolloutSummary(
            batches,
            stopped,
            healed,
            serving,
            sorted(self.drained),
            self.last_lines(stopped),
            expected_s,
            took_s,
            total_line(took_s, expected_s, spent, stopped=stopped is not None),
        )

    def share_cache(self, first: list[str], later: list[str]) -> None:
        """After the first batch serves and its eval gate passed (a regressed canary stopped the
        run before this), its compile cache goes to the later hosts before they restart. Without
        --gate nothing vouched for the answers of the graphs it compiled, so nothing is shared.
        A cache that cannot be shared costs a slower start, never the rollout: its problems are lines."""
        if self.cache is None or self.play.aborted:
            return
        if self.gate is None:
            self.play.print(
                "compile cache not shared: no --gate judged the first batch's answers (a cache is "
                "reused only after the eval gate passed, docs/compile-cache.md); the later hosts "
                "compile their own",
                markup=False,
            )
            return
        active = set(self.play.active)
        served = [h for h in first if h in active and not self.play.results[h].failed]
        try:
            self.cache.share(served, [h for h in later if h in active])
        except VfleetError as exc:
            self.play.print(f"compile cache not shared: {exc}; the later hosts compile their own", markup=False)

    def expect(self, batches: list[list[str]]) -> float | None:
        """Before the first batch: read each host's last measured restart (one round trip per
        host, in parallel) and print what the batches should take; that estimate in seconds, None
        when no host was measured yet (vfleet/roles/rollout/_estimate.py)."""
        if not batches:
            return None
        measured = self.play.run_step(
            "last measured restarts", measured_restart.read, hosts=[h for batch in batches for h in batch]
        )
        est = estimate(batches, measured)
        self.play.print(expect_line(est), markup=False, soft_wrap=True)
        return None if est.total_s is None else round(est.total_s, 1)

    def _serving(self, name: str) -> str | None:
        """Where a host serves from: what its restart left, else its `current` link now."""
        info = self.play.results[name].get(RolloutInfo)
        return (info.serving if info is not None and info.over else None) or _current_venv(self.play.contexts[name])

    def last_lines(self, stopped: str | None) -> list[str]:
        """One line per host to restart: what it waited for and how long (printed last)."""
        hosts = [h for h in self.vllm_hosts if h in self.play.results]
        return host_lines(hosts, self.play.results, stopped)


def _current_venv(ctx: HostContext) -> str | None:
    link = gather(ctx, {"current": LinkFact(ctx.config.current_link)})["current"]
    return None if link in (None, "OTHER") else link


def _venv_version(ctx: HostContext, venv: str | None) -> str | None:
    """The version a venv's install marker records (None: no venv, or no marker)."""
    if not venv:
        return None
    marker = gather(ctx, {"m": FileFact(posixpath.join(venv, vllm_install.MARKER), with_content=True)})["m"]
    try:
        return json.loads(marker.content or "")["spec"]["version"]
    except (ValueError, KeyError, TypeError):
        return None
