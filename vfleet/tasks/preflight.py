"""preflight (audit), preflight.capture (snapshots) and plan (capacity) tasks."""
from __future__ import annotations

import json
from pathlib import Path

from invoke import Collection, task
from rich.console import Console
from rich.table import Table

from fleet.errors import VfleetError
from roles import audit, capacity, replica, replica_allreduce, replica_preflight
from roles.capacity.parallel import ParallelPlan, plan_parallel
from roles.preflight.checks import check_tp_heads
from roles.preflight.model_facts import with_model_source
from roles.variables import VLLM_GROUP
from vfleet.tasks.common import cli_errors, finish, helptext, load, make_play, select

COMMON = ("inventory", "limit", "set", "forks", "report", "no_host_key_checking", "connect_timeout")


def replica_checks(play, inv, facts: dict, allreduce: bool = False) -> dict[str, list[dict]]:
    """Cross-member checks of multi-host replicas (roles/replica_preflight.py), with the
    optional all-reduce across members (roles/replica_allreduce.py); live only."""
    replicas = replica.find_replicas(inv)
    if not replicas or not facts:
        return {}
    member_facts = replica_preflight.gather(play, replicas)
    vars_by_host = {h: inv.hosts[h].vars for h in member_facts}
    out = replica_preflight.member_checks(replicas, facts, member_facts, vars_by_host)
    if allreduce:
        results = replica_allreduce.run(play, replicas, member_facts, vars_by_host)
        for r in replicas.values():
            port = int(vars_by_host.get(r.head, {}).get("replica_allreduce_port") or 29599)
            for h in (m for m in r.members if m in out):
                out[h].append(replica_allreduce.to_check(r, h, results.get(h), port).to_dict())
    return out


@task(name="preflight", default=True,
      help=helptext(*COMMON, snapshot="Audit from DIR/<host>/ snapshots (preflight.capture) instead of SSH",
                    strict="Warnings fail too",
                    nccl_bandwidth="Also run an all-reduce across each host's tensor-parallel GPUs (torch + NCCL)",
                    replica_allreduce="Also run one all-reduce across each multi-host replica's members "
                                      "(torch.distributed: nccl on GPUs, gloo without)"),
      iterable=["set_"])
@cli_errors
def preflight_task(c, inventory=None, limit=None, set_=None, forks=10, report=None, no_host_key_checking=False,
                   connect_timeout=None, snapshot=None, strict=False, nccl_bandwidth=False, replica_allreduce=False):
    """Audit hosts before a deploy or an upgrade: GPUs, driver, CUDA, topology, NCCL, disk, shm,
    capacity. `--set vllm_version=NEW` tells what a new version breaks. Exit 1 on a failed check."""
    if nccl_bandwidth and snapshot:
        raise VfleetError("--nccl-bandwidth needs the hosts themselves, not --snapshot")
    if replica_allreduce and snapshot:
        raise VfleetError("--replica-allreduce needs the hosts themselves, not --snapshot")
    inv = load(inventory, set_)
    hosts = select(inv, limit)
    play = make_play("preflight", hosts, forks=forks, no_host_key_checking=no_host_key_checking,
                     connect_timeout=connect_timeout)
    facts = audit.from_snapshots(play, snapshot) if snapshot else audit.gather(play)
    extra = {}
    if nccl_bandwidth:
        extra = {h: [d["check"]] for h, d in audit.bandwidth_checks(play, facts).items()}
    for h, checks in ({} if snapshot else replica_checks(play, inv, facts, replica_allreduce)).items():
        extra.setdefault(h, []).extend(checks)
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


def print_layout(console: Console, title: str, lay: ParallelPlan) -> None:
    """One line for the smallest TP x PP layout (roles/capacity/parallel.py), then its stage plan."""
    if not lay.fits:
        console.print(f"[{title}] [red]no layout fits[/]: " + "; ".join(lay.tried), markup=True)
        return
    where = f"{lay.hosts} hosts x {lay.gpus_per_host} GPUs: a multi-host replica (README 'Multi-node replicas')" \
        if lay.multi_host else "one host"
    console.print(f"[{title}] smallest layout: tensor_parallel_size {lay.tensor_parallel_size} x "
                  f"pipeline_parallel_size {lay.pipeline_parallel_size} = {lay.gpus} GPUs on {where}", markup=False)
    if lay.stage:
        print_plan(console, f"{title}: busiest pipeline stage" if lay.pipeline_parallel_size > 1 else title, lay.stage)


def _plan_offline(config: str, report: str | None, gpu_memory_mib, cpu_kvcache_space_gib, gpus_per_host=None,
                  hosts=None, **engine) -> None:
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
    if gpus_per_host:
        engine.pop("tp")
        lay = plan_parallel(cfg, int(gpu_memory_mib), gpus_per_host=int(gpus_per_host), hosts=int(hosts or 1),
                            weights_bytes=weights, **engine)
        print_layout(console, "layout", lay)
        if report:
            from fleet.report import write_json_atomic
            write_json_atomic(report, lay.to_dict())
        return
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
                    cpu_kvcache_space_gib="With --config: plan the CPU build's KV cache instead (GiB)",
                    gpus_per_host="With --config: find the smallest TP x PP on hosts of this many GPUs",
                    hosts="With --gpus-per-host: hosts available (default 1)"),
      iterable=["set_"])
@cli_errors
def plan(c, inventory=None, limit=None, set_=None, forks=10, report=None, no_host_key_checking=False, snapshot=None,
         config=None, gpu_memory_mib=None, tp=1, utilization=0.9, max_model_len=None, max_num_seqs=None,
         dtype="auto", kv_cache_dtype="auto", max_num_batched_tokens=None, enforce_eager=False,
         cpu_kvcache_space_gib=None, gpus_per_host=None, hosts=None):
    """Capacity plan: weight bytes, KV bytes per token, KV capacity, max concurrency, suggested
    max_num_seqs / max_model_len, from config.json and the GPUs' memory."""
    console = Console(highlight=False)
    if config:
        _plan_offline(config, report, gpu_memory_mib, cpu_kvcache_space_gib, gpus_per_host, hosts, tp=int(tp),
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
        layout = _fleet_layout(cfg, f, facts)
        if layout is not None:
            ctx.result.data["layout"] = layout.to_dict()
            print_layout(console, name, layout)
    finish(play, report)


def _fleet_layout(cfg, f: dict, facts: dict[str, dict]) -> ParallelPlan | None:
    """Smallest TP x PP for this host's model over the audited hosts with its GPU model."""
    gpus = f.get("gpus") or []
    if not gpus or not f.get("model_config") or not gpus[0].get("memory_total_mib"):
        return None
    same = [h for h, g in facts.items() if (g.get("gpus") or [{}])[0].get("name") == gpus[0].get("name")]
    v = cfg.as_vars()
    return plan_parallel(f["model_config"], int(gpus[0]["memory_total_mib"]), gpus_per_host=len(gpus),
                         hosts=max(1, len(same)), weights_bytes=f.get("weights_bytes") or v.get("model_size_bytes"),
                         dtype=v["dtype"], gpu_memory_utilization=float(v["gpu_memory_utilization"]),
                         max_model_len=v.get("max_model_len"), max_num_seqs=v.get("max_num_seqs"),
                         kv_cache_dtype=v["kv_cache_dtype"], enforce_eager=bool(v["enforce_eager"]))


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
