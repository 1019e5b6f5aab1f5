"""One streamed chat completion, timed: when each content chunk arrived, and what the server
says it counted (`usage`, asked for with stream_options.include_usage). Token counts come
only from `usage`: a chunk may carry several tokens (or none), so counting chunks is wrong.
Every failure is classified by kind, so a level's errors read as {"http_503": 4, ...}."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse


@dataclass
class RequestRecord:
    index: int
    start: float  # time.perf_counter() when sent
    end: float = 0.0
    ok: bool = False
    error: str | None = None  # kind: http_503, timeout, connect, truncated, no_usage, ...
    detail: str = ""
    ttft: float | None = None  # seconds from start to the first content chunk
    chunk_times: list[float] = field(default_factory=list)  # seconds from start, content chunks
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    warmup: bool = False

    @property
    def e2e(self) -> float:
        return self.end - self.start

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first (vLLM's definition)."""
        n = self.completion_tokens
        if self.ttft is None or not n or n < 2:
            return None
        return (self.e2e - self.ttft) / (n - 1)

    @property
    def itls(self) -> list[float]:
        t = self.chunk_times
        return [b - a for a, b in zip(t, t[1:])]


@dataclass
class Endpoint:
    base_url: str  # http://host:port
    model: str
    api_key: str | None = None
    path: str = "/v1/chat/completions"
    verify: str | bool = True  # httpx's verify=: a TLS gateway's CA file (HostConfig.gateway_verify)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


def request_body(
    model: str, messages: list[dict[str, str]], max_tokens: int | None, ignore_eos: bool, temperature: float = 0.0
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": temperature,
    }
    if max_tokens:
        body["max_tokens"] = int(max_tokens)
    if ignore_eos:
        body["ignore_eos"] = True  # vLLM's extension: generate exactly max_tokens
    return body


def error_message(response: httpx.Response) -> str:
    """The server's own words from an error reply: vLLM's {"error": {"message": ...}} (or the
    older top-level {"message": ...}), else the body's text."""
    try:
        body = response.json()
        err = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(err.get("message"), str):
            return err["message"]
    except (ValueError, AttributeError):
        pass
    return response.text.strip()


def _kind(exc: Exception) -> str:
    if isinstance(exc, (httpx.TimeoutException, TimeoutError)):
        return "timeout"
    if isinstance(exc, SSEError):
        return "not_sse"  # a 200 that is not an event stream
    if isinstance(exc, httpx.ConnectError):
        return "connect"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        return "disconnected"
    if isinstance(exc, (json.JSONDecodeError, TypeError, AttributeError)):
        return "bad_json"
    return type(exc).__name__


async def send(
    client: httpx.AsyncClient,
    ep: Endpoint,
    body: dict[str, Any],
    index: int,
    warmup: bool = False,
    total_timeout_s: float | None = None,
) -> RequestRecord:
    """One request; never raises for what the server or network did. total_timeout_s bounds
    the whole request (httpx's timeouts bound each read, not a slow stream)."""
    rec = RequestRecord(index, time.perf_counter(), warmup=warmup)
    done = False
    try:
        async with (
            asyncio.timeout(total_timeout_s),
            aconnect_sse(client, "POST", ep.base_url + ep.path, json=body, headers=ep.headers()) as es,
        ):
            if es.response.status_code != 200:
                await es.response.aread()
                rec.error = f"http_{es.response.status_code}"
                rec.detail = error_message(es.response)[:400]
                return rec
            async for sse in es.aiter_sse():
                now = time.perf_counter() - rec.start
                if sse.data == "[DONE]":
                    done = True
                    break
                data = json.loads(sse.data)
                if "error" in data:
                    rec.error, rec.detail = "stream_error", str(data["error"])[:200]
                    return rec
                for choice in data.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content") or delta.get("reasoning_content"):
                        if rec.ttft is None:
                            rec.ttft = now
                        rec.chunk_times.append(now)
                usage = data.get("usage")
                if usage:
                    rec.prompt_tokens = usage.get("prompt_tokens")
                    rec.completion_tokens = usage.get("completion_tokens")
    except (httpx.HTTPError, json.JSONDecodeError, TimeoutError, TypeError, AttributeError) as exc:
        rec.error, rec.detail = _kind(exc), f"{type(exc).__name__}: {exc}"[:200]
        return rec
    finally:
        rec.end = time.perf_counter()
    if not done:
        rec.error, rec.detail = "truncated", "stream ended before [DONE]"
    elif rec.completion_tokens is None:
        rec.error, rec.detail = "no_usage", "no usage in the stream (server ignores stream_options.include_usage)"
    elif rec.ttft is None and rec.completion_tokens:
        rec.error, rec.detail = "no_content", "usage counted tokens but no content chunk came"
    else:
        rec.ok = True
    return rec
