"""Preflight fact parsers against real outputs ({command, output, expected} data files, the
pyinfra way), and the one-round-trip gather script run for real under `sh` with a stand-in
nvidia-smi that replays a GPU profile (as the lab's simulated GPUs do)."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import vfleet.roles.preflight as preflight
from tests.unit.preflight_cases import config
from vfleet.engine.fact_protocol import Output, read_outputs
from vfleet.roles.preflight import _facts as F
from vfleet.roles.preflight._parsers import nvidia_smi_table, query_gpu_csv, topo_matrix

DATA = Path(__file__).parent / "data" / "facts"
FIXTURES = DATA / "fixtures"
REPO = Path(__file__).resolve().parents[2]
LAB_PROFILES = REPO / "vfleet" / "lab" / "profiles"
CASES = sorted(DATA.glob("*.yaml"))


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _output(case: dict) -> str:
    if "output_file" in case:
        return (DATA / case["output_file"]).read_text()
    return case["output"]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_fact_data_file(path: Path) -> None:
    case = _load(path)
    assert case.get("source"), "every data file says where its output came from"
    out = _output(case)
    if "fact" in case:
        fact = F.facts_for(config({"preflight_smi_xml": True, **(case.get("vars") or {})}))[case["fact"]]
        assert fact.command() == case["command"]
        assert fact.timeout_s == case.get("timeout_s")  # what may hang on a wedged driver is bounded
        got = fact.process_output(Output(out, case.get("stderr", ""), case.get("rc", 0)))
    else:
        mod, fn = case["parser"].split(":")
        got = getattr(importlib.import_module(f"vfleet.roles.preflight._parsers.{mod}"), fn)(
            out, *(case.get("args") or [])
        )
    assert got == case["expected"]


def test_every_fixture_is_covered_by_a_data_file() -> None:
    used = {_load(p).get("output_file") for p in CASES}
    for fx in FIXTURES.iterdir():
        if fx.is_file() and fx.suffix in (".txt", ".xml", ".csv") or fx.name.endswith("os-release"):
            assert f"fixtures/{fx.name}" in used, fx.name


def test_shared_fixtures_are_kept_verbatim() -> None:
    """The real captures copied from the project's shared fixtures stay byte for byte what was
    captured: SHARED-SHA256SUMS was made from the originals when they were copied (the test
    reads only the repository: a fresh clone has no ../shared beside it)."""
    sums = (FIXTURES / "SHARED-SHA256SUMS").read_text().split("\n")
    entries = [line.split(maxsplit=1) for line in sums if line.strip()]
    assert len(entries) == 9
    for digest, name in entries:
        assert hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest() == digest, name


# --- parser details worth stating on their own ---------------------------------------------------


def test_unknown_values_are_none_never_zero() -> None:
    gpus = query_gpu_csv.parse((FIXTURES / "synthetic_query_NA_values.csv").read_text())
    assert gpus[0]["ecc_uncorrected"] is None and gpus[0]["power_limit_w"] is None
    assert gpus[1]["memory_total_mib"] is None and gpus[1]["compute_capability"] is None
    assert gpus[1]["persistence_mode"] is None


def test_query_csv_noheader_needs_field_list() -> None:
    line = "0, NVIDIA H200, GPU-x, 00000000:00:06.0, 580.159.04, 143771, 0, 9.0, Enabled, 0, 700.00, 38, 1980\n"
    assert query_gpu_csv.parse(line) == []  # no header, no field list: refuse to guess
    assert query_gpu_csv.parse(line, query_gpu_csv.FIELDS)[0]["memory_total_mib"] == 143771


def test_query_csv_subset_reordered_header() -> None:
    out = "memory.total [MiB], name, index, memory.total [MiB]\n143771 MiB, NVIDIA H200, 0, 143771 MiB\n"
    g = query_gpu_csv.parse(out)[0]
    assert (g["index"], g["name"], g["memory_total_mib"]) == (0, "NVIDIA H200", 143771)
    assert g["compute_capability"] is None  # not asked for: unknown


def test_topo_link_helpers() -> None:
    t = topo_matrix.parse((FIXTURES / "topo_dgx_a100_nv12_10nic_tabs.txt").read_text())
    assert topo_matrix.link(t, 0, 7) == "NV12" and topo_matrix.is_nvlink("NV12")
    assert t["nics"][0] == "mlx5_0" and t["nic_columns"][0] == "NIC0"
    assert topo_matrix.link_rank("SYS") > topo_matrix.link_rank("PHB") > topo_matrix.link_rank("PIX")


def test_nvidia_smi_states() -> None:
    assert nvidia_smi_table.state("", rc=127) == "no-driver"
    assert (
        nvidia_smi_table.state("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 9)
        == "broken-driver"
    )
    assert nvidia_smi_table.state((FIXTURES / "smi_1xL4_drv550.90.07_cuda12.4.txt").read_text()) == "ok"


# --- lab profiles (another developer's; tested when present) ----------------------------------

LAB = sorted(p for p in LAB_PROFILES.glob("*") if (p / "query-gpu.csv").is_file()) if LAB_PROFILES.is_dir() else []


@pytest.mark.parametrize("profile", LAB, ids=[p.name for p in LAB])
def test_lab_profile_parses_consistently(profile: Path) -> None:
    table = nvidia_smi_table.parse((profile / "nvidia-smi.txt").read_text())
    gpus = query_gpu_csv.parse((profile / "query-gpu.csv").read_text())
    topo = topo_matrix.parse((profile / "topo.txt").read_text())
    assert table["state"] == "ok" and gpus
    assert len(table["gpus"]) == len(gpus) == len(topo["gpus"])
    assert {g["driver_version"] for g in gpus} == {table["driver_version"]}
    assert [g["name"] for g in gpus][0].startswith(table["gpus"][0]["name"].rstrip("."))
    facts = preflight.facts_from_snapshot(profile, config())
    assert all(g["compute_capability"] for g in facts["gpus"])
    assert facts["cuda_version"] and facts["driver_version"]


# --- the gather script, run for real -------------------------------------------------------------

FAKE_SMI = r'''#!{python}
"""Stand-in nvidia-smi replaying a profile dir (FAKE_SMI_DIR)."""
import os, re, sys
d = os.environ["FAKE_SMI_DIR"]; a = sys.argv[1:]
if os.environ.get("FAKE_SMI_BROKEN"):
    print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
          "Make sure that the latest NVIDIA driver is installed and running.\n"); sys.exit(9)
def cat(n): sys.stdout.write(open(os.path.join(d, n)).read())
if not a: cat("nvidia-smi.txt")
elif a == ["topo", "-m"]: cat("topo.txt")
elif a == ["-q", "-x"]: cat("smi-q.xml")
elif a[0].startswith("--query-gpu=") and a[1:] == ["--format=csv"]:
    fields = a[0].split("=", 1)[1].split(",")
    if os.environ.get("FAKE_SMI_R470") and "compute_cap" in fields:
        print('Field "compute_cap" is not a valid field to query.\n'); sys.exit(2)
    lines = open(os.path.join(d, "query-gpu.csv")).read().splitlines()
    hdr = [h.strip() for h in lines[0].split(",")]
    names = [re.sub(r"\s*\[.*\]$", "", h) for h in hdr]
    idx = [names.index(f) for f in fields]
    print(", ".join(hdr[i] for i in idx))
    for ln in lines[1:]:
        cells = ln.split(", ")
        print(", ".join(cells[i] for i in idx))
else:
    print("ERROR: Option not recognized"); sys.exit(255)
'''


def _fake_bin(tmp_path: Path) -> Path:
    b = tmp_path / "bin"
    b.mkdir()
    smi = b / "nvidia-smi"
    smi.write_text(FAKE_SMI.replace("{python}", sys.executable))
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    return b


def _run(script: str, env_extra: dict[str, str], path_prefix: Path | None) -> str:
    env = {**os.environ, **env_extra}
    base = "/usr/local/bin:/usr/bin:/bin"
    env["PATH"] = f"{path_prefix}:{base}" if path_prefix else base
    r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _model_dir(tmp_path: Path) -> Path:
    md = tmp_path / "models" / "qwen"
    md.mkdir(parents=True)
    (md / "config.json").write_text(
        json.dumps(
            {
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "hidden_size": 256,
                "torch_dtype": "bfloat16",
            }
        )
    )
    header = json.dumps({"w": {"dtype": "BF16", "shape": [4, 8], "data_offsets": [0, 64]}}).encode()
    header += b" " * (-len(header) % 8)
    (md / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 64)
    return md


def test_gather_script_live_equals_snapshot(tmp_path: Path) -> None:
    """Live gather (fake nvidia-smi replaying the V100 profile) -> facts; write a snapshot from
    the raw sections; snapshot -> facts must be identical. (How long the probe takes is no
    test's business: speed targets live in benchmarks/.)"""
    md = _model_dir(tmp_path)
    env_file = tmp_path / "vllm.env"
    env_file.write_text("NCCL_P2P_DISABLE=1\nNCCL_SHM_DISABLE=1\nVLLM_PORT=8000\n")
    cfg = config(
        {
            "model_dir": str(md.parent),
            "model_name": md.name,
            "vllm_env_file": str(env_file),
            "tensor_parallel_size": 2,
            "vllm_root": str(tmp_path / "nope"),
        }
    )
    profile = FIXTURES / "profile_v100_8_pcie"
    out = _run(preflight.gather_script(cfg), {"FAKE_SMI_DIR": str(profile)}, _fake_bin(tmp_path))
    live = preflight.parse_gathered(out, cfg)
    assert live["gpu_state"] == "ok" and live["gpu_count"] == 8
    assert live["driver_version"] == "535.104.05" and live["cuda_version"] == "12.2"
    assert live["topology"]["nccl_env"] == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    assert live["nccl_env_file"] == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    assert live["model_config"]["num_attention_heads"] == 4
    assert live["weights_bytes"] == 64
    assert live["model_fs"]["path"] == str(md) and live["model_fs"]["free_bytes"] > 0
    assert live["shm_bytes"] and live["kernel"] and live["os"]["ID"]
    assert live["vllm_installed"] is None
    raw = preflight.gathered_raw_outputs(out)
    assert raw["query-gpu.csv"] == (profile / "query-gpu.csv").read_text()
    assert raw["topo.txt"] == (profile / "topo.txt").read_text()
    assert raw["nvidia-smi.txt"] == (profile / "nvidia-smi.txt").read_text()
    snap = tmp_path / "snap"
    preflight.snapshot_write(snap, raw, live)
    assert preflight.facts_from_snapshot(snap, cfg) == live
    assert json.loads(json.dumps(live)) == live  # JSON-serialisable
    # The profile itself (no facts.json) gives the same GPU facts as the live gather.
    from_profile = preflight.facts_from_snapshot(profile, cfg)
    for k in ("gpus", "gpu_count", "driver_version", "cuda_version", "topology", "gpu_state"):
        assert from_profile[k] == live[k], k


def test_gather_script_r470_falls_back_and_fills_cc_from_name(tmp_path: Path) -> None:
    cfg = config({"model_dir": str(tmp_path / "m")})
    out = _run(
        preflight.gather_script(cfg),
        {"FAKE_SMI_DIR": str(FIXTURES / "profile_v100_8_pcie"), "FAKE_SMI_R470": "1"},
        _fake_bin(tmp_path),
    )
    facts = preflight.parse_gathered(out, cfg)
    assert facts["gpu_count"] == 8
    assert {g["compute_capability"] for g in facts["gpus"]} == {"7.0"}
    assert {g["cc_source"] for g in facts["gpus"]} == {"name-table"}
    assert "compute_cap" not in preflight.gathered_raw_outputs(out)["query-gpu.csv"]


def test_gather_script_without_nvidia_smi(tmp_path: Path) -> None:
    cfg = config({"model_dir": str(tmp_path / "m")})
    out = _run(preflight.gather_script(cfg), {}, None)
    sections = read_outputs(out)
    assert sections["nvidia_smi"].rc == 127 and sections["os_release"].rc == 0
    facts = preflight.parse_gathered(out, cfg)
    assert facts["gpu_state"] == "no-driver" and facts["gpus"] == [] and facts["kernel"]
    raw = preflight.gathered_raw_outputs(out)
    assert raw == {}
    snap = tmp_path / "snap"
    preflight.snapshot_write(snap, raw, facts)
    assert preflight.facts_from_snapshot(snap, cfg) == facts


def test_gather_script_broken_driver_roundtrip(tmp_path: Path) -> None:
    cfg = config({"model_dir": str(tmp_path / "m")})
    out = _run(
        preflight.gather_script(cfg),
        {"FAKE_SMI_DIR": str(FIXTURES / "profile_v100_8_pcie"), "FAKE_SMI_BROKEN": "1"},
        _fake_bin(tmp_path),
    )
    facts = preflight.parse_gathered(out, cfg)
    assert facts["gpu_state"] == "broken-driver" and facts["gpus"] == []
    snap = tmp_path / "snap"
    raw = preflight.gathered_raw_outputs(out)
    assert "couldn't communicate" in raw["nvidia-smi.txt"]
    preflight.snapshot_write(snap, raw, facts)
    assert preflight.facts_from_snapshot(snap, cfg) == facts


def test_gather_script_is_posix_sh() -> None:
    script = preflight.gather_script(config({"preflight_smi_xml": True}))
    for bashism in ("[[", "function ", "local ", "$'", "<(", "source "):
        assert bashism not in script
    if shutil.which("dash"):
        r = subprocess.run(["dash", "-n", "-c", script], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    assert "nvidia-smi -q -x" in script
    assert "nvidia-smi -q -x" not in preflight.gather_script(config())


def test_parse_gathered_refuses_empty_output() -> None:
    with pytest.raises(ValueError, match="no preflight sections"):
        preflight.parse_gathered("", config())


def test_model_folder_follows_the_service_renderer() -> None:
    assert F.model_dir(config({"model_dir": "/srv/models", "model_name": "qwen"})) == "/srv/models/qwen"
    assert F.model_dir(config({"model_name": "qwen"})) == "/srv/models/qwen"
    assert F.model_dir(config({"model_path": "/data/q", "model_name": "qwen"})) == "/data/q"
    assert F.model_dir(config()) == "/srv/models"


def test_section_split_keeps_output_without_trailing_newline() -> None:
    out = (
        "@@VFLEET@@ BEGIN kernel\n6.1.0\n@@VFLEET@@ STDERR kernel\n\n@@VFLEET@@ END kernel 0\n"
        "@@VFLEET@@ BEGIN os_release\nID=debian\n\n@@VFLEET@@ STDERR os_release\nwarn\n@@VFLEET@@ END os_release 0\n"
    )
    s = read_outputs(out)
    assert s["kernel"] == Output("6.1.0", "", 0)
    assert s["os_release"] == Output("ID=debian\n", "warn", 0)


def test_weights_probe_reads_headers_only(tmp_path: Path) -> None:
    md = _model_dir(tmp_path)
    r = subprocess.run(["sh", "-c", F.Weights(str(md)).command()], capture_output=True, text=True)
    assert r.returncode == 0
    assert F.Weights(str(md)).parse(r.stdout) == {"files": 1, "bytes": 64, "dtypes": {"BF16": 64}}


def test_real_gather_on_an_h200(tmp_path: Path) -> None:
    """gather_script({... preflight_smi_xml: True}) run with dash on a real H200 host (0.16-0.25 s
    wall over 4 runs); its facts match the lab's h200-1 profile, and its snapshot reads back equal."""
    cfg = config(
        {"model_dir": "/srv/models", "model_name": "qwen", "tensor_parallel_size": 1, "preflight_smi_xml": True}
    )
    out = (FIXTURES / "gathered_h200_real.out").read_text()
    facts = preflight.parse_gathered(out, cfg)
    assert facts["gpu_state"] == "ok" and facts["gpu_count"] == 1
    g = facts["gpus"][0]
    assert (g["name"], g["compute_capability"], g["memory_total_mib"], g["persistence_mode"], g["ecc_uncorrected"]) == (
        "NVIDIA H200",
        "9.0",
        143771,
        True,
        0,
    )
    assert (facts["driver_version"], facts["cuda_version"]) == ("580.159.04", "13.0")
    assert facts["os"]["ID"] == "ubuntu" and facts["shm_bytes"] == 137438953472
    assert facts["model_fs"] == {
        "path": "/srv",
        "fstype": "ext4",
        "free_bytes": 68700418048,
        "mount": "/",
        "network": False,
    }
    assert facts["nccl_env_file"] == {} and facts["vllm_installed"] is None and facts["model_config"] is None
    assert facts["pcie_acs"] is None  # no lspci on that host: unknown
    assert read_outputs(out)["pcie_acs"].rc == 127
    raw = preflight.gathered_raw_outputs(out)
    assert sorted(raw) == ["nvidia-smi.txt", "query-gpu.csv", "smi-q.xml", "topo.txt"]
    profile = LAB_PROFILES / "h200-1"
    if profile.is_dir():
        assert raw["query-gpu.csv"].splitlines()[0] == (profile / "query-gpu.csv").read_text().splitlines()[0]
        from_profile = preflight.facts_from_snapshot(profile, cfg)
        for k in ("gpu_count", "driver_version", "cuda_version", "topology", "gpu_state"):
            assert from_profile[k] == facts[k], k
    preflight.snapshot_write(tmp_path / "s", raw, facts)
    assert preflight.facts_from_snapshot(tmp_path / "s", cfg) == facts
