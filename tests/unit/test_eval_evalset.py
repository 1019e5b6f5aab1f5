"""Eval sets: the built-in one loads and its reference replies pass their own expectations; a
hostile or broken file is refused with FILE:LINE, what is wrong and the fix, never a traceback."""

from __future__ import annotations

import json

import pytest

from vfleet.clients.eval.evalset import load_evalset
from vfleet.clients.eval.scoring import score
from vfleet.engine.errors import VfleetError

MSG = [{"role": "user", "content": "Say hi."}]


def test_builtin_set_loads_and_its_references_pass():
    items = load_evalset(None)
    assert len(items) == 24 and len({i.id for i in items}) == 24
    assert {i.expectation for i in items} == {"answer", "regex", "schema"}
    assert all(score(i, i.reference) == (True, "") for i in items)


def _write(tmp_path, *lines: str):
    p = tmp_path / "set.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_a_good_file_loads_in_order_blank_lines_skipped(tmp_path):
    path = _write(
        tmp_path,
        json.dumps({"id": "a", "messages": MSG, "answer": "hi"}),
        "",
        json.dumps({"id": "b.2", "messages": MSG, "max_tokens": 8}),
    )
    a, b = load_evalset(path)
    assert (a.id, a.answer, a.expectation) == ("a", "hi", "answer")
    assert (b.id, b.expectation, b.max_tokens) == ("b.2", None, 8)


OK = {"id": "x", "messages": MSG}
CASES = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"id": "x"}), "'messages' is a required property"),
    (json.dumps({**OK, "messages": []}), "messages"),
    (json.dumps({**OK, "messages": [{"role": "robot", "content": "x"}]}), "messages.0.role"),
    (json.dumps({**OK, "answer": "a", "regex": "b"}), "answer and regex both given"),
    (json.dumps({**OK, "regex": "(unclosed"}), "does not compile"),
    (json.dumps({**OK, "schema": {"type": "nonsense"}}), "not a valid JSON schema"),
    (json.dumps({**OK, "id": "x" * 65}), "is too long"),
    (json.dumps({**OK, "id": "bad id"}), "ids are 1-64 characters"),
    (json.dumps({**OK, "messages": [{"role": "user", "content": "a\u0000b"}]}), "control characters"),
    (json.dumps({**OK, "expected": "typo"}), "Additional properties"),
    (json.dumps({**OK, "max_tokens": 0}), "max_tokens"),
]


@pytest.mark.parametrize("line,words", CASES)
def test_a_broken_line_is_refused_with_file_and_line(tmp_path, line, words):
    path = _write(tmp_path, json.dumps({"id": "first", "messages": MSG}), line)
    with pytest.raises(VfleetError) as exc:
        load_evalset(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}:2: ") and words in msg, msg
    assert "\n" not in msg


def test_duplicate_ids_empty_and_missing_files(tmp_path):
    line = json.dumps({"id": "same", "messages": MSG})
    with pytest.raises(VfleetError, match=r":2: id 'same' already used on line 1"):
        load_evalset(_write(tmp_path, line, line))
    with pytest.raises(VfleetError, match="no items"):
        load_evalset(_write(tmp_path, ""))
    with pytest.raises(VfleetError, match="no such eval set file"):
        load_evalset(str(tmp_path / "absent.jsonl"))
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(VfleetError, match="UTF-8"):
        load_evalset(str(tmp_path / "bin.jsonl"))
