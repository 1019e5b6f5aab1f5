"""The options object of a task (vfleet/cli/options.py): the common flags picked by name from
the task's parameters, typed once; the Play it opens runs with them."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from vfleet.cli import namespace
from vfleet.cli.common import COMMON_HELP, make_play
from vfleet.cli.options import TaskOptions
from vfleet.config.fleet import Fleet
from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import load_inventory


def test_the_fields_are_the_common_flags():
    assert [f.name for f in dataclasses.fields(TaskOptions)] == ["set_" if n == "set" else n for n in COMMON_HELP]


def test_picked_by_name_from_a_tasks_locals_and_typed():
    def task(
        c,
        host,
        inventory=None,
        limit="vllm",
        set_=None,
        forks=10,
        connect_timeout=None,
        command_timeout="30",
        batch="1",
    ):
        return TaskOptions.of(locals())

    opts = task(None, "gpu01", inventory="inv.yaml", set_=["a=1", "b=2"], connect_timeout="2.5")
    assert opts == TaskOptions(
        inventory="inv.yaml", limit="vllm", set_=("a=1", "b=2"), connect_timeout=2.5, command_timeout=30.0
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.limit = None  # type: ignore[misc]


def test_a_timeout_that_is_no_number_is_an_operator_error():
    with pytest.raises(VfleetError, match="--connect-timeout: 'soon' is not a number of seconds"):
        TaskOptions.of({"connect_timeout": "soon"})


def test_every_task_flag_named_like_a_common_one_is_that_flag():
    """A task parameter with a common flag's name means that flag (its help is the common one),
    so picking by name never takes a task's own flag for it."""
    names = {f.name for f in dataclasses.fields(TaskOptions)}
    for name in namespace.task_names:
        t = namespace[name]
        for param in set(inspect.signature(t.body).parameters) & names:
            flag = "set" if param == "set_" else param
            assert t.help.get(param) in (COMMON_HELP[flag], None) or param == "limit", (name, param)


def test_the_play_runs_with_the_options(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("all:\n  hosts:\n    a:\n      ansible_connection: local\n")
    fleet = Fleet.of(load_inventory(inv, schema=SCHEMA))
    opts = TaskOptions(
        forks=3,
        check=True,
        diff=True,
        no_host_key_checking=True,
        connect_timeout=4.0,
        command_timeout=5.0,
        verbose=True,
    )
    o = make_play("t", fleet, list(fleet.inventory.hosts.values()), opts).options
    assert (o.forks, o.check, o.diff, o.host_key_checking, o.connect_timeout, o.command_timeout, o.verbose) == (
        3,
        True,
        True,
        False,
        4.0,
        5.0,
        True,
    )
    assert make_play("t", fleet, [], TaskOptions()).options.host_key_checking is None  # each host's own
    with pytest.raises(VfleetError, match="--forks must be at least 1, got 0"):
        make_play("t", fleet, [], TaskOptions(forks=0))
