"""Running a whole sweep with the terminal view (rich: a progress bar per level, the table
after each), then the analysis and the files: JSON, CSV, PNG."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vfleet.clients.bench.client import Endpoint, RequestRecord
from vfleet.clients.bench.knee import analyse
from vfleet.clients.bench.limits import ServerErrors, first_counter, fit_prompts, served_max_model_len
from vfleet.clients.bench.output import level_table, print_analysis, write_csv, write_json, write_png
from vfleet.clients.bench.prompts import FilePrompts, SyntheticPrompts
from vfleet.clients.bench.sweep import Level, Sweep, SweepSettings


def parse_levels(concurrency: str | None, rate: str | None) -> list[Level]:
    from vfleet.engine.errors import VfleetError

    levels: list[Level] = []
    for mode, text in (("concurrency", concurrency), ("rate", rate)):
        if not text:
            continue
        for word in str(text).split(","):
            word = word.strip()
            try:
                v = float(word)
            except ValueError:
                raise VfleetError(f"--{mode} {text}: {word!r} is not a number") from None
            if v <= 0 or (mode == "concurrency" and not v.is_integer()):
                raise VfleetError(
                    f"--{mode} {text}: {word!r} must be a positive "
                    + ("integer" if mode == "concurrency" else "number")
                )
            levels.append(Level(mode, int(v) if mode == "concurrency" else v))
    if not levels:
        raise VfleetError("give --concurrency 1,4,16 and/or --rate 2,8")
    return levels


def run_sweep(
    ep: Endpoint,
    prompts: SyntheticPrompts | FilePrompts,
    levels: list[Level],
    settings: SweepSettings,
    *,
    metrics_urls: dict[str, str],
    n_hosts: int,
    target: dict[str, Any],
    slo_ttft_p95_s: float | None = None,
    slo_e2e_p95_s: float | None = None,
    out_dir: str | Path | None = None,
    name: str = "bench",
    console: Console | None = None,
    host_urls: Sequence[str] = (),
    inventory_max_model_len: int | None = None,
    measured: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The sweep, after checking its lengths against what the target serves (limits.py);
    `host_urls`: the vLLM hosts behind the target, whose /tokenize counts the prompts when the
    target (a gateway) does not pass it on; `measured`: the setup measured, kept in the result
    (vfleet/clients/measured.py) so bench.compare can say what changed between two runs."""
    console = console or Console(highlight=False)
    say = lambda line: console.print(line, markup=False, highlight=False)  # noqa: E731  (the server's text as is)
    fitted = fit_prompts(prompts, settings.output_len, served_max_model_len(ep, inventory_max_model_len), say)
    if isinstance(prompts, SyntheticPrompts) and not prompts.calibrated:
        count, where = first_counter(ep, host_urls)
        if count and prompts.calibrate(count):
            say(
                f"synthetic prompts: {prompts.words_for()} words ~ {prompts.input_len} tokens "
                f"(calibrated with {where}/tokenize)"
            )
        else:
            say(
                f"synthetic prompts: {prompts.words_for()} words (no /tokenize to calibrate with, on the target "
                "or a host behind it; the real prompt length is read from usage)"
            )
    results: list[dict[str, Any]] = []
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    ids: dict[str, Any] = {}
    counts: dict[str, list[int]] = {}

    def on_start(level: Level, total: int | None, warm: int) -> None:
        ids[level.label] = progress.add_task(f"{level.label:>12}", total=total, status=f"warm-up {warm}")
        counts[level.label] = [0, 0]

    def on_progress(level: Level, n: int, total: int | None, elapsed: float, rec: RequestRecord) -> None:
        c = counts[level.label]
        c[0 if rec.ok else 1] += 1
        progress.update(
            ids[level.label], completed=n, status=f"ok {c[0]} failed {c[1]}" + (" (warm-up)" if rec.warmup else "")
        )

    sweep = Sweep(ep, prompts, levels, settings, metrics_urls, on_progress=on_progress, on_level_start=on_start)
    errors = ServerErrors(say)
    with progress:
        for level in levels:
            results.append(sweep.run_level(level))
            errors.report(level.label, sweep.records[level.label])
    console.print(level_table(results, title=f"{name}: {ep.model} via {ep.base_url}"))
    analysis = analyse(results, n_hosts, slo_ttft_p95_s, slo_e2e_p95_s)
    print_analysis(console, analysis)
    for lv in results:
        c = lv.get("client") or {}
        if c.get("starved"):
            console.print(
                f"[yellow]warning[/]: {lv['label']}: the load generator waited {c['wait_per_request_ms']:.0f} ms "
                f"a request for a CPU (E2E p50 {lv['e2e_ms']['p50']:.0f} ms): its TTFT/TPOT/ITL read late; "
                "give it CPUs of its own (not the server's) or run it with `chrt -f 10`"
            )
    result = {
        "task": "bench",
        "format": 1,
        "name": name,
        "started": started,
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "model": ep.model,
        "target": target,
        "measured": measured or {},
        "settings": {
            "requests": settings.requests,
            "seconds": settings.seconds,
            "max_seconds": settings.max_seconds,
            "warmup": settings.warmup,
            "output_len": settings.output_len,
            "ignore_eos": settings.ignore_eos,
            "timeout_s": settings.timeout_s,
            "max_inflight": settings.max_inflight,
            "seed": settings.seed,
            "slo": {"ttft_p95_s": slo_ttft_p95_s, "e2e_p95_s": slo_e2e_p95_s},
        },
        "prompts": prompts.describe() | fitted,
        "metrics_hosts": sorted(metrics_urls),
        "n_hosts": n_hosts,
        "levels": results,
        "analysis": analysis,
    }
    if out_dir is not None:
        out = Path(out_dir)
        files = {"json": out / f"{name}.json", "csv": out / f"{name}.csv", "png": out / f"{name}.png"}
        result["files"] = {k: str(v) for k, v in files.items()}
        write_csv(files["csv"], results)
        write_png(files["png"], result)
        write_json(files["json"], result)
        console.print("written: " + ", ".join(str(v) for v in files.values()))
    return result
