"""The `vfleet` console command: Invoke's Program over the same task namespace as tasks.py,
so `vfleet deploy ...` works from any directory with the tasks and flags of `invoke deploy ...`."""
import os
import sys

from invoke import Program

from vfleet import __version__
from vfleet.tasks import namespace

program = Program(namespace=namespace, version=__version__, name="vfleet", binary="vfleet")


def main() -> None:
    try:
        program.run()
    except BrokenPipeError:
        # `vfleet plan --help | head`: the reader went away; end quietly as Unix tools do
        # (Python's documented recipe; SIGPIPE stays ignored so a dropped SSH socket is an
        # exception, never a silent death).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)


if __name__ == "__main__":
    main()
