"""`nvidia-smi topo -m`: the GPU link matrix.

There is no machine-readable mode, and real outputs vary: tab-separated or runs of spaces, a
header with or without a leading tab, ANSI underline codes around the header, NIC columns named
`mlx5_0` or `NIC0` (+ a "NIC Legend"), trailing `CPU Affinity` / `NUMA Affinity` / `GPU NUMA ID`
columns (sometimes with empty cells), a legend present or not, and `SOC` on old drivers for what
is now `SYS`. Link cells are single tokens, so rows are split on whitespace; only the header needs
care because its affinity titles contain spaces.
"""

from __future__ import annotations

import re
from typing import Any

ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
AFFINITY_TITLES = ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
LINK_RE = re.compile(r"^(X|SYS|SOC|NODE|PHB|PXB|PIX|NV\d+|N/A)$")
# Lower number = closer. NVLink beats any PCIe path; SYS is the farthest.
LINK_RANK = {"NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}


def normalize_link(code: str) -> str:
    """SOC (pre-2018 drivers) means what SYS means now."""
    c = code.strip()
    return "SYS" if c == "SOC" else c


def is_nvlink(code: str | None) -> bool:
    return bool(code) and code.startswith("NV") and code[2:].isdigit()


def link_rank(code: str | None) -> int | None:
    if code is None:
        return None
    if is_nvlink(code):
        return LINK_RANK["NV"]
    return LINK_RANK.get(code)


def parse(output: str) -> dict[str, Any] | None:
    """{gpus: [GPU0..], nics: [device names], matrix: [[code]] GPU x GPU, gpu_nic: [[code]],
    cpu_affinity: [..], numa_affinity: [..], gpu_numa_id: [..]}; None if no matrix found."""
    lines = [ANSI_RE.sub("", ln).rstrip("\r") for ln in (output or "").splitlines()]
    # The header starts with GPU0 (after optional whitespace); a row for GPU0 does too, but its
    # next token is a link code ("X").
    header_i = next(
        (
            i
            for i, ln in enumerate(lines)
            if ln.split()[:1] == ["GPU0"] and (len(ln.split()) == 1 or not LINK_RE.match(ln.split()[1]))
        ),
        None,
    )
    if header_i is None:
        return None
    header = lines[header_i]
    titles = [t for t in AFFINITY_TITLES if t in header]
    for t in titles:
        header = header.replace(t, " ")
    columns = header.split()
    col_set = set(columns)

    rows: dict[str, list[str]] = {}
    extras: dict[str, list[str]] = {}
    for ln in lines[header_i + 1 :]:
        toks = ln.split()
        if not toks or toks[0] not in col_set:
            if ln.strip().startswith(("Legend", "NIC Legend")):
                break
            continue
        cells = [normalize_link(c) for c in toks[1 : 1 + len(columns)]]
        rows[toks[0]] = cells
        extras[toks[0]] = toks[1 + len(columns) :]

    legend = {}
    for ln in lines:
        m = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", ln)
        if m:
            legend[m.group(1)] = m.group(2)

    gpus = [c for c in columns if re.fullmatch(r"GPU\d+", c)]
    nic_cols = [c for c in columns if c not in gpus]
    gi = {g: columns.index(g) for g in gpus}
    ni = {n: columns.index(n) for n in nic_cols}

    def cell(row: str, idx: int) -> str | None:
        r = rows.get(row, [])
        return r[idx] if idx < len(r) else None

    matrix = [[cell(a, gi[b]) for b in gpus] for a in gpus]
    gpu_nic = [[cell(a, ni[n]) for n in nic_cols] for a in gpus]

    def extra(g: str, title: str) -> str | None:
        vals = extras.get(g, [])
        if title not in titles:
            return None
        k = titles.index(title)
        v = vals[k] if k < len(vals) else None
        return None if v in (None, "N/A") else v

    return {
        "gpus": gpus,
        "nics": [legend.get(n, n) for n in nic_cols],
        "nic_columns": nic_cols,
        "matrix": matrix,
        "gpu_nic": gpu_nic,
        "cpu_affinity": [extra(g, "CPU Affinity") for g in gpus],
        "numa_affinity": [extra(g, "NUMA Affinity") for g in gpus],
        "gpu_numa_id": [extra(g, "GPU NUMA ID") for g in gpus],
    }


def link(topo: dict[str, Any] | None, i: int, j: int) -> str | None:
    """Link code between GPU i and GPU j (by position in the matrix), None if unknown."""
    if not topo or i >= len(topo["matrix"]) or j >= len(topo["matrix"]):
        return None
    return topo["matrix"][i][j]
