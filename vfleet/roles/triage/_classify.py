"""One class for a log: the rule, and what it returns.

The rule (docs/triage.md): only the last start in the lines is classified, or the one before
it when the last holds no known signal yet (_starts.py). Within a start, a log often holds
several signals, because one failure sets off others (a worker that ran out of memory leaves
the other ranks waiting in NCCL; an engine that died is followed by "Engine core
initialization failed"). The FIRST fatal signal in the
order of the lines decides; later ones are taken as its consequences. Only when no fatal
signal is found does a hang signal decide (workers that wait for each other). With neither,
the class is "unknown" and the last error-looking lines are shown, so nothing is guessed.

Lines are cut to signals.MAX_LINE_CHARS before matching (and to SHOW_CHARS when shown). The
text comes from the host or a file, so it is untrusted: what is shown has its non-printable
characters (ANSI/OSC escape sequences, control characters) escaped, so a log cannot drive the
operator's terminal."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Sequence

from ._classes import TriageClass, by_id
from ._memory import numbers, oom_phase
from ._scan import LowerText
from ._signals import ERROR_LIKE, FATAL, HANG, MAX_LINE_CHARS, NCCL_CONTEXT, OOM, Signal, first_hit
from ._starts import last_starts

__all__ = ["Line", "Verdict", "classify_lines", "printable", "SHOW_CHARS"]

SHOW_CHARS = 400
MAX_CONTEXT_LINES = 4
UNKNOWN_LINES = 5


def printable(text: str) -> str:
    """`text` with each non-printable character written as its escape (ESC as \\x1b), tabs as spaces."""
    text = text.replace("\t", " ")
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass(frozen=True)
class Line:
    """A line of the log as read: its number (1 = the first line of the file) and its text."""

    number: int
    text: str

    def shown(self) -> str:
        t = printable(self.text.rstrip())
        return t if len(t) <= SHOW_CHARS else t[: SHOW_CHARS - 3] + "..."


@dataclass(frozen=True)
class Verdict:
    """The class, the lines that decided it (first the deciding signal, then what told the
    phase or gave context), the numbers those lines name, and where (the phase of an OOM)."""

    cls: TriageClass
    lines: tuple[Line, ...]
    numbers: dict[str, str] = field(default_factory=dict)
    where: str = ""
    note: str = ""

    def numbers_text(self) -> str:
        return "; ".join(f"{k} {v}" for k, v in self.numbers.items())

    def one_line(self) -> str:
        """The class and its short next step, for a failure message that is one line (the
        numbers and lines are in the report's data)."""
        return f"{self.cls.title}: {self.cls.hint}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.cls.id,
            "title": self.cls.title,
            "where": self.where,
            "numbers": self.numbers,
            "lines": [{"line": ln.number, "text": ln.shown()} for ln in self.lines],
            "next_step": self.cls.next_step,
            "note": self.note,
        }


def _needles(signals: tuple[Signal, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for s in signals for n in s.needles))


def _first_signal(text: LowerText, lines: Sequence[str], signals: tuple[Signal, ...]) -> tuple[str, int] | None:
    """(class id, index) of the first line holding one of `signals`."""
    for i in text.lines_with(_needles(signals)):
        hit = first_hit(lines[i], signals)
        if hit is not None:
            return hit.class_id, i
    return None


def _nccl_context(text: LowerText, lines: Sequence[str], skip: set[int]) -> list[int]:
    hits = (
        i
        for i in text.lines_with(NCCL_CONTEXT.needles)
        if i not in skip and NCCL_CONTEXT.search(lines[i], lines[i].lower())
    )
    return [i for _, i in zip(range(MAX_CONTEXT_LINES), hits)]


def _unknown(text: LowerText, lines: Sequence[str], first: int, note: str) -> Verdict:
    """The last error-looking lines (else the last lines)."""
    candidates = list(text.lines_with(ERROR_LIKE.needles))
    last = (i for i in reversed(candidates) if ERROR_LIKE.search(lines[i], lines[i].lower()))
    picked = list(islice(last, UNKNOWN_LINES))[::-1]
    if not picked:
        picked = [i for i in range(max(0, len(lines) - UNKNOWN_LINES), len(lines)) if lines[i].strip()]
    return Verdict(by_id("unknown"), tuple(Line(first + i, lines[i]) for i in picked), note=note)


def classify_lines(raw: Sequence[str], *, first_line: int = 1, note: str = "") -> Verdict:
    """The verdict for the last start in these lines, or for the start before it when the last
    holds no known signal (`first_line`: the number of raw[0] in its file)."""
    spans = last_starts(raw)
    if len(spans) < 2:
        return _classify_start(raw, first_line, note)
    (last, end), (before, _) = spans
    said = f"the last start, from line {first_line + last}"
    verdict = _classify_start(raw[last:end], first_line + last, "; ".join(filter(None, [note, said])))
    if verdict.cls.id != "unknown":
        return verdict
    said = f"the start before the last (from line {first_line + before}): the last one shows no known signal"
    earlier = _classify_start(raw[before:last], first_line + before, "; ".join(filter(None, [note, said])))
    return verdict if earlier.cls.id == "unknown" else earlier


def _classify_start(raw: Sequence[str], first_line: int, note: str) -> Verdict:
    """The verdict for the lines of one start."""
    lines = [line[:MAX_LINE_CHARS] for line in raw]
    text = LowerText(lines)
    found = _first_signal(text, lines, FATAL) or _first_signal(text, lines, HANG)
    if found is None:
        return _unknown(
            text, lines, first_line, note or ("the log is empty" if not any(s.strip() for s in lines) else "")
        )
    class_id, at = found
    deciding, where = [at], ""
    if class_id == OOM:
        class_id, phase_lines, where = oom_phase(lines, at)
        deciding += [i for i in phase_lines if i != at]
    if class_id == "nccl":
        deciding += _nccl_context(text, lines, set(deciding))
    shown = [lines[i] for i in deciding]
    return Verdict(
        by_id(class_id), tuple(Line(first_line + i, lines[i]) for i in deciding), numbers(shown), where, note
    )
