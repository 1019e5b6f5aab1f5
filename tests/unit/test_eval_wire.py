"""Parsing what a real vLLM 0.32.0 answered (tests/unit/data/eval/, captured from the lab's CPU
server) and the divergence arithmetic on those shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vfleet.clients.eval import wire
from vfleet.clients.eval.divergence import common_suffix, divergence

DATA = Path(__file__).parent / "data" / "eval"


def capture(name: str) -> dict:
    return json.loads((DATA / f"cap-{name}.json").read_text())


def test_chat_reply_with_token_ids_and_top_logprobs():
    got = wire.parse_chat(capture("chat-logprobs"))
    assert got.reply == " help help help help help help" and got.finish_reason == "length"
    assert got.token_ids == [530] * 6
    assert got.logprobs[0] == pytest.approx(-5.35654878616333) and len(got.logprobs) == 6
    assert got.top_logprobs[0] == {"530": pytest.approx(-5.35654878616333), "452": pytest.approx(-5.47764253616333)}


def test_a_server_that_ignored_token_ids_is_named():
    with pytest.raises(ValueError, match="return_tokens_as_token_ids"):
        wire.parse_chat(capture("plain"))


def test_prompt_scores_from_prompt_logprobs_without_prompt_token_ids():
    data = capture("prompt-logprobs")
    assert data["prompt_token_ids"] is None  # what 0.32.0 sent without return_token_ids
    got = wire.parse_prompt_scores(data)
    assert len(got.token_ids) == 15 and got.logprobs[0] is None
    # the prompt's own token is the first key; "2" (rank 57) before the top-1 "373"
    assert got.token_ids[1:4] == [2, 343, 203] and got.logprobs[1] == pytest.approx(-6.006918430328369)
    assert got.token_ids[-3:] == [530, 530, 530]
    assert got.logprobs[-1] == pytest.approx(-5.275497913360596)


def test_prompt_token_ids_are_used_when_sent():
    data = capture("prompt-logprobs")
    data["prompt_token_ids"] = [9] + [373] * 14  # the top-1 of each entry, say
    got = wire.parse_prompt_scores(data)
    assert got.token_ids[1] == 373 and got.logprobs[1] == pytest.approx(-5.522543430328369)
    assert got.logprobs[-1] is None  # 373 is not in the last entry


def test_no_prompt_logprobs_is_an_error():
    with pytest.raises(ValueError, match="prompt_logprobs"):
        wire.parse_prompt_scores(capture("chat-logprobs"))


def _reference(n: int = 3):
    chat = wire.parse_chat(capture("chat-logprobs"))
    return chat.token_ids[:n], chat.logprobs[:n]


def test_the_same_server_scores_its_own_reply_at_zero_divergence():
    """ " help help help" generated, then scored as a continuation on the same server: the
    prompt's last three logprobs are the generated ones, bit for bit."""
    ids, lps = _reference()
    d = divergence(ids, lps, wire.parse_prompt_scores(capture("prompt-logprobs")))
    assert d.value == 0.0 and (d.scored, d.of) == (3, 3)


def test_divergence_is_the_mean_gap_in_nats_per_token():
    ids, lps = _reference()
    d = divergence(ids, [lp + 0.3 for lp in lps], wire.parse_prompt_scores(capture("prompt-logprobs")))
    assert d.value == pytest.approx(0.3) and d.scored == 3


def test_divergence_is_absolute_so_sharper_tokens_and_mixed_signs_do_not_cancel():
    ids, lps = _reference()
    sharper = divergence(ids, [lp - 0.3 for lp in lps], wire.parse_prompt_scores(capture("prompt-logprobs")))
    assert sharper.value == pytest.approx(0.3) and sharper.signed == pytest.approx(-0.3)
    mixed = divergence(
        ids, [lp + s for lp, s in zip(lps, (0.3, -0.3, 0.0))], wire.parse_prompt_scores(capture("prompt-logprobs"))
    )
    assert mixed.value == pytest.approx(0.2) and mixed.signed == pytest.approx(0.0)


def test_a_trailing_stop_token_is_not_scored():
    ids, lps = _reference()
    d = divergence(ids + [3], lps + [-0.01], wire.parse_prompt_scores(capture("prompt-logprobs")))
    assert d.value == 0.0 and (d.scored, d.of) == (3, 4)


def test_retokenized_reply_is_aligned_on_the_common_suffix():
    ids, lps = _reference()
    d = divergence([777] + ids[1:], lps, wire.parse_prompt_scores(capture("prompt-logprobs")))
    assert (d.scored, d.of) == (2, 3) and d.value == 0.0
    assert common_suffix([1, 2, 3], [9, 2, 3]) == 2 and common_suffix([], [1]) == 0
    assert divergence([], [], wire.parse_prompt_scores(capture("prompt-logprobs"))).value is None


def test_request_bodies():
    body = wire.chat_body("tiny", [{"role": "user", "content": "q"}], seed=7, max_tokens=24, top_logprobs=5)
    assert body["temperature"] == 0 and body["seed"] == 7 and body["logprobs"] is True
    assert body["top_logprobs"] == 5 and body["return_tokens_as_token_ids"] is True
    cont = wire.continuation_body("tiny", [{"role": "user", "content": "q"}], " help")
    assert cont["messages"][-1] == {"role": "assistant", "content": " help"}
    assert cont["continue_final_message"] is True and cont["add_generation_prompt"] is False
    assert cont["prompt_logprobs"] == 1 and cont["max_tokens"] == 1
