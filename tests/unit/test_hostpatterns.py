"""Host ranges and --limit patterns behave like Ansible's (and refuse what Ansible would
silently get wrong)."""

from __future__ import annotations

import pytest

from vfleet.engine.errors import VfleetError
from vfleet.engine.hostpatterns import expand_host_range, host_range_size, match_limit, split_limit


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("gpu[01:04]", ["gpu01", "gpu02", "gpu03", "gpu04"]),
        ("gpu[1:3]", ["gpu1", "gpu2", "gpu3"]),
        ("gpu[08:11]", ["gpu08", "gpu09", "gpu10", "gpu11"]),
        ("node-[a:c]", ["node-a", "node-b", "node-c"]),
        ("h[1:10:4]", ["h1", "h5", "h9"]),
        ("h[:2]", ["h0", "h1", "h2"]),
        ("r[1:2]-g[a:b]", ["r1-ga", "r1-gb", "r2-ga", "r2-gb"]),
        ("db[01:02].example.com", ["db01.example.com", "db02.example.com"]),
        ("plain", ["plain"]),
    ],
)
def test_expand_host_range(pattern, expected):
    assert expand_host_range(pattern) == expected


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("gpu[10:01]", "host range 'gpu[10:01]': start after end"),
        ("node-[c:a]", "host range 'node-[c:a]': start after end"),
        ("gpu[01-04]", "host range 'gpu[01-04]': expected [start:end] or [start:end:step]"),
        ("gpu[01:100]", "zero-padded start and end must have the same width"),
        ("gpu[1:a]", "start and end must both be numbers or both single letters"),
        ("gpu[1:4:0]", "step must be a whole number >= 1"),
        ("gpu[1:]", "missing end"),
        ("gpu[1:2", "expected [start:end]"),
    ],
)
def test_expand_host_range_errors(pattern, message):
    with pytest.raises(ValueError, match=None) as exc:
        expand_host_range(pattern)
    assert message in str(exc.value)


HOSTS = ["gpu01", "gpu02", "gpu03", "gpu04", "gw-01", "lab1"]
GROUPS = {
    "all": HOSTS,
    "vllm": ["gpu01", "gpu02", "gpu03", "gpu04"],
    "h100": ["gpu01", "gpu02"],
    "l4": ["gpu03", "gpu04"],
    "gateway": ["gw-01"],
    "canary": ["gpu04", "lab1"],
}


@pytest.mark.parametrize(
    "limit, expected",
    [
        ("gpu02", ["gpu02"]),
        ("h100", ["gpu01", "gpu02"]),
        ("gateway,gpu03", ["gpu03", "gw-01"]),  # inventory order, not limit order
        ("h100:l4", ["gpu01", "gpu02", "gpu03", "gpu04"]),
        ("gpu0*", ["gpu01", "gpu02", "gpu03", "gpu04"]),
        ("g*", HOSTS[:5]),  # globs match group names too
        ("vllm:!gpu03", ["gpu01", "gpu02", "gpu04"]),
        ("!gateway", ["gpu01", "gpu02", "gpu03", "gpu04", "lab1"]),  # only exclusions: from all
        ("vllm:&canary", ["gpu04"]),
        ("&canary:vllm", ["gpu04"]),  # order written does not matter
        ("vllm:!h100:&canary", ["gpu04"]),
        ("~gpu0[13]", ["gpu01", "gpu03"]),
        ("gpu[02:03]", ["gpu02", "gpu03"]),
        ("all", HOSTS),
        ("*", HOSTS),
        (" h100 , gateway ", ["gpu01", "gpu02", "gw-01"]),
        ("vllm:&gateway", []),  # valid terms, empty intersection
    ],
)
def test_match_limit(limit, expected):
    assert match_limit(limit, HOSTS, GROUPS) == expected


def test_match_limit_no_match_names_known_groups_and_suggests():
    with pytest.raises(VfleetError) as exc:
        match_limit("h10", HOSTS, GROUPS, source="inventories/h100.yaml")
    assert str(exc.value) == (
        "--limit 'h10' matches no host or group in inventories/h100.yaml; known groups: "
        "all, canary, gateway, h100, l4, vllm; did you mean 'h100'?"
    )


def test_match_limit_typo_in_exclusion_is_an_error_not_a_no_op():
    with pytest.raises(VfleetError, match="--limit 'gpu07' matches no host or group"):
        match_limit("vllm:!gpu07", HOSTS, GROUPS)


def test_match_limit_bad_regex_and_empty():
    with pytest.raises(VfleetError, match="bad regular expression"):
        match_limit("~gpu[", HOSTS, GROUPS)
    with pytest.raises(VfleetError, match="--limit is empty"):
        match_limit(" , ", HOSTS, GROUPS)


def test_split_limit_keeps_ranges_whole():
    assert split_limit("gpu[01:04]:!gpu02") == ["gpu[01:04]", "!gpu02"]
    assert split_limit("a,b:c") == ["a", "b:c"]


@pytest.mark.parametrize(
    "pattern, size",
    [
        ("gpu", 1),
        ("gpu[01:16]", 16),
        ("h[1:10:2]", 5),
        ("node-[a:c]", 3),
        ("r[1:4]-n[01:10]", 40),
        ("gpu[0:10000000]", 10_000_001),
    ],
)
def test_host_range_size_counts_without_expanding(pattern, size):
    assert host_range_size(pattern) == size


def test_host_range_size_reports_the_same_errors():
    with pytest.raises(ValueError, match="start after end"):
        host_range_size("gpu[10:01]")
