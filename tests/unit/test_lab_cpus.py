"""Which CPUs each lab host gets (vfleet/lab/cpus.py): the rule the cpusets and the deploy
inventory's worker binding both follow."""

from __future__ import annotations

import pytest

from vfleet.lab import cpus


@pytest.mark.parametrize(
    "names, gateways, machine, expected",
    [
        # the lab of `make demo` and the tests on a 2-core machine: a core per vLLM host
        (["lab1", "lab2", "lab3"], 1, [0, 1], {"lab1": [0], "lab2": [1], "lab3": [0, 1]}),
        # more vLLM hosts than cores: round robin, never a host on two cores
        (["lab1", "lab2", "lab3", "lab4"], 1, [0, 1], {"lab1": [0], "lab2": [1], "lab3": [0], "lab4": [0, 1]}),
        # a machine whose usable CPUs are not 0..n-1 (taskset, a container's cpuset)
        (["a1", "a2", "a3"], 1, [2, 5], {"a1": [2], "a2": [5], "a3": [2, 5]}),
        # one host, no gateway; and a lab of gateways only
        (["lab1"], 0, [0, 1], {"lab1": [0]}),
        (["g1", "g2"], 2, [0, 1, 2], {"g1": [0, 1, 2], "g2": [0, 1, 2]}),
    ],
)
def test_assign(names, gateways, machine, expected):
    assert cpus.assign(names, gateways, machine) == expected


@pytest.mark.parametrize(
    "cpulist, text",
    [
        ([0], "0"),
        ([0, 1], "0-1"),
        ([3, 0, 1, 2, 7], "0-3,7"),
        ([5, 5, 6], "5-6"),
        ([1, 3, 5], "1,3,5"),
    ],
)
def test_cpulist_round_trip(cpulist, text):
    assert cpus.to_list(cpulist) == text
    assert cpus.from_list(text) == sorted(set(cpulist))


def test_available_is_this_process_affinity():
    import os

    assert cpus.available() == sorted(os.sched_getaffinity(0))
