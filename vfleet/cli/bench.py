"""bench and bench.compare: the load sweep that finds the knee, and the change between two.

What it needs of a host comes from its HostConfig (vfleet/config/hostconfig.py): base_url (vLLM:
address + vllm_port), gateway_url (address + gateway_port), served_model_name (default
model_name) and api_key. vfleet/roles/bench itself only takes URLs, a model name and a key."""

from __future__ import annotations

from invoke import Collection, task
from invoke.exceptions import Exit

from vfleet.cli.common import cli_errors, helptext, load, select
from vfleet.cli.measure import measured_record
from vfleet.cli.options import TaskOptions
from vfleet.config.hostconfig import HostConfig
from vfleet.config.variables import VLLM_GROUP
from vfleet.engine.errors import VfleetError

DEFAULT_CONCURRENCY = "1,4,16,64"

BENCH_HELP = helptext(
    "inventory",
    "set",
    "report",
    limit="vLLM hosts behind the target: whose /metrics are sampled, and what max_num_seqs is split over "
    "(default: all of group vllm)",
    target="Gateway host to send through (default: the first of group gateways)",
    host="Send to this one vLLM host directly instead of through a gateway",
    concurrency=f"Concurrency levels, e.g. 1,4,16,64,128 (default {DEFAULT_CONCURRENCY} when no --rate)",
    rate="Request rates (requests/s, Poisson arrivals), e.g. 2,8,32",
    requests="Measured requests per level (default: 4 x concurrency or 10 s of the rate, at least 32)",
    seconds="Measured seconds per level instead of a request count (the count still caps it when given)",
    max_seconds="Hard limit per level in seconds, whatever else is asked (default 600)",
    warmup="Warm-up requests per level, not counted (default: one per concurrent slot, 1 s of a rate)",
    input_len="Synthetic prompt length in tokens (default 256); prompts are distinct per request",
    output_len="Output tokens per request (default 128), exact with ignore_eos",
    natural="Let the model end naturally (no ignore_eos; --output-len is then only the cap)",
    dataset='Prompts from a file instead: JSONL of {"messages": [...]} or a ShareGPT-style JSON',
    dataset_format="auto (default), jsonl or sharegpt",
    seed="Seed for synthetic prompts and Poisson arrivals (default 0)",
    timeout="Seconds one request may take (default 300)",
    max_inflight="Rate levels: most requests in flight (default 1024)",
    out="Folder for NAME.json, NAME.csv and NAME.png (default: bench-results)",
    name="Base name of the files (default bench)",
    slo_ttft_p95="Target TTFT p95, e.g. 2s: print the highest level that meets it",
    slo_e2e_p95="Target end-to-end p95, e.g. 12s: print the highest level that meets it",
    metrics_interval="Seconds between /metrics samples (default 1)",
    server_metrics="Sample each vLLM host's /metrics during levels (default on; --no-server-metrics)",
    measure="Read each vLLM host's setup over SSH for the result's measured record: vLLM version and argv, "
    "GPUs, memory used (default on; --no-measure for a bench without SSH access)",
)


def _model(cfg: HostConfig) -> str:
    if not cfg.served_model_name:
        raise VfleetError(f"{cfg.name}: no model_name (or served_model_name) in the inventory: which model to ask for?")
    return str(cfg.served_model_name)


