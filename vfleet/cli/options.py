"""The flags every task shares, as one typed value.

Invoke builds a task's flags from its function's signature, so each task keeps its explicit
parameters (its --help stays what it was); the first thing it does is bundle the common ones
into a TaskOptions, and that one object travels down to loading the inventory, opening the
Play and writing the report, instead of ten arguments passed along at every call."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from vfleet.engine.errors import VfleetError

__all__ = ["TaskOptions"]


def _seconds(flag: str, value: Any) -> float | None:
    """A timeout flag as seconds (Invoke hands over a flag without a default as text)."""
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise VfleetError(f"--{flag.replace('_', '-')}: {value!r} is not a number of seconds") from None


@dataclass(frozen=True)
class TaskOptions:
    """The common flags of a task (vfleet/cli/common.py COMMON_HELP); a task that lacks one
    gets its default, as the Play used to."""

    inventory: str | None = None
    limit: str | None = None
    set_: tuple[str, ...] = ()
    forks: int = 10
    report: str | None = None
    check: bool = False
    diff: bool = False
    no_host_key_checking: bool = False
    connect_timeout: float | None = None
    command_timeout: float | None = None
    verbose: bool = False

    @classmethod
    def of(cls, flags: Mapping[str, Any]) -> "TaskOptions":
        """The common flags among a task's parameters: call it with `locals()` at the top of
        the task, before it binds a name of its own (flags are picked by name; the task's
        other flags and its imports are left out)."""
        given = {f.name: flags[f.name] for f in dataclasses.fields(cls) if f.name in flags}
        given["set_"] = tuple(given.get("set_") or ())
        given["forks"] = int(given.get("forks", 10))
        for flag in ("connect_timeout", "command_timeout"):
            given[flag] = _seconds(flag, given.get(flag))
        return cls(**given)
