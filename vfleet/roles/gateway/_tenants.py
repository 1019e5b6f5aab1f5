"""The gateway's tenants as nginx needs them: a zone per tenant for its rate and one for its
concurrent requests, its Retry-After, and the errors that name its ceilings (pure functions).

Why a zone per tenant: nginx's limit_req_zone has one rate per zone, and tenants have their own
rates. Each zone is keyed by a variable that holds the tenant's name for that tenant's requests
and "" for everybody else's (nginx does not count an empty key), so one request is counted in
its own tenant's zones only, whatever address it comes from.

The fleet's own key (api_key) is the reserved tenant OPERATOR: vfleet's smoke checks, bench and
eval reach every model through it, limited per client address by gateway_rate_limit as every
client was before tenants."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Sequence

from vfleet.config.gateway_access import Tenant
from vfleet.config.hostconfig import HostConfig
from vfleet.roles.gateway._models import Model, error_json

__all__ = [
    "OPERATOR",
    "TenantError",
    "TenantRow",
    "tenant_rows",
    "tenant_messages",
    "tenant_settings",
    "LIMIT_ZONE_SIZE",
]

OPERATOR = "vfleet"
# One key (a tenant name, at most 63 bytes) per zone: nginx's smallest useful zone holds
# thousands of them (limit_req_zone: "one megabyte zone can keep about 16 thousand 64-byte states").
LIMIT_ZONE_SIZE = "1m"
# The words nginx's map reads as its own parameters (nginx.org/en/docs/http/ngx_http_map_module.html).
MAP_WORDS = frozenset({"default", "hostnames", "include", "volatile"})


class TenantError(ValueError):
    pass


@dataclass(frozen=True)
class TenantRow:
    """One tenant as the template renders it."""

    index: int
    name: str
    rate: str
    burst: int
    max_concurrent: int | None
    retry_after_s: int

    @property
    def map_key(self) -> str:
        """The name as an nginx map source value: a tenant named like one of map's own words
        gets the leading backslash map asks for. Only those: nginx reads "\\n", "\\t" and "\\r"
        in any word as control characters, so "\\noisy" would be a newline and "oisy"."""
        return "\\" + self.name if self.name in MAP_WORDS else self.name


def retry_after(rate: str) -> int:
    """Seconds until the tenant's bucket has room again: one request's interval, at least 1."""
    n, unit = rate.split("r/")
    return max(1, math.ceil((60 if unit == "m" else 1) / int(n)))


def tenant_rows(tenants: Sequence[Tenant], models: Sequence[Model]) -> list[TenantRow]:
    """The tenants in inventory order; a model a tenant names that no host serves is an error
    (a typo would otherwise lock the tenant out of the model it was meant to use)."""
    served = {name for m in models for name in m.names}
    rows = []
    for i, t in enumerate(tenants, 1):
        unknown = [m for m in (t.models or ()) if m not in served]
        if unknown:
            raise TenantError(
                f"gateway_tenants: tenant {t.name!r} names models no host serves: "
                f"{', '.join(unknown)} (served: {', '.join(sorted(served))})"
            )
        rows.append(TenantRow(i, t.name, t.rate, t.burst, t.max_concurrent, retry_after(t.rate)))
    return rows


def tenant_messages(tenants: Sequence[Tenant]) -> dict[str, str]:
    """The 400 answers of tenants' own max_tokens ceilings, by verdict (tenant_max_tokens_<i>)."""
    return {
        f"tenant_max_tokens_{i}": error_json(
            f"max_tokens (or max_completion_tokens) must be an integer of at most {t.max_tokens} for "
            f"tenant {t.name} (the ceiling the gateway enforces for this key).",
            "max_tokens_too_large",
            "max_tokens",
        )
        for i, t in enumerate(tenants, 1)
        if t.max_tokens is not None
    }


def tenant_settings(cfg: HostConfig) -> dict:
    """The tenant half of the njs module's settings: who each key is, what it may ask for,
    and what the gateway sends vLLM instead of the client's key."""
    tenants = {
        t.name: {"i": i, "models": list(t.models) if t.models is not None else None, "max_tokens": t.max_tokens}
        for i, t in enumerate(cfg.gateway_tenants, 1)
    }
    keys = {t.key_sha256: t.name for t in cfg.gateway_tenants}
    backend = None
    if cfg.api_key:
        tenants[OPERATOR] = {"i": 0, "models": None, "max_tokens": None}
        keys[hashlib.sha256(cfg.api_key.encode()).hexdigest()] = OPERATOR
        backend = f"Bearer {cfg.api_key}"
    return {"tenants": tenants, "keys": keys, "backend": backend}
