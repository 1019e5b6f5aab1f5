"""Triage of a vLLM host that failed to start or died: its journal or vLLM's log, classified
into the field reports' classes, each with its fixed next step (docs/triage.md).

_classes.py holds the classes and their next steps, _signals.py the patterns that find them,
_memory.py what the out-of-memory lines say (which phase, which numbers), _starts.py where the
last start begins, _classify.py the rule that picks one class, _logfile.py the bounded reading
of a saved log, _host.py the one round trip that reads a host's unit state and journal."""

from __future__ import annotations

from ._classify import Verdict, classify_lines, printable
from ._host import failure_journal, triage_host
from ._logfile import read_log

__all__ = ["classify_lines", "failure_journal", "printable", "read_log", "triage_host", "Verdict"]
