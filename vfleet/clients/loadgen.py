"""A bounded load generator for OpenAI-compatible endpoints: a steady stream of streamed and
non-streamed chat requests from a few worker threads, each request classified as ok, failed
(HTTP error, connection error) or truncated (a stream that ended before [DONE], or a body
without a finished choice). It proves a rolling restart dropped nothing (the rollout tests and
benchmarks/rolling_restart.py). Throughput and latency sweeps are `vfleet bench`'s job
(vfleet/clients/bench/). Loops are bounded in time and count, and stop by themselves."""

from __future__ import annotations

import contextlib
import itertools
import json
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import connect_sse


@dataclass
class RequestResult:
    started: float
    elapsed_s: float
    streamed: bool
    outcome: str  # ok | failed | truncated
    detail: str = ""
    ttft_s: float | None = None
    resent: int = 0


# A request whose connection closed before any response came back is sent again, once, as the
# OpenAI SDK does (it retries connection errors twice). Why: nginx closes the keep-alive
# connections of its old workers when it reloads (each drain and undrain), and a request a
# client wrote into one at that instant was read by no one; without this, a client that sends
# back to back counts nginx's reload as a failed request (2 of 9,143 in one CI run). A timeout
# is never resent (the request may be running), nor anything after a response began.
RESENDS = 1


class _NoResponse(Exception):
    """The connection failed before a response (status line) arrived."""


def _response(send):
    try:
        return send()
    except httpx.TimeoutException:
        raise
    except httpx.TransportError as exc:
        raise _NoResponse() from exc


@dataclass
class LoadGenerator:
    base_url: str
    model: str
    api_key: str | None = None
    concurrency: int = 4
    max_tokens: int = 16
    streamed_every: int = 2  # every 2nd request is streamed
    pause_s: float = 0.05
    timeout_s: float = 120.0
    max_requests: int = 100_000
    verify: str | bool = True  # httpx's verify=: a TLS gateway's CA file (HostConfig.gateway_verify)
    prompt: str = "Count to ten."  # what each request asks (a LoRA adapter is asked what it was trained on)
    results: list[RequestResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._counter = itertools.count()

    # -- one request ----------------------------------------------------------------------
    def _body(self, stream: bool) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": self.prompt}],
            "max_tokens": self.max_tokens,
            "ignore_eos": True,
            "stream": stream,
        }

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def one(self, client: httpx.Client, stream: bool) -> RequestResult:
        t0 = time.monotonic()
        for resent in range(RESENDS + 1):
            try:
                res = self._attempt(client, stream, t0)
            except _NoResponse as exc:
                failure = exc.__cause__
                continue
            res.resent = resent
            return res
        return RequestResult(
            t0, time.monotonic() - t0, stream, "failed", f"{type(failure).__name__}: {failure}"[:200], resent=RESENDS
        )

    def _attempt(self, client: httpx.Client, stream: bool, t0: float) -> RequestResult:
        url = f"{self.base_url}/v1/chat/completions"
        try:
            if not stream:
                r = _response(lambda: client.post(url, json=self._body(False), headers=self._headers()))
                if r.status_code != 200:
                    return RequestResult(t0, time.monotonic() - t0, False, "failed", _http_failure(r))
                choice = (r.json().get("choices") or [{}])[0]
                if not choice.get("finish_reason") or not (choice.get("message") or {}).get("content"):
                    return RequestResult(t0, time.monotonic() - t0, False, "truncated", "no finished choice")
                return RequestResult(t0, time.monotonic() - t0, False, "ok")
            ttft = None
            done = False
            finished = False
            with contextlib.ExitStack() as stack:
                es = _response(
                    lambda: stack.enter_context(
                        connect_sse(client, "POST", url, json=self._body(True), headers=self._headers())
                    )
                )
                if es.response.status_code != 200:
                    return RequestResult(t0, time.monotonic() - t0, True, "failed", _http_failure(es.response))
                for sse in es.iter_sse():
                    if sse.data == "[DONE]":
                        done = True
                        break
                    data = json.loads(sse.data)
                    if "error" in data:
                        return RequestResult(t0, time.monotonic() - t0, True, "failed", str(data["error"])[:200])
                    for ch in data.get("choices", []):
                        if ch.get("delta", {}).get("content") and ttft is None:
                            ttft = time.monotonic() - t0
                        finished = finished or bool(ch.get("finish_reason"))
            outcome = "ok" if (done and finished) else "truncated"
            return RequestResult(
                t0, time.monotonic() - t0, True, outcome, "" if outcome == "ok" else "stream ended before [DONE]", ttft
            )
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            return RequestResult(t0, time.monotonic() - t0, stream, "failed", f"{type(exc).__name__}: {exc}"[:200])

    # -- running ------------------------------------------------------------------------------
    def _worker(self) -> None:
        with httpx.Client(timeout=self.timeout_s, verify=self.verify) as client:
            while not self._stop.is_set():
                n = next(self._counter)
                if n >= self.max_requests:
                    return
                res = self.one(client, stream=(n % self.streamed_every == 0))
                with self._lock:
                    self.results.append(res)
                self._stop.wait(self.pause_s)

    def start(self) -> "LoadGenerator":
        for i in range(self.concurrency):
            t = threading.Thread(target=self._worker, name=f"load-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, wait_s: float = 180) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=wait_s)

    def run_for(self, seconds: float) -> dict[str, Any]:
        self.start()
        time.sleep(seconds)
        self.stop()
        return self.summary()

    def summary(self) -> dict[str, Any]:
        with self._lock:
            res = list(self.results)
        counts = {k: sum(r.outcome == k for r in res) for k in ("ok", "failed", "truncated")}
        lat = sorted(r.elapsed_s for r in res if r.outcome == "ok")
        ttft = sorted(r.ttft_s for r in res if r.ttft_s is not None and r.outcome == "ok")

        def pct(values: list[float]) -> dict[str, float] | None:
            if len(values) < 2:
                return None
            q = statistics.quantiles(values, n=100, method="inclusive")
            return {"p50": round(q[49], 4), "p90": round(q[89], 4), "p99": round(q[98], 4)}

        return {
            "requests": len(res),
            **counts,
            "streamed": sum(r.streamed for r in res),
            "resent": sum(r.resent for r in res),
            "latency_s": pct(lat),
            "ttft_s": pct(ttft),
            "errors": sorted({r.detail for r in res if r.outcome != "ok"})[:10],
        }


def _http_failure(r: httpx.Response) -> str:
    """ "HTTP 503" and the OpenAI-style error code of the body when it has one, which tells the
    gateway's own answers (model_unavailable: no host of the model could take it) from vLLM's."""
    try:
        r.read()
        error = r.json().get("error")
    except (ValueError, AttributeError, httpx.HTTPError):
        error = None
    code = error.get("code") if isinstance(error, dict) else None
    return f"HTTP {r.status_code}" + (f" {code}" if code is not None else "")
