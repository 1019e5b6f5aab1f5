"""The `vfleet` console command: Invoke's Program over the same task namespace as tasks.py,
so `vfleet deploy ...` works from any directory with the tasks and flags of `invoke deploy ...`.

Every command runs inside redacting_output() (vfleet/engine/redact.py): whatever it prints,
an error line, a warning, a host's output, the recap, a traceback of a bug, reaches the
terminal with the run's secrets hidden."""

import os
import re
import sys
import traceback
from typing import Optional

from invoke import Program

from vfleet import __version__
from vfleet.cli import namespace
from vfleet.engine.redact import redacting_output

HELP_FLAGS = ("--help", "-h")
# Invoke's flat list names a collection's default task `bench.bench (bench)`.
_DEFAULT_TASK = re.compile(r"(?P<coll>[\w.-]+)\.[\w-]+ \((?P=coll)\)")


class VfleetProgram(Program):
    """Invoke's Program, but `--list` names each task once: a collection's default task (bench,
    preflight) by the name users type and the docs give, not also as bench.bench. Both
    names still run it, and bench.compare stays bench.compare."""

    def list_flat(self) -> None:
        pairs = self._make_pairs(self.scoped_collection)
        self.display_with_columns(pairs=[(_one_name(name), text) for name, text in pairs])

    def run(self, argv: Optional[list[str]] = None, exit: bool = True) -> None:
        """Invoke's run, with stdout, stderr and log records redacted for its whole length
        (also when a test calls it in-process rather than through main())."""
        with redacting_output():
            super().run(argv, exit)


def _one_name(listed: str) -> str:
    m = _DEFAULT_TASK.fullmatch(listed)
    return m.group("coll") if m else listed


program = VfleetProgram(namespace=namespace, version=__version__, name="vfleet", binary="vfleet")


def help_first(argv: list[str]) -> list[str]:
    """`vfleet drain --help` as `vfleet --help drain`. Why: Invoke fills a task's required
    arguments (run's command, drain's host, bench.compare's a and b) positionally, so a
    `--help` after such a task became its value and the task ran (`drain` with host
    "--help"). Only a bare --help/-h word before any `--` counts, not one inside a quoted value."""
    words = argv[1 : argv.index("--")] if "--" in argv else argv[1:]
    tasks = [w for w in words if namespace.task_names.get(w) is not None or w in namespace.collections]
    if not tasks or not any(w in HELP_FLAGS for w in words):
        return argv
    return [argv[0], "--help", tasks[0]]


def main() -> None:
    with redacting_output():
        try:
            program.run(help_first(sys.argv))
        except BrokenPipeError:
            # `vfleet plan --help | head`: the reader went away; end quietly as Unix tools do
            # (Python's documented recipe; SIGPIPE stays ignored so a dropped SSH socket is an
            # exception, never a silent death).
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)
        except Exception:
            # A bug in vfleet: its traceback is wanted in the bug report, but printed here,
            # through the run's redactor, not by Python after the streams are put back.
            traceback.print_exc()
            sys.exit(1)


if __name__ == "__main__":
    main()
