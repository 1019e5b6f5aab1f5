"""preflight (audit), preflight.capture (snapshots) and plan (capacity) tasks."""
from __future__ import annotations

import json
from pathlib import Path

from invoke import Collection, task
from rich.console import Console
from rich.table import Table

from fleet.errors import VfleetError
from roles import audit, capacity
from roles.preflight.checks import check_tp_heads
from roles.preflight.model_facts import with_model_source
from roles.variables import VLLM_GROUP
from vfleet.tasks.common import cli_errors, finish, helptext, load, make_play, select

COMMON = ("inventory", "limit", "set", "forks", "report", "no_host_key_checking", "connect_timeout")


@task(name="preflight", default=True,
      help=helptext(*COMMON, snapshot="Audit from DIR/<host>/ snapshots (preflight.capture) instead of SSH",
                    strict="Warnings fail too",
                    nccl_bandwidth="Also run an all-reduce across each host's tensor-parallel GPUs (torch + NCCL)"),
      iterable=["set_"])
@cli_errors
def preflight_task(c, inventory=None, limit=None, set_=None, forks=10, report=None, no_host_key_checking=False,
                   connect_timeout=None, snapshot=None, strict=False, nccl_bandwidth=False):
    """Audit hosts before a deploy or an upgrade: GPUs, driver, CUDA, topology, NCCL, disk, shm,
    capacity. `--set vllm_version=NEW` tells what a new version breaks. Exit 1 on a failed check."""
    if nccl_bandwidth and snapshot:
        raise VfleetError("--nccl-bandwidth needs the hosts themselves, not --snapshot")
    inv = load(inventory, set_)
    hosts = select(inv, limit)
    play = make_play("preflight", hosts, forks=forks, no_host_key_checking=no_host_key_checking,
                     connect_timeout=connect_timeout)
    facts = audit.from_snapshots(play, snapshot) if snapshot else audit.gather(play)
    extra = {}
    if nccl_bandwidth:
        extra = {h: [d["check"]] for h, d in audit.bandwidth_checks(play, facts).items()}
    audit.audit(play, inv, facts, strict=strict, extra_checks=extra)
    play.data["source"] = f"snapshot:{snapshot}" if snapshot else "live"
    finish(play, report)


@task(help=helptext(*COMMON, dest="Folder to write DIR/<host>/ snapshots into (GPU profile layout + facts.json)"),
      iterable=["set_"])
@cli_errors
def capture(c, dest, inventory=None, limit=None, set_=None, forks=10, report=None, no_host_key_checking=False,
            connect_timeout=None):
    """Write each host's facts to DEST/<host>/ for offline audits (`preflight --snapshot DEST`)."""
    inv = load(inventory, set_)
    play = make_play("preflight.capture", select(inv, limit), forks=forks,
                     no_host_key_checking=no_host_key_checking, connect_timeout=connect_timeout)
    Path(dest).mkdir(parents=True, exist_ok=True)
    audit.gather(play, capture_dir=dest)
    finish(play, report)


def _plan_offline(config: str, report: str | None, gpu_memory_mib, cpu_kvcache_space_gib, **engine) -> None:
    """`plan --config`: the same planner and the same heads check as a preflight, no host."""
    console = Console(highlight=False)
    try:
        cfg = capacity.load_config(config)
    except (OSError, ValueError) as exc:
        raise VfleetError(f"--config {config}: cannot read the model's config.json: {exc}") from None
    if cpu_kvcache_space_gib:
        tokens = capacity.cpu_kv_capacity_tokens(cfg, float(cpu_kvcache_space_gib))
        print(json.dumps({"kv_capacity_tokens": tokens, "source": "cpu_kvcache_space_gib"}, indent=2))
        return
    if not gpu_memory_mib:
        raise VfleetError("--config needs --gpu-memory-mib (memory of one GPU, e.g. 32768 for a V100 32GB)")
    heads = check_tp_heads({"tensor_parallel_size": engine["tp"]}, {"model_config": cfg, "gpu_count": engine["tp"]})
    if heads.status == "fail":
        raise VfleetError(f"{heads.message}; {heads.fix}")
    weights = capacity.weights_bytes_from_dir(config) if Path(config).is_dir() else None
    p = capacity.plan(cfg, int(gpu_memory_mib), weights_bytes=weights, **engine)
    print_plan(console, "plan", p.to_dict())
    if report:
        from fleet.report import write_json_atomic
        write_json_atomic(report, p.to_dict())


