"""The variants' files, read and checked: per variant a `vfleet bench` result (its figures at
one concurrency level) and a `vfleet eval` report (its score), each with the `measured` record
of the server it ran against (vfleet/clients/measured.py).

Eval reports are read by EvalReport.load, the one strict reader of the format `vfleet eval`
writes (and the gate and eval.compare read), so a tampered file is refused the same way
everywhere. Every mistake is one line naming the variant, the file and the fix (a VfleetError:
the CLI exits 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from vfleet.clients.eval.report import EvalReport
from vfleet.clients.measured import differences
from vfleet.engine.errors import VfleetError
from vfleet.engine.strict_json import MIB, mapping, positive_number, read_json

MAX_FILE_BYTES = 256 * MIB  # a bench result: per level its figures (eval reports: clients.eval.report.MAX_BYTES)
SPEC_FORM = "NAME=BENCH.json,EVAL.json"
BENCH_FIX = "give the NAME.json that `vfleet bench --out DIR --name NAME` wrote"
EVAL_FIX = "give the JSON report that `vfleet eval` wrote"


@dataclass(frozen=True)
class VariantSpec:
    """One --variant: a name and its two files."""

    name: str
    bench: str
    eval: str


@dataclass(frozen=True)
class Variant:
    """One variant as compared: its bench level, its eval score and what both measured."""

    name: str
    bench_path: str
    eval_path: str
    level: Mapping[str, Any]  # the bench level compared (stats.summarize's shape)
    passed: int  # eval items passed
    scored: int  # eval items with an expectation
    divergence: float | None  # mean nats/token under the reference run, when it had one
    measured: Mapping[str, Any]  # the bench's record, the eval's filling its gaps
    mismatch: list[str] = field(default_factory=list)  # setup fields the bench and the eval disagree on

    @property
    def score(self) -> float:
        return self.passed / self.scored

    @property
    def planned_weights_gib(self) -> float | None:
        return self.measured.get("planned_weights_gib")

    @property
    def gpu_memory_used_gib(self) -> float | None:
        mib = self.measured.get("gpu_memory_used_mib")
        return None if mib is None else mib / 1024

    @property
    def output_throughput(self) -> float | None:
        return self.level.get("output_throughput")

    @property
    def ttft_p95_ms(self) -> float | None:
        return (self.level.get("ttft_ms") or {}).get("p95")

    @property
    def precision(self) -> str:
        """dtype / quantization as the table shows it ("bfloat16", "float16 / awq_marlin")."""
        words = [str(self.measured[k]) for k in ("dtype", "quantization") if self.measured.get(k)]
        return " / ".join(words) or "-"


def parse_specs(values: Sequence[str]) -> list[VariantSpec]:
    """The --variant values, in order (the first is the baseline): names unique, at least two."""
    specs: list[VariantSpec] = []
    for value in values:
        name, sep, files = value.partition("=")
        paths = files.split(",")
        if not sep or not name.strip() or len(paths) != 2 or not all(p.strip() for p in paths):
            raise VfleetError(
                f"--variant {value}: expected {SPEC_FORM} (a name, '=', the bench result and the "
                "eval report with a comma between)"
            )
        if any(s.name == name.strip() for s in specs):
            raise VfleetError(f"--variant {name.strip()} is given twice: give each variant a name of its own")
        specs.append(VariantSpec(name.strip(), paths[0].strip(), paths[1].strip()))
    if len(specs) < 2:
        raise VfleetError(
            f"eval.variants compares two or more: give --variant {SPEC_FORM} at least twice (the first is the baseline)"
        )
    return specs


def _read(name: str, path: str, fix: str) -> Mapping[str, Any]:
    label = f"--variant {name}: {path}"
    if not Path(path).exists():
        raise VfleetError(f"{label}: no such file; {fix}")
    return mapping(read_json(path, MAX_FILE_BYTES, label), label)


def measured_record(name: str, path: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """The file's measured record ({} when it has none) without unknown fields, its memory
    figures checked as numbers (they are divided and drawn)."""
    label = f"--variant {name}: {path}: measured"
    record = dict(mapping(data.get("measured") or {}, label))
    for key in ("planned_weights_gib", "gpu_memory_used_mib"):
        record[key] = positive_number(record, key, label, 1e9)
    return {k: v for k, v in record.items() if v is not None}


def load_bench(name: str, path: str) -> Mapping[str, Any]:
    data = _read(name, path, BENCH_FIX)
    levels = data.get("levels")
    if (
        data.get("task") != "bench"
        or not isinstance(levels, list)
        or not all(isinstance(lv, Mapping) and isinstance(lv.get("value"), (int, float)) for lv in levels)
    ):
        raise VfleetError(
            f"--variant {name}: {path}: not a `vfleet bench` result (task 'bench' with levels); "
            f"{BENCH_FIX}, first in {SPEC_FORM}"
        )
    return data


def load_eval(name: str, path: str) -> EvalReport:
    """The variant's eval report, read and checked by EvalReport.load (bounded, strict, typed);
    its error line gets the variant's name and the order of the two files."""
    if not Path(path).exists():
        raise VfleetError(f"--variant {name}: {path}: no such file; {EVAL_FIX}")
    try:
        report = EvalReport.load(path)
    except VfleetError as exc:
        raise VfleetError(f"--variant {name}: {exc}; the order is {SPEC_FORM}") from None
    if report.score is None:
        raise VfleetError(
            f"--variant {name}: {path}: no item has an expectation (answer, regex or schema), so "
            "there is no score to compare; run `vfleet eval` with a set whose items have one"
        )
    return report


