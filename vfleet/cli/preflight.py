"""preflight (audit), preflight.capture (snapshots) and plan (capacity) tasks. What they run
beyond their flags is in vfleet/cli/preflight_steps.py, loaded when one of them runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from invoke import Collection, Task, task
from rich.console import Console

from vfleet.cli.common import cli_errors, finish, helptext, load, make_play, select
from vfleet.cli.options import TaskOptions
from vfleet.config.variables import VLLM_GROUP
from vfleet.engine.errors import VfleetError

COMMON = ("inventory", "limit", "set", "forks", "report", "no_host_key_checking", "connect_timeout")


class LetterShortflags(Task):
    """Invoke gives each option the first character of its dashed name not yet taken as its
    short flag, '-' included: in plan and preflight, whose options are many, the letters
    before the first dash of --max-num-batched-tokens and --nccl-bandwidth were taken, so they
    got '-', which --help showed as a nameless `--=STRING` and `--`. Here a short flag is never
    '-'; an option whose letters are all taken has none."""

    def arg_opts(self, name: str, default: Any, taken_names: set[str]) -> dict[str, Any]:
        return super().arg_opts(name, default, taken_names | {"-"})


@dataclass(frozen=True)
class AuditSource:
    """Where an audit's facts came from: "live", or "snapshot:DIR" (the report's "source")."""

    REPORT_KEY: ClassVar[str] = "source"

    snapshot: str | None

    def to_dict(self) -> str:
        return f"snapshot:{self.snapshot}" if self.snapshot else "live"


@task(
    name="preflight",
    default=True,
    klass=LetterShortflags,
    help=helptext(
        *COMMON,
        snapshot="Audit from DIR/<host>/ snapshots (preflight.capture) instead of SSH",
        strict="Warnings fail too",
        nccl_bandwidth="Also run an all-reduce across each host's tensor-parallel GPUs (torch + NCCL)",
        replica_allreduce="Also run one all-reduce across each multi-host replica's members "
        "(torch.distributed: nccl on GPUs, gloo without)",
    ),
    iterable=["set_"],
)
@cli_errors
def preflight_task(
    c,
    inventory=None,
    limit=None,
    set_=None,
    forks=10,
    report=None,
    no_host_key_checking=False,
    connect_timeout=None,
    snapshot=None,
    strict=False,
    nccl_bandwidth=False,
    replica_allreduce=False,
):
    """Audit hosts before a deploy or an upgrade; exit 1 on a failed check.

    GPUs, driver, CUDA, topology, NCCL, disk, shm, capacity. `--set vllm_version=NEW` tells
    what a new version breaks."""
    from vfleet.cli.preflight_steps import replica_checks
    from vfleet.roles.preflight import audit

    opts = TaskOptions.of(locals())
    if nccl_bandwidth and snapshot:
        raise VfleetError("--nccl-bandwidth needs the hosts themselves, not --snapshot")
    if replica_allreduce and snapshot:
        raise VfleetError("--replica-allreduce needs the hosts themselves, not --snapshot")
    fleet = load(opts)
    play = make_play("preflight", fleet, select(fleet, opts.limit), opts)
    facts = audit.from_snapshots(play, snapshot) if snapshot else audit.gather(play)
    extra = {}
    if nccl_bandwidth:
        extra = {h: [d["check"]] for h, d in audit.bandwidth_checks(play, facts).items()}
    for h, checks in ({} if snapshot else replica_checks(play, fleet, facts, replica_allreduce)).items():
        extra.setdefault(h, []).extend(checks)
    audit.audit(play, fleet.inventory, facts, strict=strict, extra_checks=extra)
    play.note(AuditSource(snapshot))
    finish(play, opts)


@task(
    help=helptext(*COMMON, dest="Folder to write DIR/<host>/ snapshots into (GPU profile layout + facts.json)"),
    iterable=["set_"],
)
@cli_errors
def capture(
    c,
    dest,
    inventory=None,
    limit=None,
    set_=None,
    forks=10,
    report=None,
    no_host_key_checking=False,
    connect_timeout=None,
):
    """Write each host's facts to DEST/<host>/ for offline audits (`preflight --snapshot DEST`)."""
    from vfleet.roles.preflight import audit

    opts = TaskOptions.of(locals())
    fleet = load(opts)
    play = make_play("preflight.capture", fleet, select(fleet, opts.limit), opts)
    Path(dest).mkdir(parents=True, exist_ok=True)
    audit.gather(play, capture_dir=dest)
    finish(play, opts)


