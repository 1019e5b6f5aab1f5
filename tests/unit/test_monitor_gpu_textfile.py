"""The GPU textfile producer (vfleet/roles/monitoring/_gpu_textfile.py): nvidia-smi's rows ->
Prometheus text, from data files (a GPU lost, the driver gone, values the GPU cannot give)
and from the lab's simulated nvidia-smi replaying each captured profile (what a lab host runs);
the text passes the real `promtool check metrics`; the file is replaced atomically; a missing
or hung nvidia-smi is a reading that says so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from vfleet.roles.monitoring import _gpu_textfile as gt

DATA = Path(__file__).parent / "data" / "monitor" / "gpu"
REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "vfleet" / "lab" / "nvidia_smi.py"
PROFILES = REPO / "vfleet" / "lab" / "profiles"
MIB = 1024 * 1024


def samples(text: str) -> dict[str, float]:
    """`name{label="v",...}` (labels sorted) -> value, through prometheus_client's parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[s.name + (f"{{{labels}}}" if labels else "")] = s.value
    return out


def check_metrics(text: str) -> subprocess.CompletedProcess:
    """The real `promtool check metrics` (Prometheus's own linter) on the text; never skipped."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool not found: `apt-get install -y prometheus` (the Makefile's APT lists)")
    return subprocess.run([exe, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)


def fake_smi(tmp_path: Path, profile: str) -> str:
    """An `nvidia-smi` that is the lab's simulator replaying `profile`, as on a lab host."""
    exe = tmp_path / "nvidia-smi"
    exe.write_text(f'#!/bin/sh\nVFLEET_GPU_PROFILE={PROFILES / profile} exec {sys.executable} {SIM} "$@"\n')
    exe.chmod(0o755)
    return str(exe)


def test_the_command_is_the_documented_query():
    assert gt.COMMAND == (
        "nvidia-smi",
        "--query-gpu=index,uuid,pci.bus_id,utilization.gpu,memory.used,memory.total,"
        "ecc.errors.uncorrected.volatile.total,name",
        "--format=csv,noheader,nounits",
    )


@pytest.mark.parametrize("case", sorted(p.name for p in DATA.glob("*.yaml")))
def test_parse_and_render_from_data_files(case):
    spec = yaml.safe_load((DATA / case).read_text())
    assert spec["command"] == " ".join(gt.COMMAND)
    reading = gt.parse(spec["output"], spec["returncode"])
    assert reading.problems == spec["problems"]
    got = samples(gt.render(reading, expected=8))
    for key, value in spec["expected"].items():
        assert got[key] == value, (key, got)
    for name in spec.get("absent", []):
        assert not [k for k in got if k.startswith(name)], got


def test_a_name_with_a_comma_stays_one_cell():
    """`name` is the last field: the real tool does not quote, so a comma is the name's own."""
    reading = gt.parse("0, GPU-x, 00000000:01:00.0, 3, 10, 20, 0, Weird, Inc. GPU\n", 0)
    assert reading.ok and reading.gpus[0]["name"] == "Weird, Inc. GPU"
    assert samples(gt.render(reading, 1))['vfleet_gpu_utilization_ratio{gpu="0",uuid="GPU-x"}'] == 0.03


@pytest.mark.parametrize(
    "profile,gpus,total_mib", [("h200-1", 1, 143771), ("v100-8-pcie", 8, 32768), ("a100-8-sxm", 8, 81920)]
)
def test_main_writes_what_the_simulated_gpus_say(tmp_path, profile, gpus, total_mib):
    out = tmp_path / "vfleet-gpu.prom"
    assert gt.main(["--output", str(out), "--expected", str(gpus), "--nvidia-smi", fake_smi(tmp_path, profile)]) == 0
    text = out.read_text()
    got = samples(text)
    assert got["vfleet_gpu_smi_ok"] == 1 and got["vfleet_gpu_devices"] == gpus
    totals = {k: v for k, v in got.items() if k.startswith("vfleet_gpu_memory_total_bytes")}
    assert len(totals) == gpus and set(totals.values()) == {total_mib * MIB}
    assert len([k for k in got if k.startswith("vfleet_gpu_utilization_ratio")]) == gpus
    assert sorted(os.listdir(tmp_path)) == ["nvidia-smi", "vfleet-gpu.prom"]  # no temp file left
    assert oct(out.stat().st_mode & 0o777) == "0o644"  # node_exporter runs as prometheus
    p = check_metrics(text)
    assert p.returncode == 0, p.stdout + p.stderr


def test_broken_driver_profile_is_a_failed_reading(tmp_path):
    out = tmp_path / "vfleet-gpu.prom"
    gt.main(["--output", str(out), "--expected", "1", "--nvidia-smi", fake_smi(tmp_path, "broken-driver")])
    got = samples(out.read_text())
    assert (got["vfleet_gpu_smi_ok"], got["vfleet_gpu_devices"], got["vfleet_gpu_devices_expected"]) == (0, 0, 1)


def test_missing_or_hung_nvidia_smi_is_a_failed_reading(tmp_path):
    missing = gt.read(5, str(tmp_path / "no-such-nvidia-smi"))
    assert not missing.ok and "not found" in missing.problems[0]
    hung = tmp_path / "hung"
    hung.write_text("#!/bin/sh\nexec sleep 30\n")
    hung.chmod(0o755)
    reading = gt.read(0.5, str(hung))
    assert not reading.ok and reading.problems == [f"{hung} did not answer within 0.5s"]


def test_the_file_is_replaced_whole_and_kept_when_the_write_fails(tmp_path, monkeypatch):
    out = tmp_path / "vfleet-gpu.prom"
    gt.write_atomically(str(out), "old\n")

    def fail(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(gt.os, "replace", fail)
    with pytest.raises(OSError):
        gt.write_atomically(str(out), "new\n")
    assert out.read_text() == "old\n" and os.listdir(tmp_path) == ["vfleet-gpu.prom"]


def test_label_values_are_escaped():
    reading = gt.parse('0, GPU-"q"\\, 00000000:01:00.0, 0, 0, 1, 0, A\n', 0)
    text = gt.render(reading, 1)
    assert 'uuid="GPU-\\"q\\"\\\\"' in text
    assert samples(text)['vfleet_gpu_info{gpu="0",name="A",pci_bus_id="00000000:01:00.0",uuid="GPU-"q"\\"}'] == 1
