"""What every stage of loading shares: a value with its source, and the wording of messages.

One place for "file: line N" and "expected X, got Y" keeps every error the same shape,
which is what lets the CLI print them one per line and sort them in file order.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from vfleet.engine.inventory.model import Source
from vfleet.engine.schema_words import value_kind

__all__ = ["Entry", "kind", "line_of", "loc", "in_file_order", "unsafe_name", "MAX_HOST_NAME"]

MAX_HOST_NAME = 253  # the longest DNS name (RFC 1035), so the longest host name or address


class Entry:
    """One variable as written: its value (coerced once validated) and where it came from.

    Entries are shared by every host that inherits them, so a group value is validated once
    however many hosts the group has, and its source text is formatted once.
    """

    __slots__ = ("value", "source", "checked", "_where")

    def __init__(self, value: Any, source: Source):
        self.value, self.source, self.checked, self._where = value, source, False, None

    @property
    def where(self) -> str:
        if self._where is None:
            self._where = str(self.source)
        return self._where


def kind(value: Any) -> str:
    return value_kind(value, none="nothing")


def line_of(mapping: Any, key: Any) -> int | None:
    """Line of a key in a mapping read by the YAML loader (None for other mappings)."""
    return getattr(mapping, "lines", {}).get(key)


def loc(display: str, line: int | None) -> str:
    return f"{display}: line {line}" if line else display


def in_file_order(errors: list[str]) -> list[str]:
    """Errors sorted by file and line, so the operator can walk down the file fixing them."""

    def key(msg: str) -> tuple[str, int]:
        m = re.match(r"^(.*?): line (\d+): ", msg)
        if m:
            return m.group(1), int(m.group(2))
        return (msg.split(": ", 1)[0] if not msg.startswith("--set") else "\uffff"), 0

    return sorted(errors, key=key)


def unsafe_name(text: str) -> str | None:
    """Why a host name or address cannot be used, or None.

    Names and addresses end up in ssh_config files and on ssh/rsync command lines: a
    newline would add an ssh_config directive, a space another argument, a leading '-' an
    option (`-oProxyCommand=...`); host names also become folder names (snapshots, `render
    --dest`), so a '/' or a name of dots would climb out of them.
    """
    if not text:
        return "is empty"
    if len(text) > MAX_HOST_NAME:
        return f"is longer than {MAX_HOST_NAME} characters (DNS names stop at 253)"
    if text.startswith("-"):
        return "starts with '-' (it would read as a command-line option)"
    if "/" in text or text.strip(".") == "":
        return "contains '/' or is only dots (host names become folder names)"
    for ch in text:
        if ch.isspace():
            return "contains whitespace"
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs"):
            return "contains a control character"
    return None
