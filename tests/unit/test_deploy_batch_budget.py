"""`deploy --batch`'s failure budget: the schema's default of 100 must not keep restarting
batches on a unit that just failed; only a value someone set counts."""

from __future__ import annotations

from types import SimpleNamespace

from vfleet.cli.deploy_steps import _batch_budget


def host(name, value=100, source="default"):
    return SimpleNamespace(name=name, vars={"max_fail_percentage": value}, sources={"max_fail_percentage": source})


def play(*hosts, cli=None):
    return SimpleNamespace(hosts=list(hosts), options=SimpleNamespace(max_fail_percentage=cli))


def test_default_is_zero_not_the_schema_default():
    assert _batch_budget(play(host("a"), host("b")), ["a", "b"]) == 0.0


def test_an_inventory_value_counts():
    assert _batch_budget(play(host("a", 50, "inv.yaml: line 3: group 'vllm'"), host("b")), ["a", "b"]) == 50.0


def test_the_command_line_wins():
    assert _batch_budget(play(host("a", 50, "inv.yaml"), cli=25), ["a"]) == 25.0
