#!/usr/bin/python3
"""Simulated `nvidia-smi` for vfleet lab hosts: replays a captured GPU profile directory.

WHY: lab hosts have no GPUs, yet preflight/capacity code must run against them unchanged.
This script answers the invocations vfleet's code makes, byte for byte as the real tool
formats them (captured on an H200 with driver 580.159.04), and refuses loudly (stderr,
exit 2) anything it cannot answer, so a caller never mistakes a guess for a measurement.

Standalone on purpose (stdlib only, no vfleet imports): it is copied into each host as
/usr/bin/nvidia-smi and runs with the host's /usr/bin/python3.

Profile directory (default /etc/vfleet-lab/gpu, override with VFLEET_GPU_PROFILE), read at
every call so a profile swapped in place takes effect at once:
    nvidia-smi.txt   output of `nvidia-smi`
    query-gpu.csv    output of `nvidia-smi --query-gpu=<fields> --format=csv`; a field it
                     lacks that the plain table shows (utilization.gpu) is read from
                     nvidia-smi.txt, so the lab's GPU exporter gets the captured reading
    topo.txt         output of `nvidia-smi topo -m`
    smi-q.xml        output of `nvidia-smi -q -x` (optional)
    smi-q.txt        output of `nvidia-smi -q` (optional)
    help-query-gpu.txt  the valid --query-gpu fields (vfleet/lab/nvidia_smi_fields.txt, which
                     the lab installs here; read from beside this script when absent)
    lab-profile.json optional: {"nvidia_smi": "fail", "stdout": "...", "exit_code": 9}
                     (every invocation fails like a broken driver) or
                     {"nvidia_smi": "absent"} (the lab does not install this script).
"""

from __future__ import annotations

import json
import os
import re
import sys

DEFAULT_PROFILE = "/etc/vfleet-lab/gpu"
SIM = "nvidia-smi (vfleet lab simulator)"

# Exit codes of the real tool (observed on driver 580): invalid field / bad format / bad
# combination -> 2, no GPU matches -i -> 6, unrecognised option -> 255.
EXIT_INVALID = 2
EXIT_NOT_FOUND = 6
EXIT_BAD_OPTION = 255
# Valid for the real tool but absent from the captured profile: ours, not NVIDIA's.
EXIT_UNSIMULATED = 2

# Every --query-gpu property of driver 580 (`nvidia-smi --help-query-gpu`): a data file, in the
# host's profile directory (profiles.py copies it there), or beside this script in the repository.
FIELDS_FILE = "help-query-gpu.txt"
REPO_FIELDS = "nvidia_smi_fields.txt"


class Refusal(Exception):
    """An answer the simulator will not fake: message, exit code, and whether the real tool
    would print it (stdout) or it is the simulator's own complaint (stderr)."""

    def __init__(self, message: str, code: int, real: bool = True):
        super().__init__(message)
        self.message, self.code, self.real = message, code, real


def field_aliases(profile_dir: str) -> dict[str, str]:
    """Map each valid query name (canonical or alias) to its canonical name."""
    path = os.path.join(profile_dir, FIELDS_FILE)
    if not os.path.isfile(path):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), REPO_FIELDS)
    table: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip() and not line.startswith("#")]
    for line in lines:
        names = line.split()
        for name in names:
            table[name] = names[0]
    return table


def split_header_cell(cell: str) -> tuple[str, str]:
    """`memory.total [MiB]` -> ("memory.total", "MiB"); `index` -> ("index", "")."""
    if cell.endswith("]") and " [" in cell:
        name, unit = cell[:-1].split(" [", 1)
        return name, unit
    return cell, ""


def strip_unit(value: str, unit: str) -> str:
    """`700.00 W` -> `700.00` for unit W; `[N/A]` and unit-less values stay as they are."""
    if unit and value.endswith(" " + unit):
        return value[: -len(unit) - 1]
    return value


class Profile:
    """One captured profile directory, read fresh at each invocation."""

    def __init__(self, path: str):
        self.path = path

    def file(self, name: str) -> str | None:
        full = os.path.join(self.path, name)
        if not os.path.isfile(full):
            return None
        with open(full, encoding="utf-8", newline="") as fh:
            return fh.read()

    def need(self, name: str, what: str) -> str:
        text = self.file(name)
        if text is None:
            raise Refusal(
                f"{SIM}: cannot answer {what}: profile {self.path} has no {name}", EXIT_UNSIMULATED, real=False
            )
        return text

    def meta(self) -> dict:
        text = self.file("lab-profile.json")
        return json.loads(text) if text else {}

    def csv(self) -> tuple[list[str], list[list[str]]]:
        """Header cells and rows of query-gpu.csv (the real tool separates with ", "), plus
        the columns of TABLE_FIELDS it lacks, read from the plain table when it has them."""
        lines = [ln for ln in self.need("query-gpu.csv", "--query-gpu").splitlines() if ln]
        header = lines[0].split(", ")
        rows = [ln.split(", ") for ln in lines[1:]]
        for row in rows:
            if len(row) != len(header):
                raise Refusal(
                    f"{SIM}: {self.path}/query-gpu.csv: row {row!r} has {len(row)} cells, header has {len(header)}",
                    EXIT_UNSIMULATED,
                    real=False,
                )
        names = [split_header_cell(c)[0] for c in header]
        for cell, values in table_columns(self.file("nvidia-smi.txt") or "", len(rows)).items():
            if split_header_cell(cell)[0] not in names:
                header.append(cell)
                for row, value in zip(rows, values):
                    row.append(value)
        return header, rows


