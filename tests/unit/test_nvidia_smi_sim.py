"""The nvidia-smi simulator answers as the real tool does, byte for byte, and refuses loudly.

Ground truth: vfleet/lab/profiles/h200-1/ and its extra/ (outputs of the real tool on an H200,
driver 580.159.04). Behaviours not in extra/ were observed on the same machine and are
quoted in the tests (exit codes, messages). The simulator is run as a script, the way a
lab host runs it, so exit codes and the stdout/stderr split are what is tested."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[2] / "vfleet" / "lab"
SIM = LAB / "nvidia_smi.py"
PROFILES = LAB / "profiles"
H200 = PROFILES / "h200-1"
EXTRA = H200 / "extra"
FULL = (
    "index,name,uuid,pci.bus_id,driver_version,memory.total,memory.used,compute_cap,"
    "persistence_mode,ecc.errors.uncorrected.volatile.total,power.limit,temperature.gpu,"
    "clocks.max.sm"
)


def smi(*args: str, profile: Path = H200) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SIM), *args],
        capture_output=True,
        text=True,
        env={"VFLEET_GPU_PROFILE": str(profile), "PATH": "/usr/bin:/bin"},
    )


def captured(name: str) -> tuple[str, int | None]:
    """An extra/ capture: (stdout, rc) where the file ends with an `rc=N` line if recorded."""
    text = (EXTRA / name).read_text()
    lines = text.split("\n")
    if len(lines) >= 2 and lines[-2].startswith("rc="):
        return "\n".join(lines[:-2]) + "\n", int(lines[-2][3:])
    return text, None


def same_temperature(text: str, column: int) -> str:
    """extra/ was captured a few seconds after query-gpu.csv: the GPU's temperature moved by
    a degree. Put the profile's reading back in `column` so everything else compares exactly."""
    temp = (H200 / "query-gpu.csv").read_text().splitlines()[1].split(", ")[11]
    out = []
    for line in text.splitlines():
        cells = line.split(", ")
        if cells[0].isdigit():
            cells[column] = temp
        out.append(", ".join(cells))
    return "\n".join(out) + "\n"


# --- replay -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,file",
    [
        ((), "nvidia-smi.txt"),
        (("topo", "-m"), "topo.txt"),
        (("topo", "--matrix"), "topo.txt"),
        (("-q", "-x"), "smi-q.xml"),
        (("-x", "-q"), "smi-q.xml"),
        (("--query", "--xml-format"), "smi-q.xml"),
    ],
)
def test_replays_captured_files_verbatim(args, file):
    res = smi(*args)
    assert res.returncode == 0, res.stderr
    assert res.stdout == (H200 / file).read_text()


def test_full_query_equals_capture():
    res = smi(f"--query-gpu={FULL}", "--format=csv")
    assert (res.returncode, res.stdout) == (0, (H200 / "query-gpu.csv").read_text())


@pytest.mark.parametrize(
    "fmt,file",
    [
        ("csv,noheader", "q_noheader.csv"),
        ("csv,nounits", "q_nounits.csv"),
        ("csv,noheader,nounits", "q_noheader_nounits.csv"),
        ("csv,nounits,noheader", "q_noheader_nounits.csv"),
    ],
)
def test_format_modifiers_match_real_tool(fmt, file):
    res = smi(f"--query-gpu={FULL}", f"--format={fmt}")
    assert res.returncode == 0
    assert res.stdout == same_temperature((EXTRA / file).read_text(), 11)


def test_subset_reordered_and_repeated():
    res = smi("--query-gpu=memory.total,name,index,memory.total", "--format=csv")
    assert (res.returncode, res.stdout) == (0, (EXTRA / "q_subset_repeat.csv").read_text())


def test_select_gpu_by_index():
    res = smi("-i", "0", "--query-gpu=index,name", "--format=csv")
    assert res.stdout == (EXTRA / "q_i0.csv").read_text()
    assert smi("--id=0", "--query-gpu=index,name", "--format=csv").stdout == res.stdout


def test_no_format_means_csv_with_header():
    out, rc = captured("q_noformat.out")
    res = smi("--query-gpu=name")
    assert (res.returncode, res.stdout) == (rc, out)


def test_version_from_table_header():
    res = smi("--version")
    assert res.stdout == (EXTRA / "version.txt").read_text()


def test_space_separated_values_and_trailing_comma():
    # Observed on the real tool: `--query-gpu index --format csv` and `index,` both work.
    assert smi("--query-gpu", "index", "--format", "csv").stdout == "index\n0\n"
    assert smi("--query-gpu=index,", "--format=csv,").stdout == "index\n0\n"


def test_alias_prints_canonical_header():
    # Real tool: `--query-gpu=gpu_name,gpu_uuid,gpu_bus_id` -> header `name, uuid, pci.bus_id`.
    res = smi("--query-gpu=gpu_name,gpu_uuid,gpu_bus_id", "--format=csv")
    row = (H200 / "query-gpu.csv").read_text().splitlines()[1].split(", ")
    assert res.stdout == f"name, uuid, pci.bus_id\n{row[1]}, {row[2]}, {row[3]}\n"