def concurrency_levels(bench: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    """The bench's concurrency levels by their value (rate levels are not compared: their
    offered load is not the same thing on a faster variant)."""
    return {int(lv["value"]): lv for lv in bench["levels"] if lv.get("mode") == "concurrency"}


def completed(level: Mapping[str, Any]) -> bool:
    """Every measured request of the level came back."""
    return bool(level.get("completed")) and not level.get("failed")


def pick_level(benches: Mapping[str, tuple[str, Mapping[str, Any]]], wanted: int | None) -> int:
    """`wanted` when every bench ran it, else the highest concurrency every bench completed.
    `benches`: variant name -> (path, bench result)."""
    levels = {name: concurrency_levels(b) for name, (_, b) in benches.items()}
    if wanted is not None:
        for name, lv in levels.items():
            if wanted not in lv:
                ran = ", ".join(str(v) for v in sorted(lv)) or "none"
                raise VfleetError(
                    f"--level {wanted}: {benches[name][0]} (variant {name}) has no concurrency level "
                    f"{wanted} (it ran {ran}); give a level every bench ran, or leave --level out"
                )
        return wanted
    shared = set.intersection(*({v for v, x in lv.items() if completed(x)} for lv in levels.values()))
    if not shared:
        ran = "; ".join(f"{n}: {', '.join(str(v) for v in sorted(lv)) or 'none'}" for n, lv in levels.items())
        raise VfleetError(
            f"no concurrency level that every bench completed ({ran}); run the benches with the "
            "same --concurrency, or give --level N"
        )
    return max(shared)


def load_variants(specs: Sequence[VariantSpec], wanted_level: int | None) -> tuple[int, list[Variant]]:
    """Every variant's files read and checked, and the level they are compared at."""
    benches = {s.name: (s.bench, load_bench(s.name, s.bench)) for s in specs}
    evals = {s.name: load_eval(s.name, s.eval) for s in specs}
    level = pick_level(benches, wanted_level)
    out = []
    for s in specs:
        bench_measured = measured_record(s.name, s.bench, benches[s.name][1])
        report = evals[s.name]
        eval_measured = measured_record(s.name, s.eval, {"measured": report.measured})
        judged = [i for i in report.items if i.passed is not None]
        out.append(
            Variant(
                name=s.name,
                bench_path=s.bench,
                eval_path=s.eval,
                level=concurrency_levels(benches[s.name][1])[level],
                passed=sum(1 for i in judged if i.passed),
                scored=len(judged),
                divergence=report.divergence,
                measured={**eval_measured, **bench_measured},
                mismatch=differences(bench_measured, eval_measured),
            )
        )
    return level, out
