"""Facts a multi-host replica needs from each member (pyinfra style: a command and a parser).

Why facts and not inventory values: which interface reaches the head, which address the
member has on it, which vLLM/torch/NCCL/Python the venv really holds and whether the clock
agrees are properties of the running host; the inventory can only override the interface
(`replica_nic`). Parsers are tested from captured outputs (tests/unit/data/facts/replica/).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

__all__ = ["Route", "RouteFact", "ReachFact", "VersionsFact", "ClockFact", "parse_route"]

q = shlex.quote

VERSIONS_PROBE = r"""
import json, platform
out = {"python": platform.python_version()}
for mod in ("vllm", "torch", "ray"):
    try:
        m = __import__(mod)
        out[mod] = getattr(m, "__version__", None)
    except Exception as e:
        out[mod] = None
try:
    import torch
    v = torch.cuda.nccl.version() if torch.cuda.is_available() else None
    out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else (str(v) if v else None)
except Exception:
    out["nccl"] = None
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Route:
    """`ip -o route get TARGET`: the interface the kernel sends on and this host's address there."""

    target: str
    dev: str | None
    src: str | None
    local: bool = False  # TARGET is this host itself (dev is then lo)


def parse_route(target: str, lines: list[str]) -> Route:
    """`10.213.0.11 dev host0 src 10.213.0.12 uid 0 \\    cache` -> dev host0, src 10.213.0.12."""
    text = " ".join(lines)
    dev = re.search(r"\bdev\s+(\S+)", text)
    src = re.search(r"\bsrc\s+(\S+)", text)
    return Route(
        target, dev.group(1) if dev else None, src.group(1) if src else None, local=text.strip().startswith("local ")
    )


@dataclass(frozen=True)
class RouteFact:
    """The route to another member (a name is resolved on the member, as NCCL would)."""

    target: str

    def command(self) -> str:
        t = q(self.target)
        return (
            f"a=$(getent ahostsv4 {t} | awk 'NR==1{{print $1}}'); "
            f'ip -o route get "${{a:-{self.target}}}" 2>&1 || true'
        )

    def process(self, lines: list[str]) -> Route:
        return parse_route(self.target, lines)


@dataclass(frozen=True)
class ReachFact:
    """Whether a TCP connection to the peer's PORT (its sshd, always open) succeeds from here."""

    target: str
    port: int

    def command(self) -> str:
        return (
            f"timeout 5 bash -c {q(f'exec 3<>/dev/tcp/{self.target}/{int(self.port)}')} "
            "2>/dev/null && echo reachable || echo unreachable"
        )

    def process(self, lines: list[str]) -> bool:
        return bool(lines) and lines[-1].strip() == "reachable"


@dataclass(frozen=True)
class VersionsFact:
    """Python, vLLM, torch, NCCL (torch's) and Ray in a venv: members must agree on all of them."""

    python: str

    def command(self) -> str:
        return f"{q(self.python)} -c {q(VERSIONS_PROBE)} 2>/dev/null || echo '{{}}'"

    def process(self, lines: list[str]) -> dict[str, Any]:
        try:
            return json.loads(lines[-1]) if lines else {}
        except ValueError:
            return {}


@dataclass(frozen=True)
class ClockFact:
    """Wall clock in milliseconds and whether timesyncd/chrony says it is synchronised."""

    def command(self) -> str:
        return "date +%s%3N; timedatectl show -p NTPSynchronized --value 2>/dev/null || echo unknown"

    def process(self, lines: list[str]) -> dict[str, Any]:
        ms = int(lines[0]) if lines and lines[0].strip().isdigit() else None
        synced = lines[1].strip() if len(lines) > 1 else "unknown"
        return {"epoch_ms": ms, "ntp_synchronized": {"yes": True, "no": False}.get(synced)}
