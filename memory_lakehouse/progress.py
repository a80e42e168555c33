"""Saying so when work takes long: a progress bar on a terminal, log records elsewhere.

Building an index partition embeds every row it lacks; on two cores a conversation of
600 turns takes seconds and a store of 100k rows minutes. That work must never look
like a hang. This module is the one place that decides how long work shows itself:

- a `Progress` whose work is below its threshold (``min_items``) shows nothing;
- otherwise, when bars are on (`Progress.settings`; ``memlake --quiet`` turns them off)
  and stderr is a terminal, a `rich` bar is drawn on stderr (never stdout), and erased
  when the work is done;
- otherwise it logs (logger ``memory_lakehouse``, level INFO) a start line, each phase,
  and an end line with the time taken. When a bar is drawn these records go out at DEBUG.

Progress objects nest and may run in several threads at once (a load that writes, a
background index build): they share one live display, one line each.

``MEMLAKE_PROGRESS_MIN`` (an integer) overrides every threshold, e.g. ``1`` to see every
bar while trying something small.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

#: Work on fewer rows than this finishes in well under a second: no bar, no log line.
MIN_ROWS = 256
#: The environment variable that overrides every threshold (`Progress.settings`, ``min_items``).
ENV_MIN = "MEMLAKE_PROGRESS_MIN"

log = logging.getLogger("memory_lakehouse")


def _env_min() -> int | None:
    raw = os.environ.get(ENV_MIN, "").strip()
    try:
        return max(0, int(raw)) if raw else None
    except ValueError:
        log.warning("%s=%r is not an integer: ignored", ENV_MIN, raw)
        return None


class _Settings:
    """What the process chose: bars on or off, and a threshold overriding each caller's own."""

    def __init__(self) -> None:
        self.bars = True
        self.min_items: int | None = _env_min()


_settings = _Settings()
_lock = threading.RLock()
_display: Any = None  # the live rich display every drawn Progress adds its line to
_drawing = 0  # how many Progress objects have a line in it


def configure(*, bars: bool | None = None, min_items: int | None = None) -> None:
    """Set the process's choice for good (a spawned worker's); `Progress.settings` within a block."""
    if bars is not None:
        _settings.bars = bars
    if min_items is not None:
        _settings.min_items = min_items


def _bars_allowed() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)  # stderr may be None (pythonw) or a bare stream
    return _settings.bars and callable(isatty) and bool(isatty())


def _open_line(description: str, total: int | None, unit: str) -> tuple[Any, Any]:
    """A line in the shared display (started by the first caller); returns (display, task)."""
    global _display, _drawing
    with _lock:
        if _display is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Display

            _display = Display(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
                redirect_stdout=False,  # stdout is the command's output: never routed through the bar
            )
            _display.start()
        _drawing += 1
        return _display, _display.add_task(description, total=total, unit=unit)


def _close_line(display: Any, task: Any) -> None:
    global _display, _drawing
    with _lock:
        display.remove_task(task)
        _drawing -= 1
        if _drawing == 0 and _display is not None:
            _display.stop()
            _display = None


class Progress:
    """A context manager counting items done out of *total*; ``advance(n)`` after each chunk.

    *unit* names the items (``"rows"``, ``"records"``, ``"steps"``). Whether the work is
    worth showing is judged on *size* (default: *total*) against *min_items*, unless the
    process set a threshold of its own (`settings`, ``MEMLAKE_PROGRESS_MIN``).
    *enabled* ``False`` keeps it silent; ``True`` shows it whatever its size. ``phase(text)``
    names the step under way (a bar's label; a log line when no bar is drawn).

    >>> with Progress("embedding", total=10) as p:  # below MIN_ROWS: silent
    ...     p.advance(10)
    >>> p.done, p.shown
    (10, False)
    """

    def __init__(
        self,
        what: str,
        *,
        total: int,
        unit: str = "rows",
        size: int | None = None,
        min_items: int = MIN_ROWS,
        enabled: bool | None = None,
    ) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.done = 0
        threshold = _settings.min_items if _settings.min_items is not None else min_items
        amount = total if size is None else size
        self.shown = enabled is not False and (enabled is True or amount >= threshold)
        self._display: Any = None
        self._task: Any = None
        self._started = 0.0
        self._phase = ""

    @property
    def drawn(self) -> bool:
        """Whether a bar is on screen (else the work, if shown, goes to the log)."""
        return self._display is not None

    @staticmethod
    @contextmanager
    def settings(*, bars: bool | None = None, min_items: int | None = None) -> Iterator[None]:
        """Within the block, draw bars or not (*bars*) and show work of at least *min_items*
        whatever each caller's own threshold (None: leave as is). ``memlake --quiet`` runs
        its command under ``settings(bars=False)``.

        >>> with Progress.settings(bars=False):
        ...     with Progress("embedding", total=10_000) as p:
        ...         p.drawn
        False
        """
        saved = (_settings.bars, _settings.min_items)
        configure(bars=bars, min_items=min_items)
        try:
            yield
        finally:
            _settings.bars, _settings.min_items = saved

    def _level(self) -> int:
        return logging.DEBUG if self.drawn else logging.INFO

    def __enter__(self) -> Progress:
        self._started = time.perf_counter()
        if not self.shown:
            return self
        if _bars_allowed():
            self._display, self._task = _open_line(self.what, self.total, self.unit)
        log.log(self._level(), "%s: %d %s", self.what, self.total, self.unit)
        return self

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._display is not None:
            self._display.update(self._task, advance=n)

    def set(self, done: int, *, total: int | None = None) -> None:
        """Set the count (and the total, when it changes under way)."""
        self.done = done
        if total is not None:
            self.total = total
        if self._display is not None:
            self._display.update(self._task, completed=done, total=self.total)

    def phase(self, text: str, *, logged: bool = True) -> None:
        """Name the step under way: the bar's label reads ``what: text``. ``logged=False``
        for fine-grained notes (a case counter) that would flood a log."""
        self._phase = text
        if not self.shown:
            return
        if self._display is not None:
            self._display.update(self._task, description=f"{self.what}: {text}", refresh=True)
        if logged:
            log.log(self._level(), "%s: %s (%d of %d %s done)", self.what, text, self.done, self.total, self.unit)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.shown:
            return
        level = self._level()
        if self._display is not None:
            _close_line(self._display, self._task)
            self._display = None
        took = time.perf_counter() - self._started
        rate = f" ({self.done / took:.0f} {self.unit}/s)" if took > 0 and self.unit != "steps" else ""
        end = "" if exc is None else " (interrupted)"
        log.log(level, "%s: %d of %d %s in %.1f s%s%s", self.what, self.done, self.total, self.unit, took, rate, end)
