"""The status probes' parsers (vfleet/roles/status/_parsers.py) from captured outputs in
tests/unit/data/status/: adding a case is adding data."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vfleet.engine.fact_protocol import Output
from vfleet.roles.status import _parsers as parsers
from vfleet.roles.status._probes import Probe

DATA = Path(__file__).parent / "data" / "status"
CASES = yaml.safe_load((DATA / "parsers.yaml").read_text())
GPUS = yaml.safe_load((DATA / "gpus.yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=[f"{c['parser']}: {c['name']}" for c in CASES])
def test_parser_reads_its_capture(case):
    got = getattr(parsers, case["parser"])(case["output"])
    assert (got.to_dict() if hasattr(got, "to_dict") else got) == case["expected"]


@pytest.mark.parametrize("case", GPUS, ids=[c["name"] for c in GPUS])
def test_gpu_memory_and_utilisation(case):
    assert parsers.gpus(case["memory"], case["util"]) == case["expected"]


def test_file_hashes_and_the_systemd_version():
    text = "systemd=systemd 252 (252.39-1~deb12u2)\nunit=" + "a" * 64 + "\nenv=unreadable\n"
    assert parsers.file_hashes(text) == parsers.FileHashes(252, "a" * 64, "unreadable")
    assert parsers.file_hashes("systemd=\nunit=missing\n") == parsers.FileHashes(None, "missing", "unreadable")


def test_a_probe_is_unknown_when_its_command_failed_or_said_it_could_not_see():
    probe = Probe("journalctl ...", parsers.journal_counts, unknown_if=("not seeing messages",))
    assert probe.process_output(None) is None  # no section at all
    assert probe.process_output(Output("", "", 1)) is None  # failed
    hint = "Hint: You are currently not seeing messages from other users and the system."
    assert probe.process_output(Output("", hint, 0)) is None  # exit 0, but blind
    assert probe.process_output(Output("39f53479d3a045ac8e11786248231fbf\n", "", 0))["starts"] == 1


def test_metrics_read_gives_the_ttft_histogram_totals_and_the_served_names():
    from vfleet.clients.bench.server_metrics import read

    values, names, served = read((DATA.parent / "bench" / "metrics_vllm_new.txt").read_text())
    assert (values["ttft_sum"], values["ttft_count"], served) == (1.5, 10.0, ["tiny"])
    assert names["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
