"""Clients of the tenants' gateway in the lab proof of issue 24 (tests/integration/test_models.py)
and what they saw: an httpx transport that keeps every answer it receives (to look for vLLM's
key in them afterwards), one SDK chat as an Outcome, and load: requests from a few threads,
paced streams of them, their p95. Also imported by the noisy tenant's flood process
(tests/integration/noisy_flood.py)."""

from __future__ import annotations

import ssl
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import httpx
import openai
from tenacity import RetryError, Retrying, retry_if_exception_type, retry_if_result, stop_after_delay, wait_fixed

HELLO = [{"role": "user", "content": "hi"}]


class Seen:
    """Every answer (status, headers, body bytes) the module's clients received."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, httpx.Headers, bytearray]] = []
        self._lock = threading.Lock()

    def add(self, status: int, headers: httpx.Headers) -> bytearray:
        body = bytearray()
        with self._lock:
            self.answers.append((status, headers, body))
        return body

    def containing(self, secret: str) -> list[str]:
        """The answers that hold `secret` in a header or the body, described without it."""
        needle = secret.encode()
        return [
            f"{status} {dict(headers)} {bytes(body[:200])!r}".replace(secret, "<SECRET>")
            for status, headers, body in list(self.answers)
            if needle in bytes(body) or any(secret in v for v in headers.values())
        ]


class _Tee(httpx.SyncByteStream):
    """A response body passed on chunk by chunk (streams stay streams) and kept in `sink`."""

    def __init__(self, inner: httpx.SyncByteStream, sink: bytearray) -> None:
        self._inner, self._sink = inner, sink

    def __iter__(self):
        for chunk in self._inner:
            self._sink += chunk
            yield chunk

    def close(self) -> None:
        self._inner.close()


class _Recording(httpx.BaseTransport):
    def __init__(self, seen: Seen, verify: ssl.SSLContext | bool) -> None:
        self._inner, self._seen = httpx.HTTPTransport(verify=verify), seen

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        r = self._inner.handle_request(request)
        sink = self._seen.add(r.status_code, r.headers)
        return httpx.Response(
            r.status_code, headers=r.headers, stream=_Tee(r.stream, sink), extensions=r.extensions, request=request
        )

    def close(self) -> None:
        self._inner.close()


def http_client(seen: Seen, verify: ssl.SSLContext | bool = True, timeout: float = 60) -> httpx.Client:
    """An httpx client whose answers `seen` keeps (identity encoding: the kept bytes are the
    bytes a client reads)."""
    return httpx.Client(transport=_Recording(seen, verify), timeout=timeout, headers={"Accept-Encoding": "identity"})


@dataclass
class Outcome:
    """One request: when it was sent (monotonic), how long it took, what came back."""

    sent: float
    took: float
    status: int | None  # None: no HTTP answer (connection error, timeout)
    model: str = ""  # the X-Vfleet-Model header
    code: str | None = None  # the OpenAI-style error code
    retry_after: str | None = None
    body: bytes = b""  # error answers only
    detail: str = ""  # the model the body names, or what went wrong


def chat(client: openai.OpenAI, model: str, max_tokens: int = 4, **extra) -> Outcome:
    """One chat completion through the SDK, as an application sends it."""
    t0 = time.monotonic()
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=model, max_tokens=max_tokens, messages=HELLO, **extra
        )
        done = raw.parse()
        return Outcome(
            t0, time.monotonic() - t0, raw.status_code, raw.headers.get("x-vfleet-model", ""), detail=done.model
        )
    except openai.APIStatusError as e:
        h = e.response.headers
        return Outcome(
            t0,
            time.monotonic() - t0,
            e.status_code,
            h.get("x-vfleet-model", ""),
            e.code,
            h.get("retry-after"),
            e.response.content,
            e.response.text[:300],
        )
    except openai.APIConnectionError as e:
        return Outcome(t0, time.monotonic() - t0, None, detail=f"{type(e).__name__}: {e.__cause__ or e}")


def p95(outcomes: list[Outcome]) -> float:
    return statistics.quantiles([o.took for o in outcomes], n=20)[18]


def fixed(send: Callable[[], Outcome], threads: int, each: int) -> list[Outcome]:
    """`each` requests one after another from each of `threads` threads."""
    with ThreadPoolExecutor(threads) as pool:
        runs = list(pool.map(lambda _: [send() for _ in range(each)], range(threads)))
    return [o for run in runs for o in run]


class Stream:
    """`send` called over and over from `threads` threads while the `with` block runs, each
    thread at most once per `interval` seconds: paced, so that a flood answered at once with
    429s is not a busy loop taking the 2-core lab's CPU from the requests being measured."""

    def __init__(self, send: Callable[[], Outcome], threads: int = 1, interval: float = 0.0) -> None:
        self.send, self.interval = send, interval
        self.outcomes: list[Outcome] = []
        self.began = self.ended = 0.0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(threads)]

    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                out = self.send()
            except Exception as e:  # kept, not lost with the thread: the test shows it
                out = Outcome(t0, time.monotonic() - t0, None, detail=repr(e))
            self.outcomes.append(out)
            self._stop.wait(max(0.0, self.interval - out.took))

    def __enter__(self) -> Stream:
        self.began = time.monotonic()
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=180)
        self.ended = time.monotonic()

    def sorted(self) -> list[Outcome]:
        return sorted(self.outcomes, key=lambda o: o.sent)

    def after(self, t: float) -> list[Outcome]:
        return [o for o in self.sorted() if o.sent >= t]


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Call `check` every half second until it is true; an HTTP error counts as not yet."""
    try:
        Retrying(
            stop=stop_after_delay(timeout_s),
            wait=wait_fixed(0.5),
            retry=retry_if_result(lambda ok: not ok) | retry_if_exception_type(httpx.TransportError),
        )(check)
    except RetryError:
        raise AssertionError(f"{what}: not within {timeout_s:g} s") from None
