"""What preflight and plan do beyond their flags: the replicas' cross-member checks, the capacity
plan of each audited host and of a model folder, and how a plan is printed. Apart from
vfleet/cli/preflight.py so that the audit's roles load only when one of those tasks runs
(vfleet/cli/__init__.py)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from rich.console import Console
from rich.table import Table

from vfleet.config.fleet import Fleet
from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError
from vfleet.engine.runner import Play
from vfleet.roles.preflight import (
    DEFAULT_BLOCK_SIZE,
    CapacityRecord,
    ParallelPlan,
    capacity,
    check_inputs,
    check_tp_heads,
    draft_of,
    plan_parallel,
    with_adapters,
    with_model_source,
)
from vfleet.roles.replica import allreduce as replica_allreduce, preflight as replica_preflight
from vfleet.roles.weights import controller_folder


def replica_checks(play: Play, fleet: Fleet, facts: dict, allreduce: bool = False) -> dict[str, list[dict]]:
    """Cross-member checks of multi-host replicas (vfleet/roles/replica/_preflight.py), with the
    optional all-reduce across members (vfleet/roles/replica/_allreduce.py); live only."""
    replicas = fleet.replicas
    if not replicas or not facts:
        return {}
    member_facts = replica_preflight.gather(play, replicas)
    settings = {h: play.contexts[h].config.replica for h in member_facts}
    out = replica_preflight.member_checks(replicas, facts, member_facts, settings)
    if allreduce:
        results = replica_allreduce.run(play, replicas, member_facts, settings)
        for r in replicas.values():
            for h in (m for m in r.members if m in out):  # every member gathered, the head too
                port = settings[r.head].allreduce_port
                out[h].append(replica_allreduce.to_check(r, h, results.get(h), port).to_dict())
    return out


def print_layout(console: Console, title: str, lay: ParallelPlan) -> None:
    """One line for the smallest TP x PP layout (vfleet/roles/preflight/_capacity/parallel.py), then its stage plan."""
    if not lay.fits:
        console.print(f"[{title}] [red]no layout fits[/]: " + "; ".join(lay.tried), markup=True)
        return
    where = (
        f"{lay.hosts} hosts x {lay.gpus_per_host} GPUs: a multi-host replica (docs/replicas.md)"
        if lay.multi_host
        else "one host"
    )
    console.print(
        f"[{title}] smallest layout: tensor_parallel_size {lay.tensor_parallel_size} x "
        f"pipeline_parallel_size {lay.pipeline_parallel_size} = {lay.gpus} GPUs on {where}",
        markup=False,
    )
    if lay.stage:
        print_plan(console, f"{title}: busiest pipeline stage" if lay.pipeline_parallel_size > 1 else title, lay.stage)


def number_flag(flag: str, value: object, kind: type = int) -> int | float | None:
    """A `plan --config` number flag (invoke hands them over as text): None when not given, else
    a finite number of `kind`, or a one-line error naming the flag. Its range is the planner's
    to judge (capacity/figures.py)."""
    if value is None or value == "":
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError):
        what = "an integer" if kind is int else "a number"
        raise VfleetError(f"--{flag}: expected {what}, got {str(value)[:40]!r}") from None
    if kind is float and not math.isfinite(number):
        raise VfleetError(f"--{flag}: expected a finite number, got {str(value)[:40]!r}")
    return number


def quantization_flag(value: str | None) -> str | None:
    """`plan --quantization`: a method name as the inventory's `quantization` takes it."""
    if value in (None, ""):
        return None
    if not re.fullmatch(r"[a-z0-9_]{1,40}", str(value)):
        raise VfleetError(
            f"--quantization: expected a method name such as fp8 (lower-case letters, digits, _), "
            f"got {str(value)[:40]!r}"
        )
    return str(value)


