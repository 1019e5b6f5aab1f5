"""Prompts: synthetic ones distinct per request (prefix caching), calibrated to a token
length; JSONL chat messages; ShareGPT files."""

from __future__ import annotations

import json

import pytest

from vfleet.clients.bench.client import request_body
from vfleet.clients.bench.prompts import SyntheticPrompts, load_file
from vfleet.engine.errors import VfleetError


def test_synthetic_prompts_are_distinct_from_the_first_block():
    sp = SyntheticPrompts(256, seed=1)
    texts = [sp.text(i) for i in range(2000)]
    assert len(set(texts)) == len(texts)
    # vLLM caches prefixes in blocks of 16 tokens: no two prompts share their first 8 words
    heads = {" ".join(t.split()[:8]) for t in texts}
    assert len(heads) == len(texts)
    assert SyntheticPrompts(256, seed=1).text(7) == texts[7]  # reproducible
    assert SyntheticPrompts(256, seed=2).text(7) != texts[7]


def test_synthetic_calibration_against_a_tokenizer():
    sp = SyntheticPrompts(300)
    # a tokenizer that makes two tokens of every word
    assert sp.calibrate(lambda text: 2 * len(text.split()))
    assert sp.calibrated and abs(len(sp.text(0).split()) - 150) <= 3
    sp2 = SyntheticPrompts(100)
    assert not sp2.calibrate(lambda text: None) and sp2.words_for() == 100


def test_jsonl_messages(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text(
        json.dumps(
            {
                "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
                "max_tokens": 7,
            }
        )
        + "\n\n"
        + json.dumps([{"role": "user", "content": "bare list"}])
        + "\n"
        + json.dumps({"prompt": "plain prompt"})
        + "\n"
    )
    fp = load_file(str(p))
    assert fp.fmt == "jsonl" and len(fp.prompts) == 3
    assert fp.get(0).max_tokens == 7 and fp.get(0).messages[0]["role"] == "system"
    assert fp.get(4).messages == [{"role": "user", "content": "bare list"}]  # round robin
    assert fp.get(2).messages == [{"role": "user", "content": "plain prompt"}]


def test_jsonl_errors_name_the_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"messages": [{"role": "user", "content": "ok"}]}\n{"nope": 1}\n')
    with pytest.raises(VfleetError, match=r"bad.jsonl:2"):
        load_file(str(p))
    with pytest.raises(VfleetError, match="no such file"):
        load_file(str(tmp_path / "missing.jsonl"))


def test_sharegpt(tmp_path):
    p = tmp_path / "sg.json"
    p.write_text(
        json.dumps(
            [
                {
                    "id": "1",
                    "conversations": [
                        {"from": "human", "value": "What is KV cache?"},
                        {"from": "gpt", "value": "A cache."},
                        {"from": "human", "value": "more"},
                    ],
                },
                {"id": "2", "conversations": [{"from": "gpt", "value": "answer first: unusable"}]},
                {"id": "3", "conversations": [{"from": "system", "value": "sys"}, {"from": "human", "value": "Hi"}]},
            ]
        )
    )
    fp = load_file(str(p))
    assert fp.fmt == "sharegpt" and len(fp.prompts) == 2
    assert fp.get(0).messages == [{"role": "user", "content": "What is KV cache?"}]
    assert fp.get(1).messages == [{"role": "system", "content": "sys"}, {"role": "user", "content": "Hi"}]


def test_request_body_asks_for_usage_and_fixed_length():
    b = request_body("m", [{"role": "user", "content": "x"}], 64, True)
    assert b["stream"] and b["stream_options"] == {"include_usage": True}
    assert b["max_tokens"] == 64 and b["ignore_eos"] is True
    assert "ignore_eos" not in request_body("m", [], 64, False)
