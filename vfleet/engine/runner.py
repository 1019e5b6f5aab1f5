"""The parallel runner: one Play per task invocation, steps run on every active host through
a bounded worker pool.

Why not Fabric's ThreadingGroup: it has no worker limit, no timeout and no notion of a host
leaving the run. Here a host that fails or cannot be reached leaves the play and the others go
on, until the share of failed hosts passes max_fail_percentage; then the play aborts."""

from __future__ import annotations

import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, TypeVar

from rich.console import Console
from rich.markup import escape

from vfleet.engine.connection import (
    CommandError,
    CommandResult,
    ConnectionSettings,
    HostConnection,
    UnreachableError,
    open_connection,
)
from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import Host
from vfleet.engine.results import HostResult, Status, StepResult, keep


class HostFailed(VfleetError):
    """Raised inside a step to fail this host with a message (and keep the others going)."""

    def __init__(self, message: str, data: dict[str, Any] | None = None):
        super().__init__(message)
        self.data = data or {}


class PlayAborted(VfleetError):
    """max_fail_percentage was passed: no further steps run on any host."""


@dataclass
class RunOptions:
    forks: int = 10
    check: bool = False
    diff: bool = False
    connect_timeout: float | None = None
    command_timeout: float | None = None
    host_key_checking: bool | None = None  # None: each host's own setting (default on)
    max_fail_percentage: float | None = None  # None: from inventory vars, else 100 (never abort)
    verbose: bool = False


STATUS_STYLE = {
    Status.OK: "green",
    Status.CHANGED: "yellow",
    Status.FAILED: "bold red",
    Status.UNREACHABLE: "bold red",
    Status.SKIPPED: "cyan",
}


class HostContext:
    """What a step function gets for one host: its typed config (whatever the Play's
    `configure` made of the host: the engine does not look inside), a lazily opened
    connection, the run options, and a place to record results and notify handlers.

    Notifications persist across steps, as Ansible's handlers do: the weights step can notify
    the restart that only the service step knows how to do, and it runs once, there."""

    def __init__(self, play: "Play", host: Host, config: Any = None):
        self.play = play
        self.host = host
        self.config = config
        self.result = play.results[host.name]
        self.step_name = ""
        self._conn: HostConnection | None = None
        self.notified: list[str] = []

    # -- properties a step reads -------------------------------------------------------
    @property
    def name(self) -> str:
        return self.host.name

    @property
    def vars(self) -> dict[str, Any]:
        """The merged inventory vars; the engine reads only its own (connection) settings."""
        return self.host.vars

    @property
    def check(self) -> bool:
        return self.play.options.check

    @property
    def diff(self) -> bool:
        return self.play.options.diff

    # -- connection ----------------------------------------------------------------------
    def settings(self) -> ConnectionSettings:
        v, o = self.host.vars, self.play.options
        hkc = v.get("host_key_checking", True) if o.host_key_checking is None else o.host_key_checking
        return ConnectionSettings(
            address=self.host.address,
            user=self.host.user,
            port=self.host.port,
            key_file=self.host.key_file,
            connect_timeout=float(o.connect_timeout or v.get("connect_timeout", 10)),
            command_timeout=float(o.command_timeout or v.get("command_timeout", 600)),
            host_key_checking=bool(hkc),
            known_hosts_file=v.get("known_hosts_file"),
            become=bool(v.get("become", False)),
        )

    @property
    def conn(self) -> HostConnection:
        if self._conn is None:
            self._conn = open_connection(self.host.name, self.host.connection, self.settings())
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def run(self, command: str, *, timeout: float | None = None, stdin: str | None = None) -> CommandResult:
        """Run a command as is (no check-mode logic: operations decide what is safe)."""
        return self.conn.run(command, timeout=timeout, stdin=stdin)

    def must(self, command: str, *, what: str, timeout: float | None = None, stdin: str | None = None) -> CommandResult:
        """Run a command that has to succeed, else fail the host with its last output lines."""
        r = self.run(command, timeout=timeout, stdin=stdin)
        if r.timed_out:
            raise HostFailed(f"{what}: timed out after {timeout or self.settings().command_timeout:g}s")
        if not r.ok:
            raise HostFailed(f"{what}: exit {r.exited}: {r.tail()}")
        return r

    # -- results ------------------------------------------------------------------------
    def record(
        self,
        action: str,
        target: str,
        status: Status,
        message: str = "",
        *,
        diff: str = "",
        elapsed_s: float = 0.0,
        data: dict[str, Any] | None = None,
        notify: str | Iterable[str] | None = None,
    ) -> StepResult:
        res = StepResult(self.step_name, action, target, status, message, diff, elapsed_s, data or {})
        self.result.add(res)
        if status is Status.CHANGED and notify:
            self.notify(*([notify] if isinstance(notify, str) else list(notify)))
        self.play.print_result(self.host.name, res)
        return res

    def notify(self, *handlers: str) -> None:
        for h in handlers:
            if h not in self.notified:
                self.notified.append(h)

    # -- progress -----------------------------------------------------------------------
    def progress(self, completed: float, total: float | None = None, description: str | None = None) -> None:
        self.play.progress.update(self.host.name, completed, total, description)


