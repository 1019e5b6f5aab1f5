"""Smoke checks, from the controller like an operator with curl: per vLLM host and through
each gateway. /health, the served model listed, a chat completion with text, a streamed
completion with chunks (time to first token measured), Prometheus gauges on /metrics (and
/metrics NOT exposed by the gateway), a request without the API key refused, and two probes of
what the model says (vfleet/clients/smoke_probes.py: a reply that stops by itself, a reply that
satisfies a JSON schema)."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import httpx
from httpx_sse import connect_sse

from vfleet.clients import smoke_probes
from vfleet.clients.bench import server_metrics
from vfleet.config.extra_args import unsafe_warnings
from vfleet.config.hostconfig import HostConfig
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext, HostFailed

RUNNING_GAUGES = ("vllm:num_requests_running",)
PROMPT = [{"role": "user", "content": "Say hello to the fleet."}]
STREAMED = "streamed completion"


@dataclass(frozen=True)
class CheckResult:
    """One check against one target: passed, what it saw, and what it measured (`details`:
    the check's own fields in the report, e.g. completion_tokens, chunks, ttft_s)."""

    ok: bool
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "message": self.message, **self.details}


@dataclass
class SmokeResults:
    """Every smoke run on one host, per target label ("host", "gateway", "gateway <model>"
    for several models), check by check: the host's "smoke" section of the report."""

    REPORT_KEY: ClassVar[str] = "smoke"

    targets: dict[str, dict[str, CheckResult]] = field(default_factory=dict)

    def ttfts(self) -> list[tuple[str, float]]:
        """(label, seconds to the first streamed token) for each target whose stream had one."""
        out = []
        for label, checks in self.targets.items():
            streamed = checks.get(STREAMED)
            ttft = streamed.details.get("ttft_s") if streamed else None
            if ttft is not None:
                out.append((label, ttft))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {label: {name: c.to_dict() for name, c in checks.items()} for label, checks in self.targets.items()}


@dataclass
class Target:
    kind: str  # 'host' or 'gateway'
    base_url: str
    model: str
    api_key: str | None
    chat: bool = True  # False: the model has no chat template, /v1/completions only
    vllm_version: str | None = None  # the pinned version: a probe it cannot answer is skipped
    verify: str | bool = True  # httpx's verify=: a TLS gateway's CA file (HostConfig.gateway_verify)
    adapters: tuple[str, ...] = ()  # LoRA adapters served beside the model: listed, and a completion each
    speculative: bool = False  # speculative decoding on: its acceptance read from /metrics

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def endpoint(self) -> str:
        return "/v1/chat/completions" if self.chat else "/v1/completions"

    def body(self, max_tokens: int, **extra: Any) -> dict[str, Any]:
        prompt = {"messages": PROMPT} if self.chat else {"prompt": PROMPT[0]["content"]}
        return {"model": self.model, **prompt, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0, **extra}


def host_target(cfg: HostConfig) -> Target:
    """vLLM on one host, asked for the name it serves (served_model_name)."""
    return Target(
        "host",
        cfg.base_url,
        str(cfg.served_model_name),
        cfg.api_key,
        chat=not cfg.serve_completions_only,
        vllm_version=cfg.vllm_version,
        adapters=tuple(a.name for a in cfg.lora_adapters),
        speculative=cfg.speculative is not None,
    )


def gateway_target(cfg: HostConfig) -> Target:
    return Target(
        "gateway",
        cfg.gateway_url,
        str(cfg.served_model_name),
        cfg.api_key,
        chat=not cfg.serve_completions_only,
        vllm_version=cfg.vllm_version,
        verify=cfg.gateway_verify,
    )


def chat(client: httpx.Client, t: Target, *, max_tokens: int = 8) -> dict[str, Any]:
    """A chat completion (a plain completion for a model served without a chat template)."""
    r = client.post(f"{t.base_url}{t.endpoint}", headers=t.headers, json=t.body(max_tokens))
    r.raise_for_status()
    return r.json()


