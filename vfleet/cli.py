"""The `vfleet` console command: Invoke's Program over the same task namespace as tasks.py,
so `vfleet deploy ...` works from any directory with the tasks and flags of `invoke deploy ...`."""
from invoke import Program

from vfleet import __version__
from vfleet.tasks import namespace

program = Program(namespace=namespace, version=__version__, name="vfleet", binary="vfleet")


def main() -> None:
    program.run()


if __name__ == "__main__":
    main()
