"""The connection caps (nginx max_conns) a gateway was last rendered with, kept on the gateway
as JSON next to the drained-hosts state.

Why: a run without a capacity plan (`vfleet gateway`, `restart`, `drain`, `deploy
--skip-preflight`) must render the caps an earlier run with one chose, or every such run
would flip them back to max_num_seqs and reload nginx. The caps used to be read back out of
the rendered nginx config with a regex; here they are vfleet's own typed record, written
before the config (the intent first, as the drained hosts are) and read as data."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Mapping, Sequence

from vfleet.roles.gateway._render import Backend

__all__ = ["CAPS_STATE", "GatewayCaps"]

CAPS_STATE = "/var/lib/vfleet/gateway-caps.json"


@dataclass(frozen=True)
class GatewayCaps:
    """Each backend's max_conns as rendered (backends without a cap are left out)."""

    max_conns: Mapping[str, int]

    @classmethod
    def of(cls, backends: Sequence[Backend]) -> "GatewayCaps":
        return cls({b.name: int(b.max_conns) for b in backends if b.max_conns is not None})

    @classmethod
    def parse(cls, content: str | None) -> "GatewayCaps":
        """The state file's caps; a missing or unreadable file keeps none (the next
        configuration writes it whole again)."""
        try:
            caps = json.loads(content or "{}").get("max_conns", {})
            return cls({str(name): int(n) for name, n in caps.items()})
        except (ValueError, TypeError, AttributeError):
            return cls({})

    def text(self) -> str:
        return json.dumps({"max_conns": dict(sorted(self.max_conns.items()))}, indent=2) + "\n"

    def kept(self, backends: Sequence[Backend]) -> list[Backend]:
        """A host with no cap from the inventory or this run's plan keeps the cap the
        gateway already has for it, so runs with and without preflight render the same
        config; max_num_seqs stands in only for a host the gateway has never capped."""
        return [
            dataclasses.replace(b, max_conns=self.max_conns[b.name])
            if not b.max_conns_settled and b.name in self.max_conns
            else b
            for b in backends
        ]
