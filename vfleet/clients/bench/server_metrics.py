"""The server's own view during a level, sampled from each vLLM host's Prometheus /metrics
(parsed with prometheus_client): requests running and waiting, KV cache usage and
preemptions. Metric names moved between vLLM versions; whichever the server exports is read:
vllm:kv_cache_usage_perc (new) or vllm:gpu_cache_usage_perc / vllm:cpu_cache_usage_perc (old),
vllm:num_preemptions_total (new) or vllm:num_preemptions (old). Values are summed over the
label sets of one host (several engines or models), then over hosts per sampling tick.
`read` also gives the TTFT histogram's sum and count (vllm:time_to_first_token_seconds, its
mean over a window is the difference of two readings) and the served names (the model_name
label vLLM puts on its metrics), for `vfleet status`."""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

# our name -> sample names the server may export, first match wins
GAUGES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm:cpu_cache_usage_perc"),
}
COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    # speculative decoding (vLLM 0.32.0 vllm/v1/spec_decode/metrics.py; absent without it)
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
}
# our name -> histogram; read as <ours>_sum and <ours>_count (summed as the gauges are)
HISTOGRAMS: dict[str, str] = {"ttft": "vllm:time_to_first_token_seconds"}


def read(text: str) -> tuple[dict[str, float], dict[str, str], list[str]]:
    """{our name: value}, {our name: the server's metric name} and the served model names
    (sorted) from one /metrics text."""
    samples: dict[str, float] = {}
    served: set[str] = set()
    wanted_totals = {f"{h}{end}" for h in HISTOGRAMS.values() for end in ("_sum", "_count")}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("vllm:") and "model_name" in s.labels:
                served.add(s.labels["model_name"])
            if s.name.endswith(("_created", "_bucket", "_count", "_sum")) and s.name not in wanted_totals:
                continue
            samples[s.name] = samples.get(s.name, 0.0) + float(s.value)
    values, names = {}, {}
    for ours, theirs in {**GAUGES, **COUNTERS}.items():
        for name in theirs:
            if name in samples:
                values[ours], names[ours] = samples[name], name
                break
    for ours, name in HISTOGRAMS.items():
        for end in ("_sum", "_count"):
            if name + end in samples:
                values[ours + end] = samples[name + end]
    return values, names, sorted(served)


def acceptance(text: str) -> tuple[float, float] | None:
    """(accepted, drafted) speculative tokens since the server started, from one /metrics
    text; None when it exports no speculative decoding counters (it does not use it)."""
    values, _, _ = read(text)
    if "spec_draft_tokens" not in values:
        return None
    return values.get("spec_accepted_tokens", 0.0), values["spec_draft_tokens"]


def parse(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """{our name: value} and {our name: the server's metric name} from one /metrics text: the
    gauges and counters a level samples."""
    values, names, _ = read(text)
    return {k: v for k, v in values.items() if k in GAUGES or k in COUNTERS}, names


@dataclass
class MetricsSampler:
    """Poll every host's /metrics while a level runs (bounded: it stops with the level)."""

    urls: dict[str, str]  # host name -> http://addr:port/metrics
    headers: dict[str, str] = field(default_factory=dict)
    interval_s: float = 1.0
    samples: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    async def _tick(self, client: httpx.AsyncClient, host: str, url: str) -> None:
        try:
            r = await client.get(url, headers=self.headers)
            r.raise_for_status()
            values, names = parse(r.text)
        except (httpx.HTTPError, ValueError) as exc:
            self.errors[host] = f"{type(exc).__name__}: {exc}"[:200]
            return
        self.names.update(names)
        self.samples.setdefault(host, []).append(values)

    async def run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient(timeout=max(self.interval_s * 3, 5.0)) as client:
            while True:
                await asyncio.gather(*(self._tick(client, h, u) for h, u in self.urls.items()))
                try:
                    await asyncio.wait_for(stop.wait(), self.interval_s)
                    break
                except asyncio.TimeoutError:
                    continue
            # one last sample after the level, so counters cover all of it
            await asyncio.gather(*(self._tick(client, h, u) for h, u in self.urls.items()))

    def summary(self) -> dict[str, Any]:
        hosts: dict[str, Any] = {}
        for host, rows in self.samples.items():
            h: dict[str, Any] = {"samples": len(rows)}
            for key in GAUGES:
                vals = [r[key] for r in rows if key in r]
                if vals:
                    h[f"{key}_mean"] = round(statistics.fmean(vals), 4)
                    h[f"{key}_max"] = round(max(vals), 4)
            for key in COUNTERS:
                vals = [r[key] for r in rows if key in r]
                if vals:
                    h[key] = round(vals[-1] - vals[0], 4)
            hosts[host] = h
        total: dict[str, Any] = {}
        for key in ("running", "waiting"):
            if any(f"{key}_max" in h for h in hosts.values()):
                total[f"{key}_max"] = round(sum(h.get(f"{key}_max", 0) for h in hosts.values()), 4)
                total[f"{key}_mean"] = round(sum(h.get(f"{key}_mean", 0) for h in hosts.values()), 4)
        kv = [h["kv_cache_usage_max"] for h in hosts.values() if "kv_cache_usage_max" in h]
        if kv:
            total["kv_cache_usage_max"] = max(kv)
        pre = [h["preemptions"] for h in hosts.values() if "preemptions" in h]
        if pre:
            total["preemptions"] = sum(pre)
        drafted = sum(h.get("spec_draft_tokens", 0) for h in hosts.values())
        if drafted > 0:  # the share of proposed tokens the target kept, over the level
            total["spec_acceptance"] = round(sum(h.get("spec_accepted_tokens", 0) for h in hosts.values()) / drafted, 4)
        return {
            **total,
            "metric_names": dict(self.names),
            "hosts": hosts,
            **({"errors": dict(self.errors)} if self.errors else {}),
        }
