"""Running an eval set against one target: each item once, greedy and seeded, at low concurrency
(outputs drift with batch composition: docs/eval.md), and with a reference report each item's
reference reply scored under this target (vfleet/clients/eval/divergence.py).

What the server does wrong for one item (HTTP 400 for a prompt too long, a timeout) is recorded
on that item and the run goes on; a target that cannot be reached at all ends the run with one
line, since every item would say the same."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Any

import httpx

from vfleet.clients.bench.client import error_message
from vfleet.clients.eval import wire
from vfleet.clients.eval.divergence import divergence
from vfleet.clients.eval.evalset import EvalItem
from vfleet.clients.eval.report import SCORING_FAILED, EvalReport, ItemResult
from vfleet.clients.eval.scoring import score
from vfleet.engine.errors import VfleetError

PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class EvalTarget:
    base_url: str  # e.g. http://10.0.0.5:8000 (vLLM host) or a gateway URL
    model: str  # served model name
    api_key: str | None
    label: str  # host name or "gateway lab3"
    verify: str | bool = True  # httpx's verify=: a TLS gateway's CA file (HostConfig.gateway_verify)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def to_dict(self) -> dict[str, str]:
        """What the report keeps of the target: never the key."""
        return {"label": self.label, "url": self.base_url, "model": self.model}


@dataclass(frozen=True)
class EvalSettings:
    seed: int = 0
    max_tokens: int = 64
    top_logprobs: int = 5
    concurrency: int = 1
    timeout: float = 120.0

    def check(self) -> None:
        if self.max_tokens < 1 or self.concurrency < 1 or not 0 <= self.top_logprobs <= 20 or self.timeout <= 0:
            raise VfleetError(
                "eval settings: max_tokens and concurrency must be at least 1, top_logprobs 0-20, timeout positive"
            )


class ItemFailed(Exception):
    """The server answered this item with an error, or not in time: recorded, not fatal."""


def _post(client: httpx.Client, target: EvalTarget, body: dict[str, Any]) -> dict[str, Any]:
    try:
        resp = client.post(target.base_url.rstrip("/") + PATH, json=body, headers=target.headers())
    except (httpx.ConnectError, httpx.UnsupportedProtocol) as exc:
        raise VfleetError(
            f"{target.label}: cannot reach {target.base_url} ({type(exc).__name__}: {exc}); is vLLM running there?"
        ) from None
    except httpx.HTTPError as exc:
        raise ItemFailed(f"{type(exc).__name__}: {exc}"[:300]) from None
    if resp.status_code != 200:
        raise ItemFailed(f"HTTP {resp.status_code}: {error_message(resp)}"[:400])
    try:
        return resp.json()
    except ValueError:
        raise ItemFailed(f"HTTP 200 but not JSON: {resp.text[:100]!r}") from None


def _failed(item: EvalItem, error: str) -> ItemResult:
    passed = None if item.expectation is None else False
    return ItemResult(
        id=item.id,
        reply="",
        token_ids=[],
        logprobs=[],
        top_logprobs=[],
        finish_reason=None,
        passed=passed,
        why="no reply" if passed is False else "",
        error=error,
    )


def _run_item(
    client: httpx.Client, target: EvalTarget, item: EvalItem, settings: EvalSettings, reference: ItemResult | None
) -> ItemResult:
    body = wire.chat_body(
        target.model,
        list(item.messages),
        seed=settings.seed,
        max_tokens=item.max_tokens or settings.max_tokens,
        top_logprobs=settings.top_logprobs,
    )
    try:
        got = wire.parse_chat(_post(client, target, body))
    except ItemFailed as exc:
        return _failed(item, str(exc))
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return _failed(item, f"unexpected reply shape ({type(exc).__name__}: {exc})"[:300])
    passed, why = score(item, got.reply)
    result = ItemResult(id=item.id, passed=passed, why=why, **asdict(got))
    if reference is not None and reference.token_ids and not reference.error:
        try:
            prompt = wire.parse_prompt_scores(
                _post(client, target, wire.continuation_body(target.model, list(item.messages), reference.reply))
            )
        except ItemFailed as exc:
            result.error = f"{SCORING_FAILED}: {exc}"
            return result
        except (KeyError, TypeError, ValueError) as exc:
            result.error = f"{SCORING_FAILED}: unexpected reply shape ({exc})"[:300]
            return result
        d = divergence(reference.token_ids, reference.logprobs, prompt)
        result.divergence, result.divergence_signed, result.scored_tokens = d.value, d.signed, d.scored
    return result


def run_eval(
    target: EvalTarget,
    items: list[EvalItem],
    settings: EvalSettings,
    *,
    reference: EvalReport | None = None,
    measured: dict | None = None,
) -> EvalReport:
    """Every item against `target`, in the items' order whatever the concurrency. With
    `reference` (an earlier report of the same item ids), each item also gets `divergence` =
    mean over the reference reply's tokens of |reference logprob - this target's|, nats/token
    (and `divergence_signed`, the same without the absolute value)."""
    settings.check()
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    refs = {i.id: i for i in reference.items} if reference else {}
    with httpx.Client(timeout=settings.timeout, verify=target.verify) as client:

        def one(item: EvalItem) -> ItemResult:
            return replace(_run_item(client, target, item, settings, refs.get(item.id)), item_hash=item.digest)

        if settings.concurrency == 1:
            results = [one(i) for i in items]
        else:
            with ThreadPoolExecutor(max_workers=settings.concurrency) as pool:
                results = list(pool.map(one, items))
    recorded = {**asdict(settings), "items": len(items)}
    if reference is not None:
        recorded["reference"] = {"label": reference.target.get("label"), "created": reference.created}
    return EvalReport(
        target=target.to_dict(), settings=recorded, measured=dict(measured or {}), items=results, created=created
    )