def test_list_gpus():
    row = (H200 / "query-gpu.csv").read_text().splitlines()[1].split(", ")
    assert smi("-L").stdout == f"GPU 0: NVIDIA H200 (UUID: {row[2]})\n"


# --- other profiles ------------------------------------------------------------------------


def test_v100_nounits_subset_and_selection():
    v100 = PROFILES / "v100-8-pcie"
    res = smi(
        "-i", "3,1,3", "--query-gpu=power.limit,memory.total,compute_cap,index", "--format=csv,nounits", profile=v100
    )
    assert res.stdout == (
        "power.limit [W], memory.total [MiB], compute_cap, index\n250.00, 32768, 7.0, 1\n250.00, 32768, 7.0, 3\n"
    )


def test_select_by_uuid_and_bus_id():
    v100 = PROFILES / "v100-8-pcie"
    rows = [ln.split(", ") for ln in (v100 / "query-gpu.csv").read_text().splitlines()[1:]]
    res = smi("-i", f"{rows[5][2]},{rows[2][3]}", "--query-gpu=index", "--format=csv,noheader", profile=v100)
    assert res.stdout == "2\n5\n"


def test_not_available_values_survive_nounits(tmp_path):
    for name in ("nvidia-smi.txt", "topo.txt"):
        (tmp_path / name).write_text((H200 / name).read_text())
    (tmp_path / "query-gpu.csv").write_text("index, power.limit [W], memory.used [MiB]\n0, [N/A], [Not Supported]\n")
    res = smi("--query-gpu=power.limit,memory.used,index", "--format=csv,nounits,noheader", profile=tmp_path)
    assert res.stdout == "[N/A], [Not Supported], 0\n"


# --- fields the plain table shows (the GPU exporter's utilization.gpu) ----------------------


def test_utilization_comes_from_the_captured_table():
    """nvidia-smi.txt of the H200 says `0%` under GPU-Util; the real CSV prints a
    percentage as `<n> %` under `utilization.gpu [%]`, `<n>` with nounits."""
    assert "|      0%      Default |" in (H200 / "nvidia-smi.txt").read_text()
    res = smi("--query-gpu=index,utilization.gpu", "--format=csv")
    assert (res.returncode, res.stdout) == (0, "index, utilization.gpu [%]\n0, 0 %\n")
    res = smi("--query-gpu=utilization.gpu,index", "--format=csv,noheader,nounits", "-i", "0")
    assert (res.returncode, res.stdout) == (0, "0, 0\n")


def _with_table(tmp_path: Path, table: str, csv: str | None = None) -> Path:
    (tmp_path / "nvidia-smi.txt").write_text(table)
    (tmp_path / "query-gpu.csv").write_text(csv or (H200 / "query-gpu.csv").read_text())
    (tmp_path / "topo.txt").write_text((H200 / "topo.txt").read_text())
    return tmp_path


def test_utilization_reads_each_gpus_line(tmp_path):
    table = (H200 / "nvidia-smi.txt").read_text()
    busy = _with_table(tmp_path, table.replace("|      0%      Default |", "|     37%      Default |"))
    assert smi("--query-gpu=utilization.gpu", "--format=csv,noheader", profile=busy).stdout == "37 %\n"
    unknown = table.replace("|      0%      Default |", "|    N/A      Default |")
    assert (
        smi(
            "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", profile=_with_table(tmp_path, unknown)
        ).stdout
        == "[N/A]\n"
    )


def test_utilization_is_refused_when_the_table_has_other_gpus(tmp_path):
    """Two GPUs in query-gpu.csv, one in the table: never answer from another GPU's line."""
    lines = (H200 / "query-gpu.csv").read_text().splitlines()
    two = "\n".join([lines[0], lines[1], lines[1].replace("0, NVIDIA", "1, NVIDIA", 1)]) + "\n"
    res = smi(
        "--query-gpu=utilization.gpu",
        "--format=csv",
        profile=_with_table(tmp_path, (H200 / "nvidia-smi.txt").read_text(), two),
    )
    assert res.returncode == 2 and res.stdout == "" and 'field "utilization.gpu" is valid' in res.stderr


@pytest.mark.parametrize("profile", ["v100-8-pcie", "a100-8-sxm"])
def test_assembled_profiles_are_consistent(profile):
    path = PROFILES / profile
    rows = smi(f"--query-gpu={FULL}", "--format=csv,noheader", profile=path).stdout.splitlines()
    assert len(rows) == 8
    table = smi(profile=path).stdout
    topo = smi("topo", "-m", profile=path).stdout
    for row in rows:
        cells = row.split(", ")
        assert cells[3] in table and f"{cells[5].split()[0]}MiB" in table
    assert all(f"GPU{i}" in topo for i in range(8))
    assert (path / "README.md").is_file()


def test_every_profile_has_a_readme():
    for path in PROFILES.iterdir():
        assert (path / "README.md").is_file(), path


# --- refusals --------------------------------------------------------------------------------