# The plain table's second line of each GPU: `| N/A 39C P0 126W / 700W | 0MiB / 143771MiB |
# 0% Default |`; its third cell starts with GPU-Util ("N/A" where the GPU does not say).
_TABLE_USAGE = re.compile(r"\|\s*\d+MiB\s*/\s*\d+MiB\s*\|\s*(\d+%|N/A)\s")


def table_columns(table: str, gpus: int) -> dict[str, list[str]]:
    """--query-gpu columns (header cell -> one value per GPU, as the real CSV prints them)
    that the plain table shows: utilization.gpu. Empty when the table's GPU lines do not match
    the CSV's GPUs one for one (a profile assembled from two machines), so a field is never
    answered from another GPU's line."""
    found = _TABLE_USAGE.findall(table)
    if not found or len(found) != gpus:
        return {}
    # the real CSV prints `0 %` (a space before the unit) and `[N/A]` where the table says N/A
    return {"utilization.gpu [%]": [f"{u[:-1]} %" if u.endswith("%") else "[N/A]" for u in found]}


def select_gpus(profile: Profile, ids: str | None) -> list[int] | None:
    """Row positions picked by -i (index, UUID or PCI bus id; comma list; duplicates once),
    or None for all GPUs."""
    if ids is None:
        return None
    header, rows = profile.csv()
    names = [split_header_cell(c)[0] for c in header]
    keys = [n for n in ("index", "uuid", "pci.bus_id") if n in names]
    picked: set[int] = set()
    for wanted in [w for w in ids.split(",") if w]:
        hits = [i for i, row in enumerate(rows) if any(row[names.index(k)].lower() == wanted.lower() for k in keys)]
        if not hits:
            raise Refusal("No devices were found\n", EXIT_NOT_FOUND)
        picked.update(hits)
    return sorted(picked)


def query_gpu(profile: Profile, fields: str, fmt: str | None, ids: str | None) -> str:
    """Answer `--query-gpu=<fields> --format=csv[,noheader][,nounits]` from query-gpu.csv."""
    noheader = nounits = False
    for mod in [m for m in (fmt or "csv").split(",") if m]:
        if mod == "noheader":
            noheader = True
        elif mod == "nounits":
            nounits = True
        elif mod != "csv":
            raise Refusal("Format modifier is not recognized.\n", EXIT_INVALID)
    aliases = field_aliases(profile.path)
    wanted = [f for f in fields.split(",") if f]
    for f in wanted:
        if f not in aliases:
            raise Refusal(f'Field "{f}" is not a valid field to query.\n\n', EXIT_INVALID)
    header, rows = profile.csv()
    names = [split_header_cell(c)[0] for c in header]
    cols = []
    for f in wanted:
        canonical = aliases[f]
        if canonical not in names:
            raise Refusal(
                f'{SIM}: field "{f}" is valid for nvidia-smi but was not captured in '
                f"{profile.path}/query-gpu.csv (it has: {', '.join(names)})",
                EXIT_UNSIMULATED,
                real=False,
            )
        cols.append(names.index(canonical))
    picked = select_gpus(profile, ids)
    chosen = rows if picked is None else [rows[i] for i in picked]
    out = []
    if not noheader:
        # nounits leaves the header's " [MiB]" in place: the real tool does (driver 580).
        out.append(", ".join(header[c] for c in cols))
    for row in chosen:
        out.append(", ".join(strip_unit(row[c], split_header_cell(header[c])[1]) if nounits else row[c] for c in cols))
    return "\n".join(out) + "\n"


def list_gpus(profile: Profile, ids: str | None) -> str:
    """`nvidia-smi -L`: `GPU 0: NVIDIA H200 (UUID: GPU-...)` per GPU."""
    header, rows = profile.csv()
    names = [split_header_cell(c)[0] for c in header]
    for need in ("index", "name", "uuid"):
        if need not in names:
            raise Refusal(f"{SIM}: cannot answer -L: query-gpu.csv has no {need}", EXIT_UNSIMULATED, real=False)
    picked = select_gpus(profile, ids)
    chosen = rows if picked is None else [rows[i] for i in picked]
    get = lambda row, n: row[names.index(n)]  # noqa: E731
    return "".join(f"GPU {get(r, 'index')}: {get(r, 'name')} (UUID: {get(r, 'uuid')})\n" for r in chosen)


