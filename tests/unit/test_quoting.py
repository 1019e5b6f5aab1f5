"""Quoting filters: hostile values either round-trip exactly or are refused."""

import os
import shlex
import shutil
import subprocess

import pytest

from vfleet.config.quoting import (
    QuotingError,
    env_name,
    nginx_quote,
    promql_quote,
    shell_quote,
    systemd_env_quote,
    systemd_quote,
    systemd_unit_value,
)

HOSTILE = [
    "plain",
    "with space",
    'double"quote',
    "single'quote",
    "both ' and \"",
    "dollar $HOME and ${HOME}",
    "$$",
    "percent %n %i %%",
    "back\\slash\\",
    "semi;colon ; rm -rf /",
    "braces {}",
    "hash # not a comment",
    "back`tick`",
    "glob * ? [a]",
    "-leading-dash",
    "@at",
    "  leading and trailing  ",
    "",
    "ünïcödé ✓",
]
CONTROL = ["new\nline", "carriage\rreturn", "tab\there", "nul\x00byte", "del\x7f"]


# --- a reference reader of what systemd does with one ExecStart word (the subset of
# systemd.syntax the filter emits: bare words, "..." with \\ and \" escapes); specifiers
# (%%) are resolved on the whole line before word splitting, $$ per word at exec time.
def systemd_read_words(line: str) -> list[str]:
    line = line.replace("%%", "\x00PCT\x00")
    assert "%" not in line, f"unescaped specifier in {line!r}"
    words, i, n = [], 0, len(line)
    while i < n:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            break
        w = []
        if line[i] == '"':
            i += 1
            while line[i] != '"':
                if line[i] == "\\":
                    i += 1
                    assert line[i] in '\\"', f"unexpected escape in {line!r}"
                w.append(line[i])
                i += 1
            i += 1
            assert i >= n or line[i] in " \t", "quote must end the word"
        else:
            while i < n and line[i] not in " \t":
                assert line[i] not in "\"'\\", f"special char in bare word {line!r}"
                w.append(line[i])
                i += 1
        word = "".join(w).replace("\x00PCT\x00", "%")
        # $$ -> $ ; a lone $ would start a variable reference
        out, j = [], 0
        while j < len(word):
            if word[j] == "$":
                assert word[j + 1 : j + 2] == "$", f"unescaped $ in {word!r}"
                out.append("$")
                j += 2
            else:
                out.append(word[j])
                j += 1
        words.append("".join(out))
    return words


# --- a port of systemd's parse_env_file_internal() value states (src/basic/env-file.c)
def systemd_read_env_value(text: str) -> str:
    SHELL_NEED_ESCAPE = '"\\`$'
    state, value = "PRE_VALUE", []
    for c in text:
        if state == "PRE_VALUE":
            if c == "'":
                state = "SQ"
            elif c == '"':
                state = "DQ"
            elif c == "\\":
                state = "VALUE_ESCAPE"
            elif c not in " \t":
                state = "VALUE"
                value.append(c)
        elif state == "VALUE":
            if c == "\\":
                state = "VALUE_ESCAPE"
            else:
                value.append(c)
        elif state == "VALUE_ESCAPE":
            state = "VALUE"
            value.append(c)
        elif state == "SQ":
            if c == "'":
                state = "PRE_VALUE"
            else:
                value.append(c)
        elif state == "DQ":
            if c == '"':
                state = "PRE_VALUE"
            elif c == "\\":
                state = "DQ_ESCAPE"
            else:
                value.append(c)
        elif state == "DQ_ESCAPE":
            state = "DQ"
            value.extend(c if c in SHELL_NEED_ESCAPE else "\\" + c)
    out = "".join(value)
    if state == "VALUE":  # trailing whitespace of an unquoted value is chomped
        out = out.rstrip(" \t")
    return out


@pytest.mark.parametrize("value", HOSTILE)
def test_systemd_quote_round_trips(value):
    q = systemd_quote(value)
    assert "\n" not in q
    assert systemd_read_words(f"/bin/true {q} end") == ["/bin/true", value, "end"]


def test_systemd_quote_escapes_specifiers_and_variables():
    assert systemd_quote("50%") == "50%%"
    assert systemd_quote("$HOME") == "$$HOME"
    assert systemd_quote("a b") == '"a b"'
    assert systemd_quote('x"y') == '"x\\"y"'
    assert systemd_quote(";") == '";"'  # a bare ; would split commands
    assert systemd_quote(8000) == "8000"
    assert systemd_quote(True) == "true"


@pytest.mark.parametrize("value", CONTROL)
@pytest.mark.parametrize(
    "f", [systemd_quote, systemd_env_quote, nginx_quote, shell_quote, systemd_unit_value, promql_quote]
)
def test_control_characters_are_refused(f, value):
    with pytest.raises(QuotingError):
        f(value)


