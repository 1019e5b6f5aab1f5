"""--limit is bounded (vfleet/engine/hostpatterns.py): a `~regex` that Python's backtracking `re`
could run on for hours is refused before it runs (length, nested quantifiers, backreferences,
too many repetitions), whatever slips through gives up at a deadline, and lookups of exact names
do not scan the hosts once per term."""

from __future__ import annotations

import time

import pytest

from vfleet.engine import hostpatterns as hp
from vfleet.engine.errors import VfleetError
from vfleet.engine.hostpatterns import match_limit

HOSTS = [f"gpu{i:05d}" for i in range(20000)]
GROUPS = {"all": HOSTS, "vllm": HOSTS}


@pytest.mark.parametrize(
    "regex, words",
    [
        ("(a+)+$", "nested quantifiers"),
        ("(a|aa)*$", "nested quantifiers"),
        ("(.*a){12}", "nested quantifiers"),
        ("((ab)*c)+", "nested quantifiers"),
        ("(a?){25}a{25}", "nested quantifiers"),
        ("(x+x+)+y", "nested quantifiers"),
        ("(a)\\1", "backreferences"),
        ("(?P<n>a)(?P=n)", "backreferences"),
        ("a*a*a*a*b", "more than 3 repetitions"),
        ("g" * 201, "at most 200 characters"),
        ("gpu[0-", "bad regular expression"),
    ],
)
def test_hazardous_regexes_are_refused_in_one_line(regex, words):
    with pytest.raises(VfleetError, match=words) as exc:
        match_limit("~" + regex, HOSTS, GROUPS)
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 400


@pytest.mark.parametrize(
    "regex, count",
    [
        ("gpu0000[1-3]$", 3),
        ("gpu.*7$", 2000),
        ("(gpu|cpu)0001[0-9]", 10),
        ("gpu(\\d+)?$", 20000),
        ("(gpu)+0000[12]", 2),
        ("(?i)GPU0000[1-4]", 4),
        ("[(]*gpu00001", 1),
        ("gpu\\d+0{2}$", 200),
    ],
)
def test_ordinary_regexes_still_select(regex, count):
    assert len(match_limit("~" + regex, HOSTS, GROUPS)) == count


def test_refused_shapes_are_the_slow_ones():
    """What the checker lets through stays fast on names of 253 characters."""
    import re

    name = "a" * 253
    for ok in ("a*a*a*b", "(?:ab)+a*c", "a+b+c+", "(a|b)c*d*"):
        assert hp._regex_hazard(ok) is None
        t0 = time.perf_counter()
        re.match(ok, name)
        assert time.perf_counter() - t0 < 0.5, ok


def test_a_slow_regex_gives_up_at_the_deadline(monkeypatch):
    monkeypatch.setattr(hp, "LIMIT_REGEX_SECONDS", 0.0)
    with pytest.raises(VfleetError, match="took more than 0 s"):
        match_limit("~gpu.*", HOSTS, GROUPS)


def test_many_exact_names_are_looked_up_not_scanned():
    names = ",".join(HOSTS[::2])  # 10,000 exact host names over 20,000 hosts
    t0 = time.perf_counter()
    assert len(match_limit(names, HOSTS, GROUPS)) == 10000
    assert time.perf_counter() - t0 < 2.0


def test_limit_length_and_pattern_count_are_capped():
    with pytest.raises(VfleetError, match="more than 100,000"):
        match_limit("g" * 100_001, HOSTS, GROUPS)
    with pytest.raises(VfleetError, match="more than 100"):
        match_limit(",".join(f"g{i}*" for i in range(101)), HOSTS, GROUPS)
    assert len(match_limit(",".join(f"gpu0000{i}*" for i in range(10)), HOSTS, GROUPS)) == 10
