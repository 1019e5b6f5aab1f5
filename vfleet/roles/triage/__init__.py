"""Triage of a vLLM host that failed to start or died: its journal or vLLM's log, classified
into the field reports' classes, each with its fixed next step (docs/triage.md).

classes.py holds the classes and their next steps, signals.py the patterns that find them,
memory.py what the out-of-memory lines say (which phase, which numbers), starts.py where the
last start begins, classify.py the rule that picks one class, logfile.py the bounded reading
of a saved log, host.py the one round trip that reads a host's unit state and journal."""
