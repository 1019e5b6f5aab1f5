"""Property-based: hostile values for every variable of the table, fed to every renderer through
the real CLI (tests/unit/property_run.py says what must hold). A variable added to
vfleet.config.variables.VARIABLES is generated here without a line of its own.

Reproducible: derandomize=True and no example database, so the examples follow from the code
alone and CI runs the same ones each time. Shrinking is off by default (it costs minutes on a
failure); HYPOTHESIS_PROFILE=vfleet-debug shrinks a failure to its smallest example and
tries more of them."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings, strategies as st

from vfleet.config.variables import VARIABLES
from tests.unit.property_run import run_example
from tests.unit.property_support import KNOWN_CLASSES, Example, examples, known_class

_COMMON = dict(deadline=None, derandomize=True, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.register_profile("vfleet-ci", phases=[Phase.explicit, Phase.generate], **_COMMON)
settings.register_profile("vfleet-debug", phases=[Phase.explicit, Phase.generate, Phase.shrink], **_COMMON)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "vfleet-ci"))
PER_VARIABLE, TOGETHER = (2, 100) if PROFILE.phases[-1] != Phase.shrink else (20, 1000)


def test_the_base_fleet_renders_and_validates() -> None:
    """The ground every example stands on: the base fleet passes every check as it is."""
    assert run_example(Example.of([])) == []


# Variables whose examples show a class another helper is fixing (property_support.KNOWN_CLASSES).
XFAIL = {"api_key": "secret-refused-only-by-deploy", "hf_token": "secret-refused-only-by-deploy",
         "gateway_rate_burst": "huge-number", "replica_allreduce_port": "huge-number",
         "monitoring_scrape_interval": "pattern-accepts-newline-or-unicode-digit",
         "replica": "replica-error-spans-lines"}


def _param(variable):
    known = XFAIL.get(variable.name)
    marks = [pytest.mark.xfail(strict=True, reason=f"{known}: fixed by {KNOWN_CLASSES[known][0]}")] if known else []
    return pytest.param(variable, id=variable.name, marks=marks)


@pytest.mark.parametrize("variable", [_param(v) for v in VARIABLES])
@settings(PROFILE, max_examples=PER_VARIABLE)
@given(data=st.data())
def test_each_variable_alone(variable, data) -> None:
    example = data.draw(examples([variable], max_vars=1))
    assert run_example(example) == []


@settings(PROFILE, max_examples=TOGETHER)
@given(example=examples(max_vars=3, valid_weight=3))
def test_several_variables_together(example: Example) -> None:
    assume(known_class(example) is None)    # each known class fails test_each_variable_alone meanwhile
    assert run_example(example) == []