def test_none_is_refused():
    for f in (systemd_quote, systemd_env_quote, nginx_quote, shell_quote):
        with pytest.raises(QuotingError, match="None"):
            f(None)


@pytest.mark.parametrize("value", HOSTILE)
def test_systemd_env_quote_round_trips_in_systemd_parser(value):
    assert systemd_read_env_value(systemd_env_quote(value)) == value


@pytest.mark.skipif(not shutil.which("sh"), reason="needs sh")
def test_env_file_is_read_back_by_a_real_shell(tmp_path):
    values = {f"V{i}": v for i, v in enumerate(HOSTILE)}
    f = tmp_path / "env"
    f.write_text("".join(f"{k}={systemd_env_quote(v)}\n" for k, v in values.items()))
    script = f"set -a; . {shlex.quote(str(f))}; " + "; ".join(f"printf '%s\\0' \"${k}\"" for k in values)
    out = subprocess.run(
        ["sh", "-c", script], capture_output=True, env={"PATH": os.defpath}, check=True
    ).stdout.decode()
    assert out.split("\0")[:-1] == list(values.values())


def test_env_name():
    assert env_name("NCCL_P2P_DISABLE") == "NCCL_P2P_DISABLE"
    for bad in ["1ABC", "A-B", "A B", "A=B", "", "A;B"]:
        with pytest.raises(QuotingError):
            env_name(bad)


def test_systemd_unit_value():
    assert systemd_unit_value("tiny 100%") == "tiny 100%%"
    for bad in [" lead", "trail ", "end\\"]:
        with pytest.raises(QuotingError):
            systemd_unit_value(bad)


def test_nginx_quote():
    assert nginx_quote("10.0.0.1:8000") == "10.0.0.1:8000"
    assert nginx_quote("a;b") == '"a;b"'
    assert nginx_quote("a b{}#") == '"a b{}#"'
    assert nginx_quote('q"\\') == '"q\\"\\\\"'
    assert nginx_quote("") == '""'
    with pytest.raises(QuotingError, match=r"\$"):
        nginx_quote("$host")


@pytest.mark.skipif(not shutil.which("nginx"), reason="needs nginx")
@pytest.mark.parametrize("value", [v for v in HOSTILE if "$" not in v and v])
def test_nginx_quote_parses_as_one_argument_in_real_nginx(tmp_path, value):
    # one argument: `return 200 <arg>;` takes exactly two arguments, so nginx -t fails if
    # the quoted value split into more words or ended the directive early
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"pid {tmp_path}/pid; error_log {tmp_path}/err.log; events {{}}\n"
        f"http {{ access_log off; client_body_temp_path {tmp_path}/b; "
        f"proxy_temp_path {tmp_path}/p; fastcgi_temp_path {tmp_path}/f; "
        f"uwsgi_temp_path {tmp_path}/u; scgi_temp_path {tmp_path}/s;\n"
        f"server {{ listen 127.0.0.1:1; location / {{ return 200 {nginx_quote(value)}; }} }} }}\n"
    )
    r = subprocess.run(["nginx", "-t", "-p", str(tmp_path), "-c", str(conf)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("value", HOSTILE)
def test_shell_quote_round_trips(value):
    assert shlex.split(shell_quote(value)) == [value]
    out = subprocess.run(
        ["sh", "-c", f"printf '%s' {shell_quote(value)}"], capture_output=True, check=True
    ).stdout.decode()
    assert out == value


@pytest.mark.skipif(not shutil.which("nginx"), reason="needs nginx")
def test_nginx_quote_round_trips_through_a_real_nginx(tmp_path):
    """Serve every hostile value with `return 200 <quoted>` on loopback, read it back."""
    import socket
    import time
    import urllib.request

    values = [v for v in HOSTILE if "$" not in v]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    locs = "".join(
        f"location = /v{i} {{ default_type text/plain; return 200 {nginx_quote(v)}; }}\n" for i, v in enumerate(values)
    )
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"daemon off; pid {tmp_path}/pid; error_log {tmp_path}/err.log; events {{}}\n"
        f"http {{ access_log off; client_body_temp_path {tmp_path}/b; "
        f"proxy_temp_path {tmp_path}/p; fastcgi_temp_path {tmp_path}/f; "
        f"uwsgi_temp_path {tmp_path}/u; scgi_temp_path {tmp_path}/s;\n"
        f"server {{ listen 127.0.0.1:{port}; {locs} }} }}\n"
    )
    proc = subprocess.Popen(["nginx", "-p", str(tmp_path), "-c", str(conf)], stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v0", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        for i, v in enumerate(values):
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/v{i}", timeout=5).read()
            assert body.decode() == v
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_promql_quote():
    """A label value as a PromQL string literal; promtool parsing it is in
    test_monitor_verdict_rules.py (a host named with a quote and a backslash)."""
    assert promql_quote("lab1") == '"lab1"'
    assert promql_quote('we"ird\\host') == '"we\\"ird\\\\host"'
