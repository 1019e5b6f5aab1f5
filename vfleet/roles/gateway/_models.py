"""The models behind the gateway: the vLLM hosts grouped by the name clients ask for, their
ceilings and fallbacks, and the JSON the gateway answers with (pure functions, no SSH).

The request itself is judged in nginx by gateway.js (vfleet/roles/gateway/_njs.py renders the
models' table into it): JSON.parse reads the body, so only its top-level fields count, and a
ceiling is a number compared as a number. Responses are never buffered (proxy_buffering
off): only the request is read first, which nginx does for a proxied request anyway."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Sequence

__all__ = [
    "Model",
    "group_models",
    "check_fallbacks",
    "nginx_regex",
    "models_json",
    "model_entries",
    "error_json",
    "OPENAI_PATHS",
    "MODEL_NAME",
]

# Served names the gateway can route on: what a JSON string holds without escapes, and what
# an nginx regex and a JSON literal carry without quoting surprises.
MODEL_NAME = re.compile(r"[A-Za-z0-9._:/@+-]{1,128}")
# First path segments of the OpenAI API: a route prefix equal to one would shadow it.
OPENAI_PATHS = frozenset(
    {
        "chat",
        "completions",
        "embeddings",
        "models",
        "audio",
        "responses",
        "score",
        "rerank",
        "tokenize",
        "detokenize",
        "files",
        "batches",
        "images",
        "moderations",
        "pooling",
        "classify",
    }
)


class ModelError(ValueError):
    pass


@dataclass(frozen=True)
class Model:
    """One served name and the hosts that serve it (inventory order)."""

    index: int  # 1, 2, ... in order of first appearance: upstream vfleet_model_<index>
    name: str
    hosts: tuple[str, ...]
    max_tokens: int | None
    route_prefix: str | None
    max_model_len: int | None
    fallback: str | None = None  # the model that answers when none of this one's hosts can
    adapters: tuple[str, ...] = ()  # LoRA adapters its hosts serve: routed to them by name

    @property
    def names(self) -> tuple[str, ...]:
        """Every name clients may send for it: the model's, then its adapters'."""
        return (self.name, *self.adapters)

    @property
    def upstream(self) -> str:
        return f"vfleet_model_{self.index}"


def _one(name: str, what: str, values: dict[str, object]) -> object:
    first: dict[str, str] = {}  # each distinct value and the first host that has it
    for host, v in values.items():
        first.setdefault(json.dumps(v), host)
    if len(first) > 1:
        shown = ", ".join(f"{h}={values[h]!r}" for h in list(first.values())[:4])  # a line, even for 100,000 hosts
        raise ModelError(
            f"model {name!r}: its hosts disagree on {what} ({shown}); set it once in the model group's group_vars"
        )
    return next(iter(values.values()))


def group_models(backends: Sequence) -> list[Model]:
    """Models in order of first appearance; the per-model values must agree across hosts."""
    by_name: dict[str, list] = {}
    for b in backends:
        if not MODEL_NAME.fullmatch(str(b.model or "")):
            raise ModelError(
                f"{b.name}: served_model_name {b.model!r} cannot be routed by the gateway "
                f"(use letters, digits and . _ : / @ + -, at most 128)"
            )
        by_name.setdefault(b.model, []).append(b)
    models: list[Model] = []
    prefixes: dict[str, str] = {}
    for i, (name, bs) in enumerate(by_name.items(), 1):
        if all(b.backup for b in bs):
            hosts = ", ".join(b.name for b in bs[:4]) + (f" and {len(bs) - 4} more" if len(bs) > 4 else "")
            raise ModelError(
                f"model {name!r}: every host ({hosts}) is gateway_backup: at least one must serve normally"
            )
        prefix = _one(name, "gateway_route_prefix", {b.name: b.route_prefix for b in bs})
        if prefix is not None:
            if prefix in OPENAI_PATHS:
                raise ModelError(
                    f"model {name!r}: gateway_route_prefix {prefix!r} would shadow "
                    f"the OpenAI path /v1/{prefix}: choose another"
                )
            if prefix in prefixes:
                raise ModelError(f"models {prefixes[prefix]!r} and {name!r} both use gateway_route_prefix {prefix!r}")
            prefixes[prefix] = name
        models.append(
            Model(
                i,
                name,
                tuple(b.name for b in bs),
                _one(name, "gateway_max_tokens", {b.name: b.max_tokens for b in bs}),
                prefix,
                _one(name, "max_model_len", {b.name: b.max_model_len for b in bs}),
                _one(name, "gateway_fallback_model", {b.name: b.fallback for b in bs}),
                tuple(_one(name, "lora_adapters", {b.name: list(b.adapters) for b in bs})),
            )
        )
    check_fallbacks(models)
    _check_adapter_names(models)
    return models


def _check_adapter_names(models: Sequence[Model]) -> None:
    """An adapter's name reaches one model: never another model's or another adapter's name."""
    owner: dict[str, str] = {m.name: m.name for m in models}
    for m in models:
        for a in m.adapters:
            other = owner.setdefault(a, m.name)
            if other != m.name or a == m.name:
                raise ModelError(
                    f"lora adapter {a!r} of model {m.name!r} has the name of "
                    f"{'model' if a in (x.name for x in models) else 'an adapter of'} {other!r}: rename it"
                )


