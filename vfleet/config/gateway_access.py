"""Tenants and TLS of a gateway (stand-in: the tenants branch brings the real module)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Tenant:
    name: str
    key: str = field(repr=False)
    rate: str = "1r/s"
    burst: int = 0
    models: tuple[str, ...] | None = None
    max_concurrent: int | None = None
    max_tokens: int | None = None

    @property
    def key_sha256(self) -> str:
        return hashlib.sha256(self.key.encode()).hexdigest()


@dataclass(frozen=True)
class GatewayTls:
    cert_file: str
    key_file: str
    ca_file: str | None = None

    def read(self) -> tuple[str, str]:
        with open(self.cert_file) as c, open(self.key_file) as k:
            return c.read(), k.read()
