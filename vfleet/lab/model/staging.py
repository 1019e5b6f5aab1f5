"""Write a model folder beside its destination, and put it in place only once it is complete.

Why: the lab serves and copies these folders by name; a build or copy that is killed or fails
halfway must leave the old folder (or none), never a half-written one under the real name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from vfleet.lab.system import swap_into_place


@contextlib.contextmanager
def staged_folder(dest: Path) -> Iterator[Path]:
    """A fresh empty folder beside `dest` to write into: swapped into place as `dest` when the
    block ends normally, removed (and `dest` untouched) when it raises."""
    dest = Path(dest)
    tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        swap_into_place(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