def plan_offline(
    config: str, report: str | None, gpu_memory_mib, cpu_kvcache_space_gib, gpus_per_host=None, hosts=None, **engine
) -> None:
    """`plan --config`: the same planner and the same heads check as a preflight, no host."""
    console = Console(highlight=False)
    cfg = capacity.load_config(config)  # bounded, strict, checked: errors name the file and the key
    engine["config_label"] = str(Path(config) / "config.json" if Path(config).is_dir() else config)
    if cpu_kvcache_space_gib is not None:
        tokens = capacity.cpu_kv_capacity_tokens(cfg, cpu_kvcache_space_gib, config_label=engine["config_label"])
        print(json.dumps({"kv_capacity_tokens": tokens, "source": "cpu_kvcache_space_gib"}, indent=2))
        return
    if gpu_memory_mib is None:
        raise VfleetError("--config needs --gpu-memory-mib (memory of one GPU, e.g. 32768 for a V100 32GB)")
    check_inputs(gpu_memory_mib=gpu_memory_mib, tp=engine["tp"], block_size=DEFAULT_BLOCK_SIZE)  # before tp divides
    heads = check_tp_heads(engine["tp"], {"model_config": cfg, "gpu_count": engine["tp"]})
    if heads.status == "fail":
        raise VfleetError(f"{heads.message}; {heads.fix}")
    weights = capacity.weights_bytes_from_dir(config) if Path(config).is_dir() else None
    if gpus_per_host:
        engine.pop("tp")
        lay = plan_parallel(
            cfg, gpu_memory_mib, gpus_per_host=gpus_per_host, hosts=hosts or 1, weights_bytes=weights, **engine
        )
        print_layout(console, "layout", lay)
        if report:
            from vfleet.engine.report import write_json_atomic

            write_json_atomic(report, lay.to_dict())
        return
    p = capacity.plan(cfg, gpu_memory_mib, weights_bytes=weights, **engine)
    print_plan(console, "plan", p.to_dict())
    if report:
        from vfleet.engine.report import write_json_atomic

        write_json_atomic(report, p.to_dict())


def plan_hosts(play: Play, facts: dict[str, dict], console: Console) -> None:
    """Each audited host's capacity plan (and smallest layout) noted on its result, printed."""
    for name, f in facts.items():
        ctx = play.contexts[name]
        cfg = ctx.config
        f = with_adapters(with_model_source(f, controller_folder(cfg)), cfg)  # the controller's copies, if any
        if cfg.cpu_kvcache_space_gib and f.get("model_config"):
            tokens = capacity.cpu_kv_capacity_tokens(
                f["model_config"], float(cfg.cpu_kvcache_space_gib), draft=draft_of(cfg.speculative, f)
            )
            record = CapacityRecord(cpu_kv_capacity_tokens=tokens)
            record.note_on(ctx.result)
            print_plan(console, name, record.capacity())
            continue
        p = capacity.plan_for_host(cfg, f)
        if p is None:
            CapacityRecord().note_on(ctx.result)
            console.print(f"[{name}] no plan: needs GPUs and the model's config.json", markup=False)
            continue
        layout = _fleet_layout(cfg, f, facts)
        CapacityRecord(p, layout).note_on(ctx.result)
        print_plan(console, name, p.to_dict())
        if layout is not None:
            print_layout(console, name, layout)


def _fleet_layout(cfg: HostConfig, f: dict, facts: dict[str, dict]) -> ParallelPlan | None:
    """Smallest TP x PP for this host's model over the audited hosts with its GPU model, with
    everything the host's own plan counts (LoRA stacks, a speculative draft, quantization,
    the batch budget, a fixed KV size)."""
    gpus = f.get("gpus") or []
    if not gpus or not f.get("model_config") or not gpus[0].get("memory_total_mib"):
        return None
    same = [h for h, g in facts.items() if (g.get("gpus") or [{}])[0].get("name") == gpus[0].get("name")]
    return plan_parallel(
        f["model_config"],
        int(gpus[0]["memory_total_mib"]),
        gpus_per_host=len(gpus),
        hosts=max(1, len(same)),
        weights_bytes=f.get("weights_bytes") or cfg.model_size_bytes,
        dtype=cfg.dtype,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        max_model_len=cfg.max_model_len,
        max_num_seqs=cfg.max_num_seqs,
        kv_cache_dtype=cfg.kv_cache_dtype,
        enforce_eager=cfg.enforce_eager,
        quantization=cfg.quantization,
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        kv_cache_memory_bytes=cfg.kv_cache_memory_bytes,
        lora=capacity.lora_of(cfg, f),
        draft=draft_of(cfg.speculative, f),
    )


def print_plan(console: Console, title: str, d: dict) -> None:
    t = Table(title=f"capacity [{title}]", title_justify="left", show_header=False, show_edge=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    for k, v in d.items():
        if k == "warnings":
            continue
        t.add_row(k, f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v))
    console.print(t)
    for w in d.get("warnings") or []:
        console.print(f"[yellow]warning[/]: {w}")
