"""Saying so when work takes long: a progress bar on a terminal, log records elsewhere.

Building an index partition embeds every row it lacks; on two cores a conversation of
600 turns takes seconds and a store of 100k rows minutes. That work must never look
like a hang: `Progress` draws a `rich` bar on stderr when stderr is a terminal, and
logs a start and an end line (logger ``memory_lakehouse``, level INFO) otherwise. Short
work (fewer than `MIN_ROWS` rows) shows nothing.
"""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType
from typing import Any

#: Work on fewer rows than this finishes in well under a second: no bar, no log line.
MIN_ROWS = 256

log = logging.getLogger("memory_lakehouse")


class Progress:
    """A context manager counting rows done out of *total*; ``advance(n)`` after each chunk.

    >>> with Progress("embedding", total=10) as p:  # below MIN_ROWS: silent
    ...     p.advance(10)
    >>> p.done
    10
    """

    def __init__(self, what: str, *, total: int, min_rows: int = MIN_ROWS) -> None:
        self.what = what
        self.total = total
        self.done = 0
        self.shown = total >= min_rows
        self._bar: Any = None
        self._task: Any = None
        self._started = 0.0

    def __enter__(self) -> Progress:
        self._started = time.perf_counter()
        if not self.shown:
            return self
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("rows"),
                TimeRemainingColumn(),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.what, total=self.total)
        log.info("%s: %d rows", self.what, self.total)
        return self

    def advance(self, rows: int) -> None:
        self.done += rows
        if self._bar is not None:
            self._bar.update(self._task, advance=rows)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
        if self.shown:
            took = time.perf_counter() - self._started
            log.info(
                "%s: %d of %d rows in %.1f s (%.0f rows/s)%s",
                self.what,
                self.done,
                self.total,
                took,
                self.done / took if took > 0 else 0.0,
                "" if exc is None else " (interrupted)",
            )