@task(help=helptext("inventory", "limit", "set", "forks", "report", "no_host_key_checking",
                    snapshot="Read GPU facts from DIR/<host>/ snapshots instead of SSH",
                    config="Plan without an inventory: a model folder or its config.json",
                    gpu_memory_mib="With --config: memory of one GPU in MiB",
                    tp="With --config: tensor-parallel size", utilization="With --config: gpu_memory_utilization",
                    max_model_len="With --config: max_model_len", max_num_seqs="With --config: max_num_seqs",
                    dtype="With --config: dtype (auto: the model's)",
                    kv_cache_dtype="With --config: kv_cache_dtype (fp8 halves the KV bytes per token)",
                    max_num_batched_tokens="With --config: max_num_batched_tokens (the profiling pass)",
                    enforce_eager="With --config: no CUDA graphs (their memory is not reserved)",
                    cpu_kvcache_space_gib="With --config: plan the CPU build's KV cache instead (GiB)"),
      iterable=["set_"])
@cli_errors
def plan(c, inventory=None, limit=None, set_=None, forks=10, report=None, no_host_key_checking=False, snapshot=None,
         config=None, gpu_memory_mib=None, tp=1, utilization=0.9, max_model_len=None, max_num_seqs=None,
         dtype="auto", kv_cache_dtype="auto", max_num_batched_tokens=None, enforce_eager=False,
         cpu_kvcache_space_gib=None):
    """Capacity plan: weight bytes, KV bytes per token, KV capacity, max concurrency, suggested
    max_num_seqs / max_model_len, from config.json and the GPUs' memory."""
    console = Console(highlight=False)
    if config:
        _plan_offline(config, report, gpu_memory_mib, cpu_kvcache_space_gib, tp=int(tp),
                      gpu_memory_utilization=float(utilization),
                      max_model_len=int(max_model_len) if max_model_len else None,
                      max_num_seqs=int(max_num_seqs) if max_num_seqs else None, dtype=dtype,
                      kv_cache_dtype=kv_cache_dtype, enforce_eager=bool(enforce_eager),
                      max_num_batched_tokens=int(max_num_batched_tokens) if max_num_batched_tokens else None)
        return
    inv = load(inventory, set_)
    hosts = [h for h in select(inv, limit) if VLLM_GROUP in h.groups] or select(inv, limit)
    play = make_play("plan", hosts, forks=forks, no_host_key_checking=no_host_key_checking)
    facts = audit.from_snapshots(play, snapshot) if snapshot else audit.gather(play)
    for name, f in facts.items():
        ctx = play.contexts[name]
        cfg = ctx.config
        f = with_model_source(f, cfg.as_vars())  # the controller's copy of the model, if any
        if cfg.cpu_kvcache_space_gib and f.get("model_config"):
            tokens = capacity.cpu_kv_capacity_tokens(f["model_config"], float(cfg.cpu_kvcache_space_gib))
            ctx.result.data["capacity"] = {"kv_capacity_tokens": tokens, "source": "cpu_kvcache_space_gib"}
            print_plan(console, name, ctx.result.data["capacity"])
            continue
        p = capacity.plan_for_host(cfg.as_vars(), f)
        if p is None:
            ctx.result.data["capacity"] = None
            console.print(f"[{name}] no plan: needs GPUs and the model's config.json", markup=False)
            continue
        ctx.result.data["capacity"] = p.to_dict()
        print_plan(console, name, p.to_dict())
    finish(play, report)


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


preflight = Collection("preflight")
preflight.add_task(preflight_task, default=True)
preflight.add_task(capture)
