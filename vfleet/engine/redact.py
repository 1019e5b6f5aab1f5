"""Secrets hidden by value in every text vfleet prints or writes: the one redactor of a run.

Masking by name (inventory.masking) hides `api_key: ...` but not a password inside a URL in
vllm_extra_pins, a token under a name nobody expected (vllm_env: {MY_THING: hf_...}), a
"Bearer ..." in vllm_extra_args, or a secret echoed by an error about a wrong-typed value.
So each run has one Redactor that replaces, in any text, with MASK:

  (a) every value it was told is secret: the inventory's secret variables and secret-named
      keys at any depth, and each secret read from a NAME_file / NAME_env when it is read;
  (b) every string that LOOKS like a secret wherever it sits: URL passwords, Authorization
      credentials and the few token shapes of TOKEN_SHAPES.

The CLI opens `redacting_output()` around each command: stdout, stderr and log records go
through the run's redactor there, so no print anywhere (an error line, a host's output, the
recap) needs to remember it. Files are sinks of their own: the JSON report writer and
`render --dest` pass their text through `current()`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import threading
from typing import Any, Iterator, TextIO

__all__ = ["MASK", "Redactor", "TOKEN_SHAPES", "current", "redacting_output", "RedactingStream"]

MASK = "***"
# Shorter values are not masked by value: masking every "1" or "abc" in the output would hide
# what the operator needs to read. They stay masked by name (inventory.masking).
MIN_SECRET_LEN = 4
# short_value() in varschema cuts a long value and ends it with "..."; a cut secret must be
# caught too, from this many of its first characters on.
_MIN_PREFIX = 8

# Values that look like secrets wherever they appear. Kept small on purpose: each is a prefix
# a vendor documents, so it does not hide hashes, revisions or UUIDs that operators must read
# (a generic "long high-entropy string" rule would mask pip --hash=sha256:..., model
# revisions and commit ids). The same shapes are in gitleaks' rules (config/gitleaks.toml).
TOKEN_SHAPES: tuple[tuple[str, str], ...] = (
    # Hugging Face User Access Tokens start with "hf_" (huggingface.co/docs/hub/security-tokens).
    ("huggingface", r"\bhf_[A-Za-z0-9]{20,}"),
    # OpenAI API keys: "sk-" and "sk-proj-" (platform.openai.com API keys page).
    ("openai", r"\bsk-[A-Za-z0-9_-]{20,}"),
    # GitHub: ghp_ gho_ ghu_ ghs_ ghr_ (github.blog changelog 2021-03-31, "Authentication token
    # format updates"), fine-grained personal access tokens "github_pat_".
    ("github", r"\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{30,}"),
    # GitLab personal access tokens "glpat-" (docs.gitlab.com, "Token prefixes").
    ("gitlab", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    # AWS access key ids: AKIA long-term, ASIA temporary STS keys (AWS IAM "Unique identifiers").
    ("aws", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    # Slack tokens: xoxb- bot, xoxp- user, xoxa-/xoxr-/xoxs- (api.slack.com, "Token types").
    ("slack", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    # JSON Web Tokens: base64url of '{"' is "eyJ" for header and payload (RFC 7519 section 3).
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
)
# The credentials of an Authorization header: RFC 6750 section 2.1 (Bearer b64token), RFC 7617
# (Basic); the scheme is case-insensitive (RFC 9110 section 11.1). A lower-case word after it is
# prose ("basic authentication"), not a credential, and stays.
_AUTH = re.compile(r"(?i)\b(Bearer|Basic)(\s+)([A-Za-z0-9_.~+/=-]{8,})")
_WORD = re.compile(r"[a-z]+")
# userinfo "user:password@" of a URL (RFC 3986 section 3.2.1): the password goes, the user stays;
# also when an echo cut the URL short before the '@' ("https://u:pass...").
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@\"']*):([^\s/@\"']+)(@|\.\.\.|\u2026)")
_ELLIPSIS = re.compile(r"\.\.\.|\u2026")
_SHAPES = re.compile("|".join(f"(?:{rx})" for _, rx in TOKEN_SHAPES))
# A text matches none of the rules above unless it holds one of these: one cheap search first.
_MARKERS = re.compile(r"://|(?i:bearer|basic)|hf_|sk-|gh[pousr]_|github_pat_|glpat-|AKIA|ASIA|xox|eyJ")


class Redactor:
    """The secrets of one run and the rules that find them in text (see the module docstring).

    Thread-safe: the runner's workers print while a secret file may still be read."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()
        self._known: list[str] | None = None

    def add(self, value: Any) -> None:
        """Remember a secret value (strings, numbers, and those inside lists and mappings),
        with the forms an echo would give it: repr()'s and JSON's escapes, whitespace folded."""
        forms = set()
        for leaf in _leaves(value):
            forms.update((leaf, repr(leaf)[1:-1], json.dumps(leaf)[1:-1], " ".join(leaf.split())))
        forms = {f for f in forms if len(f) >= MIN_SECRET_LEN} - self._values
        if forms:
            with self._lock:
                self._values |= forms
                self._known = None

    def text(self, text: str) -> str:
        """`text` with every known and every secret-looking value replaced by MASK. The rules
        run only where a marker of theirs is in the text (one search): most strings, and most
        of a 100,000-host `vfleet inventory`, hold no URL, no credential and no token."""
        if not text:
            return text
        known = self._by_length()
        for value in known:
            if value in text:
                text = text.replace(value, MASK)
        if known:
            text = self._uncut(text)
        if _MARKERS.search(text) is None:
            return text
        if "://" in text:
            text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}{m.group(3)}", text)
        text = _AUTH.sub(
            lambda m: m.group(0) if _WORD.fullmatch(m.group(3)) else f"{m.group(1)}{m.group(2)}{MASK}", text
        )
        return _SHAPES.sub(MASK, text)

    def tree(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string (keys too) passed through text():
        for data that is dumped as JSON, where escapes could hide a secret from text().
        Iterative: how deep a value nests is the inventory's to choose, not the stack's."""
        root: list[Any] = [None]
        todo: list[tuple[Any, Any, Any]] = [(root, 0, value)]
        while todo:
            parent, key, item = todo.pop()
            if isinstance(item, str):
                item = self.text(item)
            elif isinstance(item, dict):
                copy: dict[Any, Any] = {}
                for k, v in item.items():
                    k = self.text(k) if isinstance(k, str) else k
                    copy[k] = None
                    todo.append((copy, k, v))
                item = copy
            elif isinstance(item, (list, tuple)):
                items = list(item)
                todo.extend((items, i, v) for i, v in enumerate(items))
                item = items
            parent[key] = item
        return root[0]

    def _by_length(self) -> list[str]:
        """The known values, longest first: a secret may contain another."""
        known = self._known
        if known is not None:
            return known
        with self._lock:
            if self._known is None:
                self._known = sorted(self._values, key=len, reverse=True)
            return self._known

    def _uncut(self, text: str) -> str:
        """Secrets that an echo cut short and marked with '...' (schema_words.short_value):
        the cut part goes too, from _MIN_PREFIX characters on. '...' is rare in output, so
        only its places are looked at."""
        if "..." not in text and "\u2026" not in text:
            return text
        with self._lock:
            values = [v for v in self._values if len(v) > _MIN_PREFIX]
        out, start = [], 0
        for m in _ELLIPSIS.finditer(text):
            end = m.start()
            cut = max(
                (n for v in values for n in range(len(v) - 1, _MIN_PREFIX - 1, -1) if text.endswith(v[:n], start, end)),
                default=0,
            )
            if cut:
                out += [text[start : end - cut], MASK]
                start = end
        return "".join(out) + text[start:]


def _leaves(value: Any) -> Iterator[str]:
    """The strings a secret value can print as: its strings and numbers, at any depth."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, str):
            yield v
        elif isinstance(v, (int, float)):
            yield str(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set)):
            stack.extend(v)