def test_unknown_field_is_real_tool_text_exit_2():
    out, rc = captured("q_badfield.out")
    res = smi("--query-gpu=index,foo", "--format=csv")
    assert (res.returncode, res.stdout) == (rc, out) == (2, out)


def test_unknown_option_is_real_tool_text_exit_255():
    out, rc = captured("bogus.out")
    res = smi("--bogus")
    assert (res.returncode, res.stdout) == (rc, out)


@pytest.mark.parametrize(
    "args,rc,stdout",
    [
        # All observed on the real tool (H200, driver 580.159.04).
        (("--query-gpu=INDEX", "--format=csv"), 2, 'Field "INDEX" is not a valid field to query.\n\n'),
        (("--query-gpu=index, name", "--format=csv"), 2, 'Field " name" is not a valid field to query.\n\n'),
        (("--query-gpu=index", "--format=json"), 2, "Format modifier is not recognized.\n"),
        (("-i", "5", "--query-gpu=index", "--format=csv"), 6, "No devices were found\n"),
        (("-i", "00000000:00:00.0", "--query-gpu=index", "--format=csv"), 6, "No devices were found\n"),
        (
            ("-x",),
            2,
            "Invalid combination of input arguments. Specify -q/--query and "
            "-x/--xml-format to run an XML query.  Please run 'nvidia-smi -h' for help.\n\n",
        ),
        (("topo", "-m", "-i", "0"), 255, "The -i command line argument must be used in conjunction with -n or -p.\n\n"),
    ],
)
def test_real_tool_errors(args, rc, stdout):
    res = smi(*args)
    assert (res.returncode, res.stdout) == (rc, stdout)


@pytest.mark.parametrize(
    "args,profile,needle",
    [
        (("--query-gpu=clocks.sm", "--format=csv"), "h200-1", 'field "clocks.sm" is valid'),
        (("topo",), "h200-1", "only `nvidia-smi topo -m`"),
        (("-q", "-x"), "v100-8-pcie", "has no smi-q.xml"),
        (("-i", "1"), "v100-8-pcie", "-i with a subset"),
        (("--format=csv",), "h200-1", "--format without --query-gpu"),
    ],
)
def test_simulator_refusals_go_to_stderr_exit_2(args, profile, needle):
    res = smi(*args, profile=PROFILES / profile)
    assert res.returncode == 2 and res.stdout == ""
    assert needle in res.stderr and "simulator" in res.stderr


def test_missing_profile_dir(tmp_path):
    res = smi(profile=tmp_path / "nope")
    assert res.returncode == 2 and "no GPU profile" in res.stderr


@pytest.mark.parametrize(
    "args", [(), ("--query-gpu=index", "--format=csv"), ("topo", "-m"), ("-q", "-x"), ("--bogus",)]
)
def test_broken_driver_fails_every_invocation(args):
    res = smi(*args, profile=PROFILES / "broken-driver")
    assert res.returncode == 9
    assert res.stdout == (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
        "driver. Make sure that the latest NVIDIA driver is installed and "
        "running.\n\n"
    )


def test_no_gpu_profile_is_absent():
    assert json.loads((PROFILES / "no-gpu" / "lab-profile.json").read_text()) == {"nvidia_smi": "absent"}
    assert smi(profile=PROFILES / "no-gpu").returncode == 127


def test_simulator_is_stdlib_only():
    tree = ast.parse(SIM.read_text())
    mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert mods <= set(sys.stdlib_module_names) | {"__future__"}
    assert SIM.read_text().startswith("#!/usr/bin/python3\n")


def test_an_installed_host_answers_from_its_own_profile_directory(tmp_path):
    """On a lab host the simulator is /usr/bin/nvidia-smi with nothing beside it: the table of
    valid fields must come with the profile that profiles.install puts in /etc/vfleet-lab/gpu."""
    from vfleet.lab import profiles

    (tmp_path / "usr" / "bin").mkdir(parents=True)  # a root file system has it
    profiles.install(profiles.resolve("h200-1"), tmp_path)
    smi, gpu = tmp_path / profiles.GUEST_NVIDIA_SMI, tmp_path / profiles.GUEST_PROFILE_DIR
    assert (gpu / "help-query-gpu.txt").read_text() == (LAB / "nvidia_smi_fields.txt").read_text()
    args = ["--query-gpu=name,memory.total", "--format=csv,noheader"]
    ok = subprocess.run(
        [sys.executable, str(smi), *args],
        capture_output=True,
        text=True,
        env={"VFLEET_GPU_PROFILE": str(gpu)},
        timeout=30,
    )
    assert ok.returncode == 0 and ok.stdout == "NVIDIA H200, 143771 MiB\n", ok.stderr
    bad = subprocess.run(
        [sys.executable, str(smi), "--query-gpu=name,no.such", "--format=csv"],
        capture_output=True,
        text=True,
        env={"VFLEET_GPU_PROFILE": str(gpu)},
        timeout=30,
    )
    assert bad.returncode == 2 and 'Field "no.such" is not a valid field to query.' in bad.stdout