@task(
    klass=LetterShortflags,
    help=helptext(
        "inventory",
        "limit",
        "set",
        "forks",
        "report",
        "no_host_key_checking",
        snapshot="Read GPU facts from DIR/<host>/ snapshots instead of SSH",
        config="Plan without an inventory: a model folder or its config.json",
        gpu_memory_mib="With --config: memory of one GPU in MiB",
        tp="With --config: tensor-parallel size",
        utilization="With --config: gpu_memory_utilization",
        max_model_len="With --config: max_model_len",
        max_num_seqs="With --config: max_num_seqs",
        dtype="With --config: dtype (auto: the model's)",
        kv_cache_dtype="With --config: kv_cache_dtype (fp8 halves the KV bytes per token)",
        quantization="With --config: quantization vLLM applies at load (fp8); a quantized "
        "checkpoint's own quantization_config is read from config.json",
        max_num_batched_tokens="With --config: max_num_batched_tokens (the profiling pass)",
        enforce_eager="With --config: no CUDA graphs (their memory is not reserved)",
        cpu_kvcache_space_gib="With --config: plan the CPU build's KV cache instead (GiB)",
        gpus_per_host="With --config: find the smallest TP x PP on hosts of this many GPUs",
        hosts="With --gpus-per-host: hosts available (default 1)",
    ),
    iterable=["set_"],
)
@cli_errors
def plan(
    c,
    inventory=None,
    limit=None,
    set_=None,
    forks=10,
    report=None,
    no_host_key_checking=False,
    snapshot=None,
    config=None,
    gpu_memory_mib=None,
    tp=1,
    utilization=0.9,
    max_model_len=None,
    max_num_seqs=None,
    dtype="auto",
    kv_cache_dtype="auto",
    max_num_batched_tokens=None,
    enforce_eager=False,
    cpu_kvcache_space_gib=None,
    gpus_per_host=None,
    hosts=None,
    quantization=None,
):
    """Capacity plan: KV capacity, max concurrency, suggested max_num_seqs and max_model_len.

    From config.json and the GPUs' memory: weight bytes, KV bytes per token, KV capacity, max
    concurrency, suggested max_num_seqs / max_model_len."""
    from vfleet.cli import preflight_steps as steps
    from vfleet.roles.preflight import audit

    opts = TaskOptions.of(locals())
    console = Console(highlight=False)
    if config:
        num = steps.number_flag
        steps.plan_offline(
            config,
            report,
            num("gpu-memory-mib", gpu_memory_mib),
            num("cpu-kvcache-space-gib", cpu_kvcache_space_gib, float),
            num("gpus-per-host", gpus_per_host),
            num("hosts", hosts),
            tp=num("tp", tp),
            gpu_memory_utilization=num("utilization", utilization, float),
            max_model_len=num("max-model-len", max_model_len),
            max_num_seqs=num("max-num-seqs", max_num_seqs),
            dtype=dtype,
            kv_cache_dtype=kv_cache_dtype,
            enforce_eager=bool(enforce_eager),
            max_num_batched_tokens=num("max-num-batched-tokens", max_num_batched_tokens),
            quantization=steps.quantization_flag(quantization),
        )
        return
    fleet = load(opts)
    hosts = select(fleet, opts.limit, VLLM_GROUP) or select(fleet, opts.limit)
    play = make_play("plan", fleet, hosts, opts)
    facts = audit.from_snapshots(play, snapshot) if snapshot else audit.gather(play)
    steps.plan_hosts(play, facts, console)
    finish(play, opts)


preflight = Collection("preflight")
preflight.add_task(preflight_task, default=True)
preflight.add_task(capture)