@task(help=BENCH_HELP, iterable=["set_"], auto_shortflags=False)
@cli_errors
def bench(
    c,
    inventory=None,
    limit=None,
    set_=None,
    report=None,
    target=None,
    host=None,
    concurrency=None,
    rate=None,
    requests=0,
    seconds=None,
    max_seconds=600,
    warmup=None,
    input_len=256,
    output_len=128,
    natural=False,
    dataset=None,
    dataset_format="auto",
    seed=0,
    timeout=300,
    max_inflight=1024,
    out="bench-results",
    name="bench",
    slo_ttft_p95=None,
    slo_e2e_p95=None,
    server_metrics=True,
    metrics_interval=None,
    measure=True,
):
    """Load sweep through a gateway (or one host): find the knee, suggest max_num_seqs.

    Writes the results as JSON, CSV and PNG."""
    # imported here, not at the top: the load generator's stack (httpx, plotting) cost every
    # other vfleet command ~0.3 s of start-up (measured by benchmarks/peer_race.py)
    from vfleet.clients.bench.client import Endpoint
    from vfleet.clients.bench.knee import parse_duration
    from vfleet.clients.bench.output import console as output_console
    from vfleet.clients.bench.prompts import SyntheticPrompts, load_file
    from vfleet.clients.bench.run import parse_levels, run_sweep
    from vfleet.clients.bench.sweep import SweepSettings

    opts = TaskOptions.of(locals())
    fleet = load(opts)
    inv = fleet.inventory
    vllm_hosts = select(fleet, opts.limit, VLLM_GROUP)
    if host:
        if host not in inv.hosts or VLLM_GROUP not in inv.hosts[host].groups:
            raise VfleetError(f"--host {host}: not a host of group '{VLLM_GROUP}' in {inv.path}")
        h = fleet.config(host)
        ep = Endpoint(h.base_url, _model(h), h.api_key)
        tgt = {"kind": "host", "name": h.name, "url": ep.base_url}
        behind = [h]
    else:
        gws = [g for g in fleet.gateways if target is None or g.name == target]
        if not gws:
            raise VfleetError(
                f"no gateway host{' ' + target if target else ''} in {inv.path}; "
                "give --target NAME or --host for one vLLM host"
            )
        g = fleet.config(gws[0])
        ep = Endpoint(g.gateway_url, _model(g), g.api_key, verify=g.gateway_verify)
        tgt = {"kind": "gateway", "name": g.name, "url": ep.base_url}
        behind = fleet.configs_of(vllm_hosts)
    levels = parse_levels(concurrency if (concurrency or rate) else DEFAULT_CONCURRENCY, rate)
    settings = SweepSettings(
        requests=int(requests) or None,
        seconds=parse_duration(seconds),
        max_seconds=float(max_seconds),
        warmup=None if warmup in (None, "") else int(warmup),
        output_len=int(output_len),
        ignore_eos=not natural,
        timeout_s=float(timeout),
        max_inflight=int(max_inflight),
        seed=int(seed),
        metrics_interval_s=parse_duration(metrics_interval) or 1.0,
        max_num_seqs=sum(h.max_num_seqs for h in behind) if all(h.max_num_seqs for h in behind) else None,
    )
    if settings.output_len < 1 or settings.max_seconds <= 0 or settings.max_inflight < 1:
        raise VfleetError("--output-len, --max-seconds and --max-inflight must be positive")
    prompts = load_file(dataset, dataset_format) if dataset else SyntheticPrompts(int(input_len), int(seed))
    metrics_urls = {h.name: h.base_url + "/metrics" for h in behind} if server_metrics else {}
    measured = measured_record(fleet, opts, [h.name for h in behind], one_host=bool(host)) if measure and behind else {}
    result = run_sweep(
        ep,
        prompts,
        levels,
        settings,
        metrics_urls=metrics_urls,
        n_hosts=max(len(behind), 1),
        target=tgt,
        slo_ttft_p95_s=parse_duration(slo_ttft_p95),
        slo_e2e_p95_s=parse_duration(slo_e2e_p95),
        out_dir=out,
        name=name,
        console=output_console(),
        host_urls=[h.base_url for h in behind],
        inventory_max_model_len=min((h.max_model_len for h in behind if h.max_model_len), default=None),
        measured=measured,
    )
    if opts.report:
        from vfleet.clients.bench.output import write_json

        write_json(opts.report, result)
    if any(not lv["completed"] for lv in result["levels"]):
        print("error: a level completed no request (see errors above)")
        raise Exit(code=1)


@task(
    name="compare",
    help={"a": "The earlier result (JSON from vfleet bench)", "b": "The later result"},
    positional=["a", "b"],
)
@cli_errors
def compare(c, a, b):
    """Print the change between two bench results, level by level."""
    from vfleet.clients.bench import compare as cmp
    from vfleet.clients.bench.output import console as output_console

    ra, rb = cmp.load(a), cmp.load(b)
    result = cmp.compare(ra, rb)
    console = output_console()
    if not result["levels"]:
        raise VfleetError(f"{a} and {b} share no level (mode and value): nothing to compare")
    console.print(cmp.table(result, a, b))
    console.print(cmp.setup_line(ra, rb, a, b), markup=False, highlight=False)
    for side, labels in (("only in " + a, result["only_in_a"]), ("only in " + b, result["only_in_b"])):
        if labels:
            console.print(f"{side}: {', '.join(labels)}")
    for mode, s in result["analysis"].items():
        parts = [f"{k.replace('suggested_', '')} {s[k][0]} -> {s[k][1]}" for k in s if s[k][0] != s[k][1]]
        console.print(f"{mode}: " + ("; ".join(parts) if parts else "knee and suggestions unchanged"))


bench_ns = Collection("bench")
bench_ns.add_task(bench, name="bench", default=True)
bench_ns.add_task(compare)