StepFn = Callable[[HostContext], Any]
ConfigFactory = Callable[[Host], Any]
T = TypeVar("T")


class Play:
    """One task invocation over a set of hosts: runs steps, tracks who is still in, recaps.

    `configure` gives each host's context its config (the caller's model of the run: the
    engine only hands it on), called once per host here."""

    def __init__(
        self,
        task: str,
        hosts: list[Host],
        options: RunOptions | None = None,
        console: Console | None = None,
        configure: ConfigFactory | None = None,
    ):
        self.task = task
        self.hosts = list(hosts)
        self.options = options or RunOptions()
        self.console = console or Console(stderr=False, highlight=False)
        self.results: dict[str, HostResult] = {h.name: HostResult(h.name) for h in self.hosts}
        self.contexts: dict[str, HostContext] = {
            h.name: HostContext(self, h, configure(h) if configure else None) for h in self.hosts
        }
        self.active: list[str] = [h.name for h in self.hosts]
        # the hosts --limit chose; a play may hold others only to act through them (the
        # gateways that drain a host during a rolling restart)
        self.selected: list[str] = [h.name for h in self.hosts]
        self.aborted: str | None = None
        self.started = time.monotonic()
        self.wall_started = time.time()
        self._lock = threading.Lock()
        # The run's own sections of the report (Reported records, in the order first noted)
        # and what its steps tell later steps, one typed record per kind: as HostResult's.
        self.data: dict[str, Any] = {}
        self.notes: dict[type, Any] = {}
        from vfleet.engine.progress import HostProgress

        self.progress = HostProgress(self.console)

    # -- what steps pass on ----------------------------------------------------------------
    def note(self, record: Any) -> None:
        keep(record, self.notes, self.data)

    def get(self, kind: type[T]) -> T | None:
        return self.notes.get(kind)

    # -- output -------------------------------------------------------------------------
    def print_result(self, host: str, res: StepResult) -> None:
        if res.status is Status.OK and not self.options.verbose:
            return
        style = STATUS_STYLE[res.status]
        msg = f" {res.message}" if res.message else ""
        target = f" {res.target}" if res.target else ""
        text = escape(f"[{host}] {res.action}{target}{msg}")
        with self._lock:
            self.console.print(f"[{style}]{res.status.value}[/]: {text}", markup=True, highlight=False, soft_wrap=True)
            if res.diff and self.options.diff:
                self.console.print(res.diff, markup=False, highlight=False, soft_wrap=True)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Print to the play's console without interleaving with other hosts' lines."""
        kwargs.setdefault("highlight", False)
        with self._lock:
            self.console.print(*objects, **kwargs)

    def banner(self, text: str) -> None:
        with self._lock:
            self.console.rule(f"[bold]{text}", align="left")

    # -- failure budget ------------------------------------------------------------------
    def max_fail_percentage(self, among: list[str] | None = None, default: float = 100.0) -> float:
        """--max-fail-percentage, else the lowest the inventory sets for the hosts (all of the
        play's, or `among`), else `default`."""
        if self.options.max_fail_percentage is not None:
            return float(self.options.max_fail_percentage)
        values = [h.vars.get("max_fail_percentage") for h in self.hosts if among is None or h.name in among]
        values = [v for v in values if v is not None]
        return float(min(values)) if values else default

    def failed_hosts(self) -> list[str]:
        return [n for n, r in self.results.items() if r.failed]

    def _check_budget(self, among: list[str] | None = None) -> None:
        pool = among if among is not None else [h.name for h in self.hosts]
        if not pool:
            return
        failed = [n for n in pool if self.results[n].failed]
        pct = 100.0 * len(failed) / len(pool)
        limit = self.max_fail_percentage()
        if failed and pct > limit:
            self.aborted = (
                f"{len(failed)} of {len(pool)} hosts failed ({pct:.0f}% > "
                f"max_fail_percentage {limit:g}%): stopping the run"
            )
            self.console.print(f"[bold red]ABORT[/]: {self.aborted}")

    # -- running ------------------------------------------------------------------------
    def _fail(self, ctx: HostContext, status: Status, message: str, data: dict | None = None) -> None:
        ctx.record(ctx.step_name or "connect", "", status, message, data=data)
        with self._lock:
            if ctx.name in self.active:
                self.active.remove(ctx.name)

    def _call(self, ctx: HostContext, fn: StepFn, label: str) -> Any:
        try:
            return fn(ctx)
        except UnreachableError as exc:
            self._fail(ctx, Status.UNREACHABLE, str(exc))
        except HostFailed as exc:
            self._fail(ctx, Status.FAILED, str(exc), exc.data)
        except CommandError as exc:
            self._fail(ctx, Status.FAILED, str(exc))
        except VfleetError as exc:
            self._fail(ctx, Status.FAILED, str(exc))
        except Exception as exc:  # a bug: keep the run going, keep the trace in the report
            self._fail(
                ctx,
                Status.FAILED,
                f"{label}: internal error {type(exc).__name__}: {exc}",
                {"traceback": traceback.format_exc()},
            )
        return None

    def run_step(
        self,
        name: str,
        fn: StepFn,
        *,
        hosts: list[str] | None = None,
        handlers: dict[str, StepFn] | None = None,
        forks: int | None = None,
        budget_among: list[str] | None = None,
    ) -> dict[str, Any]:
        """Run fn on every active host (or the given subset), at most `forks` at a time.
        Handlers notified during this step or an earlier one run once per host right after
        this step, if it offers them (else they stay pending). Returns
        {host: fn's return value} for the hosts that did not fail."""
        if self.aborted:
            raise PlayAborted(self.aborted)
        targets = [n for n in (hosts if hosts is not None else list(self.active)) if n in self.active]
        out: dict[str, Any] = {}
        if not targets:
            return out
        self.banner(f"{name}")

        def one(host_name: str) -> None:
            ctx = self.contexts[host_name]
            ctx.step_name = name
            value = self._call(ctx, fn, name)
            if host_name in self.active:
                out[host_name] = value
                for h in [h for h in ctx.notified if handlers and h in handlers]:
                    if host_name in self.active:
                        ctx.step_name = f"{name}: handler {h}"
                        ctx.notified.remove(h)
                        self._call(ctx, handlers[h], h)

        workers = max(1, min(forks or self.options.forks, len(targets)))
        with self.progress.running():
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vfleet") as pool:
                list(pool.map(one, targets))
        self._check_budget(budget_among)
        for n in list(out):
            if n not in self.active:
                out.pop(n)
        return out

    def finish(self) -> None:
        for ctx in self.contexts.values():
            try:
                ctx.close()
            except Exception:
                pass
            r = self.results[ctx.name]
            if r.finished is None:
                r.finished = time.monotonic()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    @property
    def exit_code(self) -> int:
        return 1 if (self.failed_hosts() or self.aborted) else 0
