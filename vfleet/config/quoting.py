"""Quoting of inventory values for the files vfleet renders (Jinja2 filters).

Every inventory value that lands in a systemd unit, an EnvironmentFile, an nginx config or a
shell command goes through one of these. Each either returns text that the target parses
back to exactly the given value, or raises QuotingError (never silently drops characters).

- systemd_quote:     one word of an ExecStart= line (systemd.syntax / systemd.service
                     "Command lines"): specifiers `%` -> `%%`, variable expansion `$` -> `$$`,
                     then double quotes with C-style escapes when the word is not plain.
- systemd_env_quote: the VALUE of a KEY=VALUE line of an EnvironmentFile= (no specifiers,
                     no `$` expansion; shell-like quotes). Single-quoted like shlex, which
                     systemd's env-file parser and a POSIX shell read the same way.
- nginx_quote:       one argument of an nginx directive, double-quoted. `$` is refused
                     (nginx interpolates variables even inside quotes; no escape exists).
- shell_quote:       shlex.quote, refusing NUL.
Newlines and other control characters are refused everywhere: no target takes them safely
inside a one-line value, and an inventory value has no business carrying one. That includes
the C1 controls (U+0080..U+009F: U+0085 is a line break to YAML 1.1 and Python's splitlines,
U+009B a terminal's CSI) and U+2028/U+2029 (line and paragraph separators). So do lone
surrogates (U+D800..U+DFFF, which YAML's "\\uD800" escape yields): no UTF-8 file can hold one,
and writing it would fail half-way, after the files before it were written.

An error names the filter, the character and its position, never the value: a filter cannot
know whether it quotes a secret (an API key, a vllm_env token), and its message reaches the
terminal.
"""

from __future__ import annotations

import re
import shlex

from vfleet.engine.errors import VfleetError

__all__ = [
    "QuotingError",
    "systemd_quote",
    "systemd_env_quote",
    "nginx_quote",
    "promql_quote",
    "shell_quote",
    "env_name",
    "systemd_unit_value",
    "FILTERS",
]


class QuotingError(VfleetError, ValueError):
    """A value no target can take. A VfleetError: one that escapes a renderer (a filter
    called outside a template, e.g. env_name on a vllm_env key) still ends as one `error:`
    line and exit 2, not a traceback. A ValueError, as it always was, for existing callers."""


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SYSTEMD_PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./%$-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NGINX_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+=,\[\]-]+")


def _text(value, what: str) -> str:
    if value is None:
        raise QuotingError(f"{what}: value is None (unset inventory variable?)")
    if isinstance(value, bool):
        # render booleans the way CLIs and env files expect, not Python's True/False
        value = "true" if value else "false"
    s = str(value)
    m = _CONTROL.search(s)
    if m:
        raise QuotingError(
            f"{what}: control character {m.group()!r} at position {m.start()} "
            "(newlines and other control characters are refused; the value is not shown)"
        )
    m = _SURROGATE.search(s)
    if m:
        raise QuotingError(
            f"{what}: lone surrogate {m.group()!r} at position {m.start()} is not "
            "Unicode text (no UTF-8 file can hold it; the value is not shown)"
        )
    return s


def systemd_quote(value) -> str:
    """Quote one word for an ExecStart= (or other command-line) setting of a unit file."""
    s = _text(value, "systemd_quote")
    s = s.replace("%", "%%").replace("$", "$$")
    if s and _SYSTEMD_PLAIN.fullmatch(s):
        # Note: prefixes like "-" or "@" are special only on the executable (first word),
        # and only unquoted; the service renderer requires that word to be absolute.
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_unit_value(value) -> str:
    """A plain (non-command) unit setting value, e.g. User=, Description=: `%` is a
    specifier there too; no quoting syntax exists, so refuse what cannot be expressed."""
    s = _text(value, "systemd_unit_value")
    if s != s.strip():
        raise QuotingError("systemd_unit_value: leading or trailing whitespace (the value is not shown)")
    if s.endswith("\\"):
        raise QuotingError("systemd_unit_value: a trailing backslash would continue the line (the value is not shown)")
    return s.replace("%", "%%")


def systemd_env_quote(value) -> str:
    """Quote a VALUE for a KEY=VALUE line of a systemd EnvironmentFile=."""
    s = _text(value, "systemd_env_quote")
    return shlex.quote(s)


def env_name(name) -> str:
    """Validate an environment variable name (KEY of an env file line)."""
    s = _text(name, "env_name")
    if not _ENV_NAME.fullmatch(s):
        raise QuotingError(f"env_name: {s!r} is not a valid environment variable name")
    return s


def nginx_quote(value) -> str:
    """Quote one argument of an nginx directive."""
    s = _text(value, "nginx_quote")
    if "$" in s:
        raise QuotingError(
            f"nginx_quote: '$' at position {s.index('$')} (nginx would expand it as a variable; the value is not shown)"
        )
    if s and _NGINX_PLAIN.fullmatch(s):
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def promql_quote(value) -> str:
    """A PromQL string literal (a label value in a selector): double-quoted, with backslash and
    double quote escaped (PromQL strings take Go's escapes: https://prometheus.io/docs/prometheus/
    latest/querying/basics/#string-literals); control characters refused, as everywhere."""
    s = _text(value, "promql_quote")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def shell_quote(value) -> str:
    """Quote one word for a POSIX shell (shlex.quote), refusing NUL and newlines."""
    s = _text(value, "shell_quote")
    return shlex.quote(s)


FILTERS = {
    "systemd_quote": systemd_quote,
    "systemd_env_quote": systemd_env_quote,
    "systemd_unit_value": systemd_unit_value,
    "env_name": env_name,
    "nginx_quote": nginx_quote,
    "shell_quote": shell_quote,
}