def version(profile: Profile) -> str:
    """`nvidia-smi --version`, from the plain table's header line."""
    head = profile.need("nvidia-smi.txt", "--version")
    for line in head.splitlines():
        if "Driver Version:" in line:
            parts = line.strip("| ").split()
            smi = parts[parts.index("NVIDIA-SMI") + 1]
            drv = parts[parts.index("Version:", parts.index("Driver")) + 1]
            cuda = parts[-1]
            nvml = ".".join(drv.split(".")[:2])
            return (
                f"NVIDIA-SMI version  : {smi}\nNVML version        : {nvml}\n"
                f"DRIVER version      : {drv}\nCUDA Version        : {cuda}\n"
            )
    raise Refusal(f"{SIM}: cannot answer --version: no header in nvidia-smi.txt", EXIT_UNSIMULATED, real=False)


def parse(argv: list[str]) -> dict:
    """Split argv into the options the simulator knows; anything else -> real tool's error."""
    opts: dict = {"topo": False, "matrix": False, "q": False, "x": False, "L": False, "version": False}
    valued = {"--query-gpu": "fields", "--format": "format", "-i": "ids", "--id": "ids"}
    args = list(argv)
    if args and args[0] == "topo":
        opts["topo"] = True
        args = args[1:]
    while args:
        arg = args.pop(0)
        key, eq, val = arg.partition("=")
        if key in valued:
            if not eq:
                if not args:
                    raise Refusal(
                        f"ERROR: Option {arg} is missing its value. Please run 'nvidia-smi -h'.\n\n", EXIT_BAD_OPTION
                    )
                val = args.pop(0)
            opts[valued[key]] = val
        elif opts["topo"] and arg in ("-m", "--matrix"):
            opts["matrix"] = True
        elif arg in ("-q", "--query"):
            opts["q"] = True
        elif arg in ("-x", "--xml-format"):
            opts["x"] = True
        elif arg in ("-L", "--list-gpus"):
            opts["L"] = True
        elif arg == "--version":
            opts["version"] = True
        else:
            raise Refusal(f"ERROR: Option {arg} is not recognized. Please run 'nvidia-smi -h'.\n\n", EXIT_BAD_OPTION)
    return opts


def answer(argv: list[str], profile_dir: str) -> str:
    """The stdout of `nvidia-smi <argv>` for this profile, or a Refusal."""
    profile = Profile(profile_dir)
    if not os.path.isdir(profile_dir):
        raise Refusal(f"{SIM}: no GPU profile at {profile_dir} (re-run `invoke lab.up`)", EXIT_UNSIMULATED, real=False)
    meta = profile.meta()
    mode = meta.get("nvidia_smi", "replay")
    if mode == "fail":
        raise Refusal(meta["stdout"], int(meta.get("exit_code", 9)))
    if mode == "absent":
        raise Refusal("nvidia-smi: command not found", 127, real=False)
    opts = parse(argv)
    ids = opts.get("ids")
    if opts["topo"]:
        if ids is not None:
            raise Refusal(
                "The -i command line argument must be used in conjunction with -n or -p.\n\n", EXIT_BAD_OPTION
            )
        if not opts["matrix"]:
            raise Refusal(f"{SIM}: only `nvidia-smi topo -m` is simulated", EXIT_UNSIMULATED, real=False)
        return profile.need("topo.txt", "topo -m")
    if opts["version"]:
        return version(profile)
    if "fields" in opts:
        return query_gpu(profile, opts["fields"], opts.get("format"), ids)
    if "format" in opts:
        raise Refusal(f"{SIM}: --format without --query-gpu is not simulated", EXIT_UNSIMULATED, real=False)
    if opts["L"]:
        return list_gpus(profile, ids)
    if opts["x"] and not opts["q"]:
        raise Refusal(
            "Invalid combination of input arguments. Specify -q/--query and "
            "-x/--xml-format to run an XML query.  Please run 'nvidia-smi -h' "
            "for help.\n\n",
            EXIT_INVALID,
        )
    whole = select_gpus(profile, ids)
    if whole is not None and len(whole) != len(profile.csv()[1]):
        raise Refusal(
            f"{SIM}: -i with a subset of GPUs is simulated only for --query-gpu and -L", EXIT_UNSIMULATED, real=False
        )
    if opts["q"]:
        return profile.need("smi-q.xml", "-q -x") if opts["x"] else profile.need("smi-q.txt", "-q")
    return profile.need("nvidia-smi.txt", "nvidia-smi")


def main(argv: list[str] | None = None) -> int:
    profile_dir = os.environ.get("VFLEET_GPU_PROFILE", DEFAULT_PROFILE)
    try:
        sys.stdout.write(answer(sys.argv[1:] if argv is None else argv, profile_dir))
    except Refusal as refusal:
        if refusal.real:  # the real tool's exact text, on stdout as the real tool prints it
            sys.stdout.write(refusal.message)
        else:
            sys.stderr.write(refusal.message + "\n")
        return refusal.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
