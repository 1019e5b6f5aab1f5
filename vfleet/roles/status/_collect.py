"""One status round: every selected host asked at once, one round trip each, and the answers
turned into rows.

Why the runner's Play: it already opens connections in a bounded pool (--forks), times each
command out, and turns a host that cannot be reached or fails into a result instead of an
exception; here such a host becomes a row saying why. The network part is parallel, so a
round costs about the slowest host's round trip (bounded by connect_timeout plus
SCRIPT_TIMEOUT_S), and the rest is parsing, which benchmarks/status_scale.py times for 100
and 1000 hosts."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.fact_protocol import fact_script, read_outputs, results
from vfleet.engine.runner import HostContext, HostFailed, Play
from vfleet.roles.status._drift import Wanted, controller_manifest_id, wanted
from vfleet.roles.status._model import GatewayStatus, HostStatus, Previous, gateway_status, host_status, mark_gateways
from vfleet.roles.status._probes import SCRIPT_TIMEOUT_S, Probe, gateway_probes, vllm_probes

__all__ = ["Round", "Watch", "probes_for", "answers", "ask", "build_round", "run_round"]


@dataclass
class Round:
    """The rows of one round, and when it was taken (epoch seconds)."""

    hosts: list[HostStatus]
    gateways: list[GatewayStatus]
    taken_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": "status",
            "taken_at": self.taken_at,
            "hosts": {h.name: h.to_dict() for h in self.hosts},
            "gateways": {g.name: g.to_dict() for g in self.gateways},
            "summary": {
                "hosts": len(self.hosts),
                "no_answer": sum(1 for h in self.hosts if h.error) + sum(1 for g in self.gateways if g.error),
                "verdicts": dict(Counter(h.verdict.kind for h in self.hosts if not h.error)),
            },
        }

    @property
    def unanswered(self) -> list[str]:
        return [h.name for h in self.hosts if h.error] + [g.name for g in self.gateways if g.error]


@dataclass
class Watch:
    """What a round keeps for the next (--watch): each host's counters, and the wanted file
    hashes per (host, systemd version), rendered once."""

    previous: dict[str, Previous] = field(default_factory=dict)
    wanted: dict[tuple[str, int | None], Wanted] = field(default_factory=dict)

    def wanted_for(self, cfg: HostConfig, systemd_version: int | None) -> Wanted:
        key = (cfg.name, systemd_version)
        if key not in self.wanted:
            self.wanted[key] = wanted(cfg, systemd_version)
        return self.wanted[key]


def probes_for(cfg: HostConfig, backends: Sequence[tuple[str, str]]) -> dict[str, Probe]:
    """A host's probes: a vLLM host's, a gateway's, or both on a host that is both."""
    probes: dict[str, Probe] = {}
    if cfg.serves:
        probes.update(vllm_probes(cfg))
    if cfg.is_gateway:
        probes.update(gateway_probes(backends))
    return probes


def answers(probes: Mapping[str, Probe], stdout: str) -> dict[str, Any]:
    """Each probe's parsed answer from the script's output (None where it has none)."""
    return results(probes, read_outputs(stdout))


def ask(ctx: HostContext, probes: Mapping[str, Probe]) -> dict[str, Any]:
    """`probes` as one script, one round trip: each probe's parsed answer (None where it has
    none); a host that does not answer within SCRIPT_TIMEOUT_S, or whose script fails, fails."""
    r = ctx.run("sh -s", stdin=fact_script(probes, parallel=True), timeout=SCRIPT_TIMEOUT_S)
    if r.timed_out:
        raise HostFailed(f"no answer within {SCRIPT_TIMEOUT_S} s")
    got = read_outputs(r.stdout)
    if not got:
        raise HostFailed(f"the status script failed: exit {r.exited}: {r.tail()}")
    return results(probes, got)


def _ask(ctx: HostContext, backends: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The step: the host's status probes."""
    return ask(ctx, probes_for(ctx.config, backends))


def build_round(
    configs: Sequence[HostConfig],
    facts: Mapping[str, Mapping[str, Any] | None],
    errors: Mapping[str, str],
    watch: Watch,
) -> Round:
    """The rows from each host's parsed answers (`facts`, None: no answer, why in `errors`).
    Each round reads the controller's manifests afresh: a model copied again during --watch is
    weights drift from the next round on."""
    controller_manifest_id.cache_clear()
    hosts: list[HostStatus] = []
    gateways: list[GatewayStatus] = []
    for cfg in configs:
        got = facts.get(cfg.name)
        why = errors.get(cfg.name, "no answer")
        if cfg.serves:
            if got is None:
                hosts.append(HostStatus(cfg.name, error=why))
            else:
                files = got.get("files")
                row = host_status(
                    cfg, got, watch.wanted_for(cfg, files.systemd if files else None), watch.previous.get(cfg.name)
                )
                watch.previous[cfg.name] = row.previous or Previous()
                hosts.append(row)
        if cfg.is_gateway:
            gateways.append(GatewayStatus(cfg.name, error=why) if got is None else gateway_status(cfg.name, got))
    mark_gateways(hosts, gateways)
    return Round(hosts, gateways, time.time())


def run_round(play: Play, configs: Sequence[HostConfig], backends: Sequence[tuple[str, str]], watch: Watch) -> Round:
    """Ask every host of the play (in parallel, at most --forks at once), build the rows."""
    got = play.run_step("status", lambda ctx: _ask(ctx, backends))
    errors = {}
    for name, result in play.results.items():
        if name not in got and result.steps:
            errors[name] = f"{result.status.value}: {result.steps[-1].message}"
    return build_round(configs, got, errors, watch)
