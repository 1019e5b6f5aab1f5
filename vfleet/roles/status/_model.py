"""A host's and a gateway's status as typed records, built from the parsed probe answers
(pure: no host, so the benchmark and the tests build thousands from data).

The verdict (vfleet/clients/verdict.py) reads the server's gauges as they are now; the
preemptions and the TTFT of a window need two readings, so they are known from the second
round of `--watch` on (`Previous`: the last round's counters), and the TTFT trend from the
third."""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, Mapping

from vfleet.clients.bench.server_metrics import read as read_metrics
from vfleet.clients.verdict import ServerNumbers, Verdict, verdict as judge
from vfleet.config.hostconfig import HostConfig
from vfleet.roles.status._drift import Drift, Wanted, drift
from vfleet.roles.status._parsers import UnitState, gpus, weights_version

__all__ = ["Previous", "HostStatus", "GatewayStatus", "host_status", "gateway_status", "mark_gateways"]


@dataclass(frozen=True)
class Previous:
    """The counters of a host's last round: TTFT histogram sum and count, preemptions, and
    the mean TTFT of the window before that round."""

    ttft_sum: float | None = None
    ttft_count: float | None = None
    preemptions: float | None = None
    ttft_window_s: float | None = None


@dataclass
class HostStatus:
    """One row of the hosts' table; `error` set: the host did not answer (the rest unknown)."""

    name: str
    error: str | None = None
    unit: UnitState | None = None
    starts_1h: int | None = None
    exits_1h: int | None = None
    vllm_version: str | None = None
    venv: str | None = None
    model: str | None = None
    served: list[str] = field(default_factory=list)
    weights: str | None = None
    gateways: dict[str, str] = field(default_factory=dict)
    server: dict[str, float] = field(default_factory=dict)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    drift: Drift | None = None
    verdict: Verdict = field(default_factory=lambda: Verdict("unknown"))
    previous: Previous | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "unit": self.unit.to_dict() if self.unit else None,
            "starts_1h": self.starts_1h,
            "exits_1h": self.exits_1h,
            "vllm_version": self.vllm_version,
            "venv": self.venv,
            "model": self.model,
            "served": list(self.served),
            "weights": self.weights,
            "gateways": dict(self.gateways),
            "server": dict(self.server),
            "gpus": list(self.gpus),
            "drift": self.drift.to_dict() if self.drift else None,
            **self.verdict.to_dict(),
        }


@dataclass
class GatewayStatus:
    """One row of the gateways' table: nginx's state, and each backend as the gateway sees it
    (`up`: takes traffic: /health answered 200 from the gateway and not drained; `down`: not
    drained and /health did not answer 200; `drained`: in its drained-hosts file, whatever its
    /health says). The three agree with each host's GATEWAYS cell (mark_gateways)."""

    name: str
    error: str | None = None
    nginx: str | None = None
    drained: list[str] = field(default_factory=list)
    backends: dict[str, int | None] = field(default_factory=dict)

    @property
    def up(self) -> list[str]:
        return sorted(h for h, code in self.backends.items() if code == 200 and h not in self.drained)

    @property
    def down(self) -> list[str]:
        return sorted(h for h, code in self.backends.items() if code != 200 and h not in self.drained)

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "nginx": self.nginx,
            "drained": list(self.drained),
            "backends": dict(self.backends),
            "up": self.up,
            "down": self.down,
        }


def _delta(now: float | None, before: float | None) -> float | None:
    """A counter's increase between two readings (None across a restart, which resets it)."""
    if now is None or before is None or now < before:
        return None
    return now - before


def _window_ttft(values: Mapping[str, float], prev: Previous | None) -> float | None:
    if prev is None:
        return None
    count = _delta(values.get("ttft_count"), prev.ttft_count)
    total = _delta(values.get("ttft_sum"), prev.ttft_sum)
    return total / count if count and total is not None else None


def host_status(cfg: HostConfig, facts: Mapping[str, Any], want: Wanted, prev: Previous | None = None) -> HostStatus:
    """A vLLM host's row from its parsed probes (vfleet/roles/status/_probes.py keys)."""
    unit: UnitState | None = facts.get("unit")
    install = facts.get("install") or {}
    journal = facts.get("journal") or {}
    values, _, served = read_metrics(facts["metrics"]) if facts.get("metrics") else ({}, {}, [])
    gpu = gpus(facts.get("gpu_memory") or "", facts.get("gpu_util") or "")
    utils = [g["util_pct"] for g in gpu if g["util_pct"] is not None]
    window = _window_ttft(values, prev)
    server = {k: values[k] for k in ("running", "waiting", "kv_cache_usage", "preemptions") if k in values}
    numbers = ServerNumbers(
        running=values.get("running"),
        waiting=values.get("waiting"),
        kv_cache_usage=values.get("kv_cache_usage"),
        preemptions=_delta(values.get("preemptions"), prev and prev.preemptions),
        ttft_s=window,
        ttft_before_s=prev.ttft_window_s if prev else None,
        gpu_util_pct=fmean(utils) if utils else None,
        max_num_seqs=cfg.max_num_seqs,
    )
    return HostStatus(
        name=cfg.name,
        unit=unit,
        starts_1h=journal.get("starts"),
        exits_1h=journal.get("exits"),
        vllm_version=install.get("vllm_version"),
        venv=install.get("venv"),
        model=cfg.served_model_name,
        served=served,
        weights=weights_version(facts.get("weights")),
        server=server,
        gpus=gpu,
        drift=drift(
            cfg, want, facts.get("files"), unit.enabled if unit else None, install.get("venv"), facts.get("weights")
        ),
        verdict=judge(numbers),
        previous=Previous(values.get("ttft_sum"), values.get("ttft_count"), values.get("preemptions"), window),
    )


def gateway_status(name: str, facts: Mapping[str, Any]) -> GatewayStatus:
    return GatewayStatus(
        name, nginx=facts.get("nginx"), drained=facts.get("drained") or [], backends=facts.get("backends") or {}
    )


def mark_gateways(hosts: list[HostStatus], gateways: list[GatewayStatus]) -> None:
    """Each host's place on each gateway: `drained`, `down` (its /health did not answer the
    gateway), `in`, or `?` (the gateway did not answer)."""
    for h in hosts:
        for g in gateways:
            if g.error:
                h.gateways[g.name] = "?"
            elif h.name in g.drained:
                h.gateways[g.name] = "drained"
            elif h.name in g.backends:
                h.gateways[g.name] = "in" if g.backends[h.name] == 200 else "down"
