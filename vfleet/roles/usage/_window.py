"""The time window of `vfleet usage`: --since as a duration back from --until (10m, 2h, 1d) or an
ISO 8601 time, --until as an ISO time (default now). A time without an offset is UTC, the
offset the gateways' logs are written in by default (nginx's $time_iso8601 is the host's)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from vfleet.engine.errors import VfleetError

__all__ = ["DEFAULT_SINCE", "Window", "window"]

DEFAULT_SINCE = "1h"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^([1-9][0-9]{0,5})([smhd])$")


@dataclass(frozen=True)
class Window:
    """[since, until] in epoch seconds, with their ISO forms for the report."""

    since: float
    until: float

    @staticmethod
    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")

    def to_dict(self) -> dict[str, str]:
        return {"since": self.iso(self.since), "until": self.iso(self.until)}


def _iso(flag: str, text: str) -> float:
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise VfleetError(
            f"--{flag}: {text!r} is neither a duration (10m, 2h, 1d) nor an ISO time (2026-12-02T20:00:00+00:00)"
        ) from None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def window(since: str | None, until: str | None, now: float) -> Window:
    """The window the flags name; one-line VfleetError on a value that is neither form, or
    a window that ends before it begins."""
    end = now if until in (None, "") else _iso("until", str(until))
    text = str(since or DEFAULT_SINCE).strip()
    m = _DURATION.match(text)
    start = end - int(m.group(1)) * _UNITS[m.group(2)] if m else _iso("since", text)
    if start >= end:
        raise VfleetError(f"--since {text} is not before --until {Window.iso(end)}: the window is empty")
    return Window(start, end)