def reply_text(response: dict[str, Any]) -> str:
    choice = response["choices"][0]
    return (choice.get("message") or {}).get("content") or choice.get("text") or ""


def stream_chat(client: httpx.Client, t: Target, *, max_tokens: int = 8) -> dict[str, Any]:
    """A streamed chat completion: returns chunks with content, TTFT and whether [DONE] came
    (a stream cut before [DONE] is a truncated response)."""
    t0 = time.monotonic()
    ttft = None
    chunks = 0
    text = []
    done = False
    finish = None
    with connect_sse(
        client, "POST", f"{t.base_url}{t.endpoint}", headers=t.headers, json=t.body(max_tokens, stream=True)
    ) as es:
        es.response.raise_for_status()
        for sse in es.iter_sse():
            if sse.data == "[DONE]":
                done = True
                break
            data = json.loads(sse.data)
            for choice in data.get("choices", []):
                delta = choice.get("delta", {}).get("content") if t.chat else choice.get("text")
                if delta:
                    if ttft is None:
                        ttft = time.monotonic() - t0
                    chunks += 1
                    text.append(delta)
                finish = choice.get("finish_reason") or finish
    return {
        "chunks": chunks,
        "ttft_s": ttft,
        "done": done,
        "finish_reason": finish,
        "text": "".join(text),
        "elapsed_s": time.monotonic() - t0,
    }


def checks_for(t: Target) -> list[tuple[str, Callable[[httpx.Client, Target], tuple[bool, str, dict]]]]:
    def health(c: httpx.Client, t: Target):
        r = c.get(f"{t.base_url}/health")
        return r.status_code == 200, f"HTTP {r.status_code}", {}

    def models(c: httpx.Client, t: Target):
        r = c.get(f"{t.base_url}/v1/models", headers=t.headers)
        names = [m.get("id") for m in r.json().get("data", [])] if r.status_code == 200 else []
        missing = [n for n in (t.model, *t.adapters) if n not in names]
        return (
            not missing,
            f"HTTP {r.status_code}, models {names}" + (f", missing {missing}" if missing else ""),
            {"models": names},
        )

    def completion(c: httpx.Client, t: Target):
        d = chat(c, t)
        content = reply_text(d)
        n = d.get("usage", {}).get("completion_tokens", 0)
        return bool(content) and n > 0, f"{n} tokens: {content[:40]!r}", {"completion_tokens": n}

    def streamed(c: httpx.Client, t: Target):
        s = stream_chat(c, t)
        ok = s["chunks"] > 0 and s["done"]
        ttft = f"{s['ttft_s'] * 1000:.0f} ms" if s["ttft_s"] is not None else "n/a"
        return (
            ok,
            f"{s['chunks']} chunks, TTFT {ttft}, [DONE] {'yes' if s['done'] else 'missing'}",
            {"chunks": s["chunks"], "ttft_s": s["ttft_s"]},
        )

    def metrics(c: httpx.Client, t: Target):
        r = c.get(f"{t.base_url}/metrics", headers=t.headers)
        if t.kind == "gateway":
            return r.status_code in (403, 404), f"HTTP {r.status_code} (must not be exposed)", {}
        missing = [g for g in RUNNING_GAUGES if g not in r.text]
        return (
            r.status_code == 200 and not missing,
            f"HTTP {r.status_code}" + (f", missing {missing}" if missing else ""),
            {},
        )

    def auth(c: httpx.Client, t: Target):
        if not t.api_key:
            return True, "no api_key configured: the API is open (set api_key_file to protect it)", {"skipped": True}
        r = c.get(f"{t.base_url}/v1/models")
        return r.status_code == 401, f"without key: HTTP {r.status_code}", {}

    def adapter(name: str) -> Callable[[httpx.Client, Target], tuple[bool, str, dict]]:
        """A completion asked of one LoRA adapter by its name: vLLM loads it on first use, so
        a wrong path or rank shows here, not at a client's first request."""

        def check(c: httpx.Client, t: Target):
            ok, msg, data = completion(c, dataclasses.replace(t, model=name))
            return ok, msg, {**data, "adapter": name}

        return check

    checks = [
        ("/health", health),
        ("/v1/models", models),
        ("chat completion", completion),
        (STREAMED, streamed),
        ("/metrics", metrics),
        ("api key required", auth),
    ]

    def speculative(c: httpx.Client, t: Target):
        """After the completions above: vLLM exports its draft and accepted token counters only
        while speculative decoding runs, so their absence means the config did not take."""
        r = c.get(f"{t.base_url}/metrics", headers=t.headers)
        counts = server_metrics.acceptance(r.text) if r.status_code == 200 else None
        if counts is None:
            return (
                False,
                f"HTTP {r.status_code}, no vllm:spec_decode_* counters: speculative decoding is not running",
                {},
            )
        accepted, drafted = counts
        rate = accepted / drafted if drafted else None
        shown = (
            f"acceptance {rate:.1%} ({accepted:.0f} of {drafted:.0f} draft tokens)"
            if rate is not None
            else "no draft tokens proposed yet"
        )
        return True, shown, {"acceptance_rate": rate, "draft_tokens": drafted, "accepted_tokens": accepted}

    checks += [(f"adapter {name}", adapter(name)) for name in t.adapters]
    if t.kind == "host" and t.speculative:
        checks.append(("speculative decoding", speculative))
    # What the model says is a host's property, asked of each host directly: through a gateway
    # a model's gateway_max_tokens ceiling (e.g. 8) would refuse or cut the probes' replies.
    if t.kind == "host":
        checks += [(smoke_probes.STOPS, smoke_probes.stops), (smoke_probes.JSON_SCHEMA, smoke_probes.json_schema)]
    return checks