def check_fallbacks(models: Sequence[Model]) -> None:
    """Each fallback names another served model, and no chain of them comes back to where it
    started: the gateway follows one hop, but a cycle is a mistake an operator should hear of."""
    by_name = {m.name: m for m in models}
    for m in models:
        if m.fallback == m.name:
            raise ModelError(
                f"model {m.name!r}: gateway_fallback_model is the model itself: name another served model or remove it"
            )
        if m.fallback is not None and m.fallback not in by_name:
            raise ModelError(
                f"model {m.name!r}: gateway_fallback_model {m.fallback!r} is not served by any host "
                f"of the inventory (served: {', '.join(sorted(by_name))})"
            )
    for m in models:
        chain, at = [m.name], m
        while at.fallback is not None and at.fallback not in chain:
            at = by_name[at.fallback]
            chain.append(at.name)
        if at.fallback is not None:
            raise ModelError(
                f"gateway_fallback_model forms a cycle: {' -> '.join(chain + [at.fallback])}; "
                "break it (the gateway follows one fallback, never a loop)"
            )


def nginx_regex(pattern: str) -> str:
    """A map key matching `pattern` (case-sensitive), as one nginx word. The pattern is
    written with \\x22 for '"' and \\x5c for a backslash, so the only quoting nginx needs is
    the single quotes around it (nginx keeps backslash sequences it has no meaning for)."""
    if re.search(r"['\x00-\x1f\x7f]", pattern) or "\\\\" in pattern or pattern.endswith("\\"):
        raise ModelError(f"pattern {pattern!r} holds a quote or control character")
    return "'~" + pattern + "'"


def _json_literal(obj: object) -> str:
    """JSON as an nginx single-quoted word: no $ (a variable), no quote, no backslash."""
    text = json.dumps(obj, separators=(",", ":"))
    if re.search(r"[$'\\\x00-\x1f]", text):
        raise ModelError(f"cannot put {text!r} in the gateway config")
    return "'" + text + "\\n'"


def model_entries(models: Sequence[Model]) -> list[dict]:
    """The entries of GET /v1/models through the gateway, in vLLM's shape."""
    data = []
    for m in models:
        entry: dict[str, object] = {"id": m.name, "object": "model", "created": 0, "owned_by": "vllm", "root": m.name}
        if m.max_model_len:
            entry["max_model_len"] = m.max_model_len
        data.append(entry)
        # an adapter as vLLM lists it: its own id, its base model as parent
        data += [
            {"id": a, "object": "model", "created": 0, "owned_by": "vllm", "root": a, "parent": m.name}
            for a in m.adapters
        ]
    return data


def models_json(models: Sequence[Model]) -> str:
    """GET /v1/models through the gateway: every model of the inventory, as an nginx word."""
    return _json_literal({"object": "list", "data": model_entries(models)})


def error_json(message: str, code: str, param: str | None, type_: str = "invalid_request_error") -> str:
    """An OpenAI-style error body as an nginx word."""
    return _json_literal({"error": {"message": message, "type": type_, "param": param, "code": code}})
