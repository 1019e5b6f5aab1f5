"""The redactor on its own (vfleet/engine/redact.py): known values in the forms an echo gives
them, secret shapes wherever they sit, what must stay visible, and the streams and log
records of a run. The CLI's sinks: test_redact_sinks.py."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from vfleet.config.variables import SCHEMA
from vfleet.engine import redact
from vfleet.engine.inventory.masking import masked_vars, remember_secrets
from vfleet.engine.redact import MASK, RedactingStream, Redactor, redacting_output
from vfleet.engine.schema_words import short_value

HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
SHAPED = [
    HF,
    "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0kLmN",
    "ghp_" + "A" * 36,
    "gho_" + "b1" * 18,
    "github_pat_" + "11ABCDEFG0" * 4,
    "glpat-" + "xY1_zW2-vU3tS4rQ5pO6",
    "AKIA" + "IOSFODNN7EXAMPLE",
    "ASIA" + "Z9Y8X7W6V5U4T3S2",
    "xoxb-" + "1234567890-abcdefABCDEF",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


@pytest.mark.parametrize("token", SHAPED, ids=lambda t: t[:6])
def test_token_shapes_are_masked_wherever_they_sit(token: str) -> None:
    r = Redactor()
    for text in (token, f"MY_THING={token}", f"got '{token}'", f'{{"x": "{token}"}}', f"a {token}, b"):
        out = r.text(text)
        assert token not in out and MASK in out, out


@pytest.mark.parametrize(
    "text, secret",
    [
        ("git+https://x:TOPSECRETpw@github.com/org/repo.git", "TOPSECRETpw"),
        ("--index-url https://__token__:pypi-AgEIcHlwaS5vcmc@pypi.example/simple", "pypi-AgEIcHlwaS5vcmc"),
        ("https://user:p%40ss:word@host:8443/wheels", "p%40ss:word"),
        ("got 'https://u:truncatedpasswor...", "truncatedpasswor"),
        ("Authorization: Bearer abc.DEF-123_456", "abc.DEF-123_456"),
        ("--header=authorization: bearer Zm9vOmJhcg==", "Zm9vOmJhcg=="),
        ("Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ],
)
def test_url_passwords_and_authorization_credentials(text: str, secret: str) -> None:
    assert secret not in Redactor().text(text)


def test_url_user_and_host_stay_visible() -> None:
    assert Redactor().text("https://alice:pw12345@host.example:8443/x") == "https://alice:***@host.example:8443/x"


@pytest.mark.parametrize(
    "text",
    [
        "https://host.example:8443/v1/models",
        "vllm==0.10.1 --hash=sha256:" + "0123456789abcdef" * 4,
        "model_revision 5fd2b01c7f1a0b9e8d7c6b5a4f3e2d1c0b9a8f7e",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "basic authentication failed; a bearer credentials check",
        "max_num_batched_tokens 8192, hf_token: ***, sk-short",
        "task-key skip-the-line",
    ],
)
def test_ordinary_output_stays_as_it_is(text: str) -> None:
    assert Redactor().text(text) == text


def test_known_values_in_every_form_an_echo_gives_them() -> None:
    r = Redactor()
    secret = "pa'ss\\wörd-Zq7"
    r.add(secret)
    for text in (secret, repr(secret), json.dumps(secret), json.dumps([secret], ensure_ascii=False)):
        assert "Zq7" not in r.text(text), text


def test_known_values_inside_lists_mappings_and_numbers() -> None:
    r = Redactor()
    r.add(["list-secret-1", {"k": "map-secret-2"}, 987654321, True, None])
    out = r.text("list-secret-1 map-secret-2 987654321 True None")
    assert out == f"{MASK} {MASK} {MASK} True None"


def test_a_cut_echo_of_a_known_value_is_caught() -> None:
    r = Redactor()
    secret = "zz-" + "q" * 80
    r.add(secret)
    echo = f"vars.api_key: expected a string, got [{short_value(secret)}]"
    assert secret[:20] not in r.text(echo), r.text(echo)


def test_short_values_are_not_masked_by_value() -> None:
    r = Redactor()
    r.add("abc")
    assert r.text("abc abcd") == "abc abcd"


def test_the_longest_secret_wins() -> None:
    r = Redactor()
    r.add("secret-one")
    r.add("secret-one-and-more")
    assert r.text("x secret-one-and-more y") == f"x {MASK} y"


def test_tree_masks_keys_and_values_at_any_depth() -> None:
    r = Redactor()
    r.add("valuesecret")
    data = {"a": [{"b": f"Bearer {HF}"}], "valuesecret": ("x", "valuesecret"), 3: 4}
    assert r.tree(data) == {"a": [{"b": f"Bearer {MASK}"}], MASK: ["x", MASK], 3: 4}


def test_remember_secrets_follows_the_masking_rule() -> None:
    r = Redactor()
    hosts = [
        {
            "api_key": ["wrong-typed-key"],
            "vllm_env": {"OPENAI_API_KEY": "env-secret-1", "PLAIN": "plain-value"},
            "openai_api_key": "top-secret-2",
            "api_key_file": "/etc/key-path",
            "weights_peer_ssh_key": "/keys/peer",
        }
    ]
    remember_secrets(hosts, schema=SCHEMA, redactor=r)
    out = r.text("wrong-typed-key env-secret-1 top-secret-2 plain-value /etc/key-path /keys/peer")
    assert out == f"{MASK} {MASK} {MASK} plain-value /etc/key-path /keys/peer"


def test_masked_vars_hides_by_name_and_by_value() -> None:
    shown = masked_vars(
        {
            "vllm_extra_pins": ["git+https://x:PINSECRET1@github.com/o/r.git"],
            "vllm_env": {"MY_THING": HF, "HF_TOKEN": "named-secret"},
        },
        schema=SCHEMA,
    )
    text = json.dumps(shown)
    assert "PINSECRET1" not in text and HF not in text and "named-secret" not in text
    assert "github.com/o/r.git" in text and "MY_THING" in text


def test_stream_redacts_a_secret_split_over_writes_and_flushes_partial_lines() -> None:
    r = Redactor()
    r.add("split-secret-9")
    inner = io.StringIO()
    s = RedactingStream(inner, r)
    s.write("a split-se")
    s.write("cret-9 b\nnext ")
    assert inner.getvalue() == f"a {MASK} b\n"
    s.flush()
    assert inner.getvalue() == f"a {MASK} b\nnext "


def test_redacting_output_covers_stdout_stderr_and_log_records(capsys, caplog) -> None:
    before = redact.current()
    with redacting_output() as r:
        assert redact.current() is r
        r.add("run-secret-42")
        print("out run-secret-42")
        print(f"err {HF}", file=sys.stderr)
        with caplog.at_level(logging.WARNING):
            logging.getLogger("paramiko.transport").warning("auth with %s failed", "run-secret-42")
        with redacting_output() as inner:  # main() around Program.run: the same run
            assert inner is r
    assert redact.current() is before
    out = capsys.readouterr()
    assert out.out == f"out {MASK}\n" and out.err == f"err {MASK}\n"
    assert "run-secret-42" not in caplog.text and f"auth with {MASK} failed" in caplog.text
    assert logging.getLogRecordFactory() is logging.LogRecord