def _warn_unsafe(ctx: HostContext) -> None:
    """A host that passes smoke with its protection widened on purpose (vllm_allow_unsafe,
    trust_remote_code) says so here too, not only in preflight: one line each, printed always
    and kept in the report."""
    lines = unsafe_warnings(ctx.config) if isinstance(ctx.config, HostConfig) else []
    for line in lines:
        ctx.play.print(f"warning: [{ctx.host.name}] smoke: {line}", markup=False)
    if lines:
        ctx.record("smoke host", "widened protection", Status.OK, "; ".join(lines), data={"warnings": lines})


def run_smoke(
    ctx: HostContext, target: Target, *, label: str | None = None, timeout: float = 120
) -> dict[str, CheckResult]:
    """Run every check against one target; record each, and keep them in the host's
    SmokeResults under `label` (default: the target's kind); fail the host if any failed."""
    results: dict[str, CheckResult] = {}
    failed = []
    if target.kind == "host":
        _warn_unsafe(ctx)
    with httpx.Client(timeout=timeout, verify=target.verify) as client:
        for name, fn in checks_for(target):
            t0 = time.monotonic()
            try:
                ok, msg, data = fn(client, target)
            except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
                ok, msg, data = False, f"{type(exc).__name__}: {exc}", {}
            status = Status.SKIPPED if data.get("skipped") else (Status.OK if ok else Status.FAILED)
            ctx.record(f"smoke {target.kind}", name, status, msg, elapsed_s=time.monotonic() - t0, data=data)
            results[name] = CheckResult(ok, msg, data)
            if not ok:
                failed.append(name)
    kept = ctx.result.get(SmokeResults)
    if kept is None:
        kept = SmokeResults()
        ctx.result.note(kept)
    kept.targets[label or target.kind] = results
    if failed:
        raise HostFailed(f"smoke checks failed against {target.base_url}: {', '.join(failed)}")
    return results
