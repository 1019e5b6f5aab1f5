"""Property-based: every quoting filter (vfleet/config/quoting.py), on any text, either returns
what its target reads back as exactly that text, or refuses with a QuotingError that is a
VfleetError (one `error:` line, never a traceback) and does not contain the value (a filter
cannot know whether it quotes a secret)."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings, strategies as st

from tests.unit.property_support import ATOMS
from tests.unit.test_quoting import systemd_read_env_value, systemd_read_words
from vfleet.config.quoting import (
    QuotingError,
    env_name,
    nginx_quote,
    shell_quote,
    systemd_env_quote,
    systemd_quote,
    systemd_unit_value,
)
from vfleet.engine.errors import VfleetError

# any code point (surrogates included), and the characters the targets read specially, glued
TEXT = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=()), max_size=16),
    st.lists(st.sampled_from(ATOMS), max_size=5).map("".join),
)
MARK = "Zq7VALUE"
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None)


def _refused_cleanly(exc: QuotingError, value: str) -> None:
    assert isinstance(exc, VfleetError) and "\n" not in str(exc)
    assert MARK not in str(exc), str(exc)


def _round_trip(quote, read, text: str) -> None:
    value = MARK + text
    try:
        quoted = quote(value)
    except QuotingError as exc:
        _refused_cleanly(exc, value)
        return
    assert "\n" not in quoted and "\r" not in quoted
    quoted.encode("utf-8")  # a file can hold it
    assert read(quoted) == value


@SETTINGS
@given(TEXT)
def test_systemd_quote(text):
    _round_trip(systemd_quote, lambda q: systemd_read_words(f"/bin/true {q}")[1], text)


@SETTINGS
@given(TEXT)
def test_systemd_env_quote(text):
    _round_trip(systemd_env_quote, systemd_read_env_value, text)


@SETTINGS
@given(TEXT)
def test_shell_quote(text):
    _round_trip(shell_quote, lambda q: shlex.split(q) and shlex.split(q)[0], text)


@SETTINGS
@given(TEXT)
def test_nginx_quote(text):
    def read(q: str) -> str:  # nginx's "..." argument: \" and \\ escapes; a bare word as is
        if not q.startswith('"'):
            assert not set(q) & set(" \t;{}\"'\\#$"), q
            return q
        assert q.endswith('"') and len(q) >= 2
        out, i, body = [], 0, q[1:-1]
        while i < len(body):
            if body[i] == "\\":
                i += 1
            else:
                assert body[i] != '"', q
            out.append(body[i])
            i += 1
        return "".join(out)

    _round_trip(nginx_quote, read, text)


@SETTINGS
@given(TEXT)
def test_systemd_unit_value_and_env_name(text):
    for quote in (systemd_unit_value, env_name):
        try:
            out = quote(MARK + text)
        except QuotingError as exc:
            if quote is systemd_unit_value:
                _refused_cleanly(exc, MARK + text)
            continue
        out.encode("utf-8")
        assert "\n" not in out and (quote is env_name or out.replace("%%", "%") == MARK + text)


@pytest.mark.parametrize("value", [None, "a\nb", "\ud800", "\x85", "a\u2028b"])
def test_refusals_are_one_line_vfleet_errors(value):
    with pytest.raises(VfleetError):
        systemd_env_quote(value)
