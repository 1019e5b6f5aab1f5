"""eval.variants: model variants (bf16, AWQ, GPTQ, FP8 ...) compared on memory, speed and eval
score from the files `vfleet bench` and `vfleet eval` wrote; nothing connects to a host.

Exit 0 when every variant is accepted, 1 when one is rejected (its score dropped more than
--max-score-drop below the baseline's), 2 on bad input."""

from __future__ import annotations

import re

from invoke import task
from invoke.exceptions import Exit

from vfleet.cli.common import cli_errors
from vfleet.engine.errors import VfleetError

VARIANTS_HELP = {
    "variant": "NAME=BENCH.json,EVAL.json: a variant's `vfleet bench` result and `vfleet eval` report "
    "(repeat, two or more; the first is the baseline)",
    "max_score_drop": "Largest eval score drop below the baseline accepted, as a fraction (default 0.03 = 3 points)",
    "level": "Concurrency level of the benches to compare (default: the highest level every variant completed)",
    "out": "Folder for NAME.json (the table) and NAME.png (default: variants-results)",
    "name": "Base name of the files (default variants)",
}


def _max_score_drop(text: str | None, default: float) -> float:
    if text in (None, ""):
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:  # NaN fails this too
        raise VfleetError(f"--max-score-drop {text}: expected a fraction from 0 to 1, e.g. 0.03 for 3 points")
    return value


def _level(text: str | None) -> int | None:
    if text in (None, ""):
        return None
    if not re.fullmatch(r"[1-9][0-9]*", str(text)):
        raise VfleetError(f"--level {text}: expected a concurrency level the benches ran, e.g. 64")
    return int(text)


@task(name="variants", help=VARIANTS_HELP, iterable=["variant"], auto_shortflags=False)
@cli_errors
def variants(c, variant=None, max_score_drop=None, level=None, out="variants-results", name="variants"):
    """Compare model variants (bf16, AWQ, GPTQ, FP8) on memory, speed and eval score.

    One table, one PNG and a verdict line per variant against the first (the baseline)."""
    from pathlib import Path

    from vfleet.clients.bench.output import console as output_console, write_json
    from vfleet.clients.variants import judge
    from vfleet.clients.variants.inputs import load_variants, parse_specs
    from vfleet.clients.variants.plot import write_png

    specs = parse_specs(list(variant or []))
    drop = _max_score_drop(max_score_drop, judge.DEFAULT_MAX_SCORE_DROP)
    at, rows = load_variants(specs, _level(level))
    judgements = judge.judge_all(rows, drop)
    warned = judge.warnings(rows)
    console = output_console()
    console.print(judge.table(rows, at, judgements))
    for line in warned:
        console.print(f"[yellow]warning[/]: {line}")
    for j in judgements:
        console.print(j.line, markup=False)
    files = {"json": Path(out) / f"{name}.json", "png": Path(out) / f"{name}.png"}
    write_png(files["png"], rows, at, judgements, drop)
    write_json(
        files["json"],
        judge.result_dict(rows, at, drop, judgements, warned) | {"files": {k: str(v) for k, v in files.items()}},
    )
    console.print("written: " + ", ".join(str(v) for v in files.values()))
    if not all(j.accepted for j in judgements):
        raise Exit(code=1)
