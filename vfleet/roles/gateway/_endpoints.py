"""The vLLM endpoints the gateway passes on: an allow-list, and the nginx map that applies it.

Why an allow-list: vLLM's API key guards every path under /v1, but behind /v1 it also serves
administration, e.g. /v1/load_lora_adapter and /v1/unload_lora_adapter (with
VLLM_ALLOW_RUNTIME_LORA_UPDATING), which load into the serving engine whatever adapter a
path or repository the client names holds. Proxying "/v1/*" hands them to every holder of
the clients' key. The gateway passes on
only the inference API below; any other path is answered 404 by nginx itself.

The paths, from vLLM's routes: vllm-project/vllm, vllm/entrypoints/openai/api_server.py (the
`@router.post("/v1/...")` lines, e.g. `/v1/rerank` and `/v2/rerank` beside `do_rerank`, and
`/v1/load_lora_adapter` under `if envs.VLLM_ALLOW_RUNTIME_LORA_UPDATING`; later versions keep
the same paths in per-API `api_router.py` modules) and docs/serving/openai_compatible_server.md
("Supported APIs": Completions, Chat, Embeddings, Transcriptions, Translations, Score, Re-rank).

Left out on purpose: GET /v1/responses/{id} and its /cancel (a stored response lives on one
host, and the gateway balances across the model's hosts with no body to route on); /tokenize,
/detokenize, /pooling, /classify, /score, /rerank, /invocations (outside /v1: vLLM's key does
not guard them); /v1/load_lora_adapter, /v1/unload_lora_adapter and anything else under /v1.
"""

from __future__ import annotations

import re
from typing import Sequence

from vfleet.config.quoting import nginx_quote
from vfleet.roles.gateway._models import Model, nginx_regex

__all__ = ["API_PATHS", "V1_ENDPOINTS", "api_path_map", "path_model_map"]

# Under /v1/ (also behind /v1/<gateway_route_prefix>/). Not every pinned version serves each
# (transcriptions, score, rerank and responses came later than chat and completions): a path
# the host's vLLM lacks answers vLLM's own 404 through the gateway.
V1_ENDPOINTS = (
    "chat/completions",
    "completions",
    "embeddings",
    "models",  # the gateway answers GET /v1/models itself; /v1/<prefix>/models is proxied
    "audio/transcriptions",
    "audio/translations",
    "score",
    "rerank",
    "responses",
)
# Outside /v1/ but guarded by the key (vLLM's key covers /v1, /v2 and /inference): Cohere's v2 rerank.
OTHER_ENDPOINTS = ("/v2/rerank",)

API_PATHS: tuple[str, ...] = tuple(f"/v1/{p}" for p in V1_ENDPOINTS) + OTHER_ENDPOINTS


def api_path_map(models: Sequence[Model]) -> list[tuple[str, str]]:
    """Rows of `map $uri $vfleet_api_path`: the path vLLM gets for an allowed request path
    (the route prefix taken out), nothing (the map's default "") for any other. $uri is the
    path nginx normalised (%-decoded, `..` and `//` resolved), and the proxied request carries
    this value, not the client's raw path, so what vLLM serves is what was checked."""
    endpoints = "|".join(re.escape(p) for p in V1_ENDPOINTS)
    prefixes = "|".join(re.escape(m.route_prefix) for m in models if m.route_prefix)
    rows = [(f"^/v1/({endpoints})$", "/v1/$1")]
    if prefixes:
        rows.append((f"^/v1/(?:{prefixes})/({endpoints})$", "/v1/$1"))
    rows += [(f"^{re.escape(p)}$", p) for p in OTHER_ENDPOINTS]
    return [(nginx_regex(pattern), path) for pattern, path in rows]


def path_model_map(models: Sequence[Model]) -> list[tuple[str, str]]:
    """Rows of `map $uri $vfleet_path_model`: /v1/<prefix>/... names its model."""
    return [(nginx_regex(f"^/v1/{re.escape(m.route_prefix)}/"), nginx_quote(m.name)) for m in models if m.route_prefix]
