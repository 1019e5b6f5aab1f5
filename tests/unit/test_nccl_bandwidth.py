"""The nccl_bandwidth check's rules: expected figures by link, thresholds, the 1-GPU case."""

import pytest

from vfleet.roles.preflight import _nccl_bandwidth as nb


def result(world, busbw, correct=True):
    return {
        "world_size": world,
        "busbw_gbps": busbw,
        "time_s": 0.001,
        "size_bytes": 256 << 20,
        "correct": correct,
        "nccl": "2.28.3",
    }


@pytest.mark.parametrize(
    "link,cc,cls,want",
    [
        ("NV18", "9.0", "NV18", 370),
        ("NV12", "8.0", "NV12", 200),
        ("NV2", "7.0", "NV2", 40),
        ("SYS", "7.0", "PCIE_GEN3", 10),
        ("PHB", "8.9", "PCIE_GEN4", 20),
        (None, None, "PCIE_GEN3", 10),
    ],
)
def test_expected_by_link(link, cc, cls, want):
    assert nb.link_class(link, cc) == cls
    assert nb.expected(cls)["busbw_gbps"] == want
    assert nb.expected(cls)["source"]


def test_every_row_has_a_source():
    assert all(row.get("source") for row in nb.table()["links"])


@pytest.mark.parametrize("busbw,status", [(360.0, "pass"), (200.0, "warn"), (100.0, "fail")])
def test_thresholds_on_nvlink(busbw, status):
    c = nb.evaluate(result(8, busbw), "NV18", "9.0")
    assert c.status == status
    assert f"{busbw:.1f} GB/s" in c.message and "NV18" in c.message
    assert (c.fix != "") == (status != "pass")


def test_pcie_v100_box_at_usual_speed_passes():
    assert nb.evaluate(result(4, 9.5), "SYS", "7.0").status == "pass"


def test_single_gpu_degenerates_to_pass_without_bandwidth():
    c = nb.evaluate(result(1, 0.0), None, "9.0")
    assert c.status == "pass" and "does not apply" in c.message


def test_probe_that_did_not_run_or_summed_wrong_fails():
    assert nb.evaluate(None, "NV18", "9.0", error="ModuleNotFoundError: torch").status == "fail"
    assert "wrong sums" in nb.evaluate(result(2, 300, correct=False), "NV18", "9.0").message


def test_probe_command_keeps_multicast_off_and_applies_unit_env():
    cmd = nb.probe_command([0, 1], "/opt/vllm/current/bin/python", {"NCCL_P2P_DISABLE": "1"})
    assert "NCCL_NVLS_ENABLE=0" in cmd and "NCCL_P2P_DISABLE=1" in cmd and "TORCH_SYMM_MEM_DISABLE_MULTICAST=1" in cmd
    compile(nb.PROBE, "probe", "exec")  # the script shipped to hosts is valid Python


def test_parse_result_line():
    assert nb.parse_result('noise\nVFLEET_NCCL {"world_size": 2}\n') == {"world_size": 2}
    assert nb.parse_result("Traceback...") is None


def test_probe_command_keeps_every_environment_value_one_shell_word(tmp_path):
    """A value with shell syntax reaches the probe as that literal value (run by a real sh)."""
    import subprocess

    from vfleet.config.quoting import QuotingError
    from vfleet.roles.preflight import _nccl_bandwidth as nb

    marker = tmp_path / "pwned"
    cmd = nb.probe_command([0], "/nonexistent/python", {"NCCL_DEBUG": f"INFO; touch {marker}"})
    fake = tmp_path / "python3"
    fake.write_text('#!/bin/sh\necho "NCCL_DEBUG=$NCCL_DEBUG"\n')
    fake.chmod(0o755)
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert f"NCCL_DEBUG=INFO; touch {marker}" in r.stdout and not marker.exists()
    with pytest.raises(QuotingError):
        nb.probe_command([0], "python3", {"NCCL_DEBUG=INFO; touch /tmp/x; X": "1"})
