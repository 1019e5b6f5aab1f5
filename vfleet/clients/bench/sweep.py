"""The sweep: load levels one after another against one OpenAI-compatible endpoint, each
bounded by a request count and a time limit (whichever comes first), warm-up requests first
and not counted, the server's /metrics sampled meanwhile.

Concurrency levels keep N requests in flight (N workers, each sends the next as soon as its
last one ended). Rate levels send with Poisson arrivals (exponential gaps from a seeded
generator) at R requests/s, however many are in flight, up to --max-inflight (arrivals that
would pass it wait, and the level says how many did). Requests are asyncio tasks on one
httpx.AsyncClient sized to the level, so the generator itself is not the bottleneck
(benchmarks/loadgen_ceiling.py measures how far it goes)."""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import httpx

from vfleet.clients.bench.client import Endpoint, RequestRecord, request_body, send
from vfleet.clients.bench.prompts import FilePrompts, SyntheticPrompts
from vfleet.clients.bench.server_metrics import MetricsSampler
from vfleet.clients.bench.stats import summarize


def cpu_and_wait() -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable but waiting for one) of this thread, the one the
    event loop runs on (Linux schedstat; None elsewhere). The wait is how long the load
    generator itself was kept from reading: a stream it reads late looks like a burst."""
    try:
        on_cpu, waiting = open("/proc/thread-self/schedstat").read().split()[:2]
    except (OSError, ValueError):
        return None
    return int(on_cpu) / 1e9, int(waiting) / 1e9


@dataclass
class Level:
    mode: str  # concurrency | rate
    value: float  # N in flight, or requests/s

    @property
    def label(self) -> str:
        v = int(self.value) if float(self.value).is_integer() else self.value
        return f"c={v}" if self.mode == "concurrency" else f"{v} req/s"


@dataclass
class SweepSettings:
    requests: int | None = None  # measured requests per level (None: auto)
    seconds: float | None = None  # measured seconds per level (None: no time goal)
    max_seconds: float = 600.0  # hard cap per level, whatever else is asked
    warmup: int | None = None  # None: one per concurrent slot (1 s worth for rates)
    output_len: int = 128
    ignore_eos: bool = True  # fixed output length; False: natural ends
    timeout_s: float = 300.0  # per request
    max_inflight: int = 1024  # rate mode cap
    seed: int = 0
    metrics_interval_s: float = 1.0
    max_num_seqs: int | None = None  # of the hosts behind the target, summed (None: not set everywhere)

    def measured_for(self, level: Level) -> int | None:
        if self.requests:
            return int(self.requests)
        if self.seconds:
            return None
        # auto: four waves of a concurrency level, ten seconds' worth of a rate level
        return max(32, int(4 * level.value) if level.mode == "concurrency" else int(10 * level.value))

    def warmup_for(self, level: Level) -> int:
        if self.warmup is not None:
            return int(self.warmup)
        return max(1, math.ceil(level.value))


@dataclass
class Sweep:
    endpoint: Endpoint
    prompts: SyntheticPrompts | FilePrompts
    levels: list[Level]
    settings: SweepSettings = field(default_factory=SweepSettings)
    metrics_urls: dict[str, str] = field(default_factory=dict)
    on_progress: Callable[[Level, int, int | None, float, RequestRecord], None] | None = None
    on_level_start: Callable[[Level, int | None, int], None] | None = None
    records: dict[str, list[RequestRecord]] = field(default_factory=dict)
    _next_index: int = 0

    # -- requests -------------------------------------------------------------------------
    def _body(self, index: int) -> dict[str, Any]:
        p = self.prompts.get(index)
        return request_body(
            self.endpoint.model, p.messages, p.max_tokens or self.settings.output_len, self.settings.ignore_eos
        )

    def _take_index(self) -> int:
        i = self._next_index
        self._next_index += 1
        return i

    # -- one level --------------------------------------------------------------------------
    async def _level(self, level: Level) -> tuple[list[RequestRecord], dict[str, Any]]:
        s = self.settings
        n_measured = s.measured_for(level)
        n_warm = s.warmup_for(level)
        total = None if n_measured is None else n_measured + n_warm
        size = int(level.value) if level.mode == "concurrency" else s.max_inflight
        limits = httpx.Limits(max_connections=size + 4, max_keepalive_connections=size + 4)
        timeout = httpx.Timeout(s.timeout_s, connect=min(30.0, s.timeout_s))
        records: list[RequestRecord] = []
        issued = 0
        t_start = time.perf_counter()
        # time budget: the measured seconds (after the warm-up finished) but never past max_seconds
        hard_deadline = t_start + s.max_seconds
        goal_deadline: list[float | None] = [None]
        info: dict[str, Any] = {"warmup": n_warm, "target_requests": n_measured, "stopped_by": "count"}

        def may_issue() -> bool:
            now = time.perf_counter()
            if n_measured is not None and issued >= n_measured:
                return False
            if now >= hard_deadline:
                info["stopped_by"] = "max_seconds"
                return False
            if goal_deadline[0] is not None and now >= goal_deadline[0]:
                info["stopped_by"] = "seconds"
                return False
            return True

        def issue() -> tuple[int, bool]:
            nonlocal issued
            issued += 1
            return self._take_index(), False

        def done(rec: RequestRecord) -> None:
            records.append(rec)
            if self.on_progress:
                self.on_progress(level, len(records), total, time.perf_counter() - t_start, rec)

        sched_start = cpu_and_wait()
        sampler = MetricsSampler(dict(self.metrics_urls), self.endpoint.headers(), s.metrics_interval_s)
        stop = asyncio.Event()
        sampler_task = asyncio.create_task(sampler.run(stop)) if self.metrics_urls else None
        async with httpx.AsyncClient(limits=limits, timeout=timeout, verify=self.endpoint.verify) as client:
            await self._warm_up(client, n_warm, size, done)
            if s.seconds:
                goal_deadline[0] = time.perf_counter() + s.seconds
            if level.mode == "concurrency":

                async def worker() -> None:
                    while may_issue():
                        idx, warm = issue()
                        done(await send(client, self.endpoint, self._body(idx), idx, warm, s.timeout_s))

                await asyncio.gather(*(worker() for _ in range(int(level.value))))
            else:
                rng = random.Random(f"{s.seed}:rate:{level.value}")
                sem = asyncio.Semaphore(s.max_inflight)
                tasks: set[asyncio.Task] = set()
                delayed = 0
                next_at = time.perf_counter()

                async def one(idx: int, warm: bool) -> None:
                    try:
                        done(await send(client, self.endpoint, self._body(idx), idx, warm, s.timeout_s))
                    finally:
                        sem.release()

                while may_issue():
                    wait = next_at - time.perf_counter()
                    if wait > 0:
                        await asyncio.sleep(wait)
                        if not may_issue():
                            break
                    if sem.locked():
                        delayed += 1
                    await sem.acquire()
                    idx, warm = issue()
                    t = asyncio.create_task(one(idx, warm))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
                    next_at += rng.expovariate(level.value)
                if tasks:
                    await asyncio.gather(*list(tasks))
                info["arrivals_delayed_by_max_inflight"] = delayed
        stop.set()
        if sampler_task:
            await sampler_task
            info["server"] = sampler.summary()
        info["wall_s"] = round(time.perf_counter() - t_start, 3)
        sched_end = cpu_and_wait()
        if sched_start and sched_end:
            info["client"] = {
                "cpu_s": round(sched_end[0] - sched_start[0], 3),
                "runqueue_wait_s": round(sched_end[1] - sched_start[1], 3),
            }
        return records, info

    async def _warm_up(
        self, client: httpx.AsyncClient, count: int, size: int, done: Callable[[RequestRecord], None]
    ) -> None:
        """Warm-up requests, every one finished before the first measured one is sent (as
        `vllm bench serve` does): run in the measured window they made it hold more work than
        it counts (on the H200, throughput 14% low at concurrency 16 with 4 of 68 in it)."""
        slots = asyncio.Semaphore(max(1, size))

        async def one() -> None:
            async with slots:
                idx = self._take_index()
                done(await send(client, self.endpoint, self._body(idx), idx, True, self.settings.timeout_s))

        await asyncio.gather(*(one() for _ in range(count)))

    def run_level(self, level: Level) -> dict[str, Any]:
        if self.on_level_start:
            s = self.settings
            m = s.measured_for(level)
            self.on_level_start(level, None if m is None else m + s.warmup_for(level), s.warmup_for(level))
        records, info = asyncio.run(self._level(level))
        self.records[level.label] = records
        out = {"mode": level.mode, "value": level.value, "label": level.label, **summarize(records), **info}
        if self.settings.max_num_seqs:  # what the level's verdict compares running with (output.level_numbers)
            out["max_num_seqs"] = self.settings.max_num_seqs
        starved(out, len(records))
        return out


STARVED_SHARE = 0.05  # of E2E p50: past it, the client's own wait shows in its timings


def starved(level: dict[str, Any], n_requests: int) -> None:
    """Mark a level whose load generator waited for a CPU for a sizeable share of each request
    (on the 2-core lab: the whole stream, read in one burst at the end, TPOT ~0; the wire, see
    vfleet/clients/bench/wire.py, showed the server streaming all along). Its throughput stands (the
    server's `usage` over wall time), its TTFT/TPOT/ITL do not."""
    client, e2e = level.get("client"), (level.get("e2e_ms") or {}).get("p50")
    if not client or not n_requests or not e2e:
        return
    client["wait_per_request_ms"] = round(client["runqueue_wait_s"] * 1000 / n_requests, 3)
    client["starved"] = client["wait_per_request_ms"] > STARVED_SHARE * e2e
