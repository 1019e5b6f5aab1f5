"""Per-host progress bars for long steps (weights copies, installs, readiness waits), drawn
by rich. Bars appear only once a step reports progress and only on a terminal; in CI logs and
under pytest nothing is drawn and the recap carries the result."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class HostProgress:
    def __init__(self, console: Console):
        self.console = console
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self.enabled = console.is_terminal

    def _ensure(self) -> Progress:
        if self._progress is None:
            self._progress = Progress(
                TextColumn("[bold]{task.fields[host]}"),
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
        return self._progress

    def update(self, host: str, completed: float, total: float | None = None, description: str | None = None) -> None:
        if not self.enabled:
            return
        with self._lock:
            progress = self._ensure()
            if host not in self._tasks:
                self._tasks[host] = progress.add_task(description or "", total=total, host=host)
            kwargs: dict = {"completed": completed}
            if total is not None:
                kwargs["total"] = total
            if description is not None:
                kwargs["description"] = description
            progress.update(self._tasks[host], **kwargs)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        try:
            yield
        finally:
            with self._lock:
                if self._progress is not None:
                    self._progress.stop()
                self._progress = None
                self._tasks = {}