_current = Redactor()


def current() -> Redactor:
    """The run's redactor: what a sink passes its text through, what a reader of secrets adds to."""
    return _current


class RedactingStream:
    """A text stream that redacts what is written to it, a line at a time (a secret split over
    two write() calls is still whole when its line is redacted). flush() redacts and passes on
    an unfinished line, so a progress bar or a prompt still shows at once."""

    def __init__(self, inner: TextIO, redactor: Redactor):
        self.inner = inner
        self.redactor = redactor
        self._pending = ""
        self._lock = threading.Lock()  # the runner's workers print from their threads

    def write(self, text: str) -> int:
        with self._lock:
            head, sep, self._pending = (self._pending + text).rpartition("\n")
            if sep:
                self.inner.write(self.redactor.text(head + sep))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self.inner.write(self.redactor.text(self._pending))
                self._pending = ""
        self.inner.flush()

    def __getattr__(self, name: str) -> Any:
        # isatty(), fileno(), encoding...: the terminal's own answers (rich asks them). Not
        # rich's "rich_proxied_file", which would let rich write past this stream.
        if name == "rich_proxied_file":
            raise AttributeError(name)
        return getattr(self.inner, name)


@contextlib.contextmanager
def redacting_output() -> Iterator[Redactor]:
    """A fresh redactor for one run, through which stdout, stderr and every log record pass
    until the block ends (then the streams and the log record factory are put back). Inside
    such a block (main() around Program.run) it is the same run: the open one is reused."""
    global _current
    if isinstance(sys.stderr, RedactingStream) and sys.stderr.redactor is _current:
        yield _current
        return
    before = (_current, sys.stdout, sys.stderr, logging.getLogRecordFactory())
    redactor = _current = Redactor()
    sys.stdout = RedactingStream(sys.stdout, redactor)  # type: ignore[assignment]
    sys.stderr = RedactingStream(sys.stderr, redactor)  # type: ignore[assignment]
    make_record = before[3]

    def redacted_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it later, as it would anyway
            message = str(record.msg)
        record.msg, record.args = redactor.text(message), None
        return record

    logging.setLogRecordFactory(redacted_record)
    try:
        yield redactor
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        _current, sys.stdout, sys.stderr = before[0], before[1], before[2]
        logging.setLogRecordFactory(make_record)
