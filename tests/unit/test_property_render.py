"""Property-based: hostile values for every variable of the table, fed to every renderer through
the real CLI (tests/unit/property_run.py says what must hold). A variable added to
vfleet.config.variables.VARIABLES is generated here without a line of its own.

Reproducible: derandomize=True and no example database, so the examples follow from the code
alone and CI runs the same ones each time; a failure prints its example (`Draw 1:` /
`example=`), which tests/unit/property_run.run_example replays. Shrinking is off by default
(minutes on a failure); HYPOTHESIS_PROFILE=vfleet-debug shrinks a failure to its smallest
example and tries ten times more.

No class of failure is marked expected here: each one the suite found (huge numbers, patterns
that took a trailing newline or a Unicode digit, control characters in a secret, unbounded
names and paths, `..` in a name joined under a root, replica errors spanning lines) is fixed,
and every variable, alone or mixed with others, is held to the whole property again."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from tests.unit.property_run import run_example
from tests.unit.property_support import Example, Setting, examples
from vfleet.config.variables import VARIABLES

_COMMON = dict(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.register_profile("vfleet-ci", phases=[Phase.explicit, Phase.generate], **_COMMON)
settings.register_profile("vfleet-debug", phases=[Phase.explicit, Phase.generate, Phase.shrink], **_COMMON)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "vfleet-ci"))
PER_VARIABLE, TOGETHER = (2, 100) if Phase.shrink not in PROFILE.phases else (20, 1000)


def test_the_base_fleet_renders_and_validates() -> None:
    """The ground every example stands on: the base fleet passes every check as it is."""
    assert run_example(Example.of([])) == []


@pytest.mark.parametrize("variable", VARIABLES, ids=lambda v: v.name)
@settings(PROFILE, max_examples=PER_VARIABLE)
@given(data=st.data())
def test_each_variable_alone(variable, data) -> None:
    example = data.draw(examples([variable], max_vars=1))
    assert run_example(example) == []


@settings(PROFILE, max_examples=TOGETHER)
@given(example=examples(max_vars=3, valid_weight=3))
def test_several_variables_together(example: Example) -> None:
    assert run_example(example) == []


def _long(variable) -> str:
    """A value the schema's pattern still takes, 300 characters long (its example, its last
    character repeated): names and paths past what a file system or useradd holds."""
    example = next((e for e in variable.json_schema.get("examples", []) if isinstance(e, str)), "x")
    return example + example[-1] * (300 - len(example))


def _takes_strings(variable) -> bool:
    t = variable.json_schema.get("type", [])
    return "string" in ([t] if isinstance(t, str) else t) and not variable.secret


@pytest.mark.parametrize(
    "variable,level",
    [
        pytest.param(v, level, id=f"{v.name}@{level}")
        for v in VARIABLES
        if _takes_strings(v)
        for level in ("all", "gpu01")
    ],
)
def test_each_string_variable_very_long(variable, level) -> None:
    assert run_example(Example.of([Setting(variable.name, _long(variable), level)])) == []


@pytest.mark.parametrize("variable", [v for v in VARIABLES if _takes_strings(v)], ids=lambda v: v.name)
def test_each_string_variable_climbing_out(variable) -> None:
    """`..` where a name or path goes: nothing vfleet deletes or writes may climb out of its folder."""
    assert run_example(Example.of([Setting(variable.name, "../../..", "all")])) == []
