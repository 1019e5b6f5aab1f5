"""The batching that makes a whole preflight cost one connection and one round trip per host.

It is the engine's fact protocol (vfleet/engine/fact_protocol.py), the same every deploy step's
facts travel in: every fact of `facts_for(cfg)` in ONE POSIX sh script, their commands run at
once (a slow nvidia-smi overlaps the rest), each with its stdout, stderr and exit status kept
apart, so a missing command fails only its own fact. Here the output becomes the fact values
`assemble` reads, and the raw GPU outputs a snapshot keeps in the GPU profile layout.
"""

from __future__ import annotations

from typing import Any, Mapping

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.fact_protocol import Output, fact_script, results

from ._fact_table import SNAPSHOT_FACTS, facts_for


def gather_script(cfg: HostConfig) -> str:
    """The one script that prints every preflight fact of the host as its own section."""
    return fact_script(facts_for(cfg), parallel=True)


def fact_values(outputs: Mapping[str, Output], cfg: HostConfig) -> dict[str, Any]:
    """{fact key: value} for every fact of the host (a fact whose section is absent gets its
    'missing' value)."""
    facts = facts_for(cfg)
    return {facts[name].key: value for name, value in results(facts, outputs).items()}


def raw_outputs(outputs: Mapping[str, Output]) -> dict[str, str]:
    """{snapshot file name: raw text} for the GPU-profile files, ready for `snapshot_write`.

    A section whose command was missing (exit 127) yields no file: a snapshot of a host without
    nvidia-smi has no nvidia-smi.txt. A failing nvidia-smi keeps its error text (both streams),
    which is what identifies a broken driver when the snapshot is read back."""
    out = {}
    for f in SNAPSHOT_FACTS:
        got = outputs.get(f.name)
        if f.snapshot_file is None or got is None or got.rc == 127:
            continue
        out[f.snapshot_file] = got.stdout if got.rc == 0 else (got.stdout + got.stderr)
    return out
