"""Scoring a reply against its item's one expectation; the reason names what was wrong."""

from __future__ import annotations

from vfleet.clients.eval.evalset import EvalItem
from vfleet.clients.eval.scoring import normalize, score

M = ({"role": "user", "content": "q"},)


def test_answer_is_a_normalized_exact_match():
    item = EvalItem("a", M, answer="Paris")
    assert normalize("  PARIS.  ") == "paris" and normalize("New\n  York") == "new york"
    assert score(item, "paris.") == (True, "")
    passed, why = score(item, "Paris, France")
    assert passed is False and "'Paris, France'" in why and "'Paris'" in why


def test_regex_searches_anywhere():
    item = EvalItem("r", M, regex=r"(?i)\btokyo\b")
    assert score(item, "It is Tokyo.")[0] is True
    passed, why = score(item, "Kyoto")
    assert passed is False and "does not match (?i)\\btokyo\\b" in why


SCHEMA = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}


def test_schema_parses_json_or_a_fenced_block_and_validates():
    item = EvalItem("s", M, schema=SCHEMA)
    assert score(item, '{"city": "Paris"}') == (True, "")
    assert score(item, 'Here:\n```json\n{"city": "Paris"}\n```\nDone.') == (True, "")
    passed, why = score(item, '{"city": 3}')
    assert passed is False and "at city" in why and "not of type 'string'" in why
    passed, why = score(item, "Paris")
    assert passed is False and "is not JSON" in why


def test_an_item_without_expectation_is_not_judged():
    assert score(EvalItem("n", M), "anything") == (None, "")
