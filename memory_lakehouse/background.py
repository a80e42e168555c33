"""Work a store hands to a thread of its own: started when asked for, ended when none is left.

Three things run beside the caller: the maintenance policy (`maintenance.Maintenance`),
the checkpoint after a direct append's tenth version (`lake.Lake`) and the index warm-up
(`retrieve.Retriever`). Each keeps its pending work under `Worker.lock`, records a request
there and calls `Worker.kick`; the thread calls *take* (under the lock) for the next piece
and *do* (outside it) to run it, and ends when *take* finds nothing. Ending happens under
the same lock a request is made under, so a request made meanwhile is either taken by the
running thread or starts a new one, never lost in between.

>>> done = []
>>> pending = [1, 2]
>>> w = Worker("example", lambda: pending.pop(0) if pending else None, done.append)
>>> with w.lock:
...     w.kick()
>>> w.wait(timeout=10), done
(True, [1, 2])
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Worker(Generic[T]):
    """One thread at a time running ``do(take())`` until *take* returns None.

    *daemon*: whether the interpreter may exit with the thread still running (the index
    warm-up, whose work a later recall redoes); a store's writes to its tables are not
    left half done, so their workers are not daemons.
    """

    def __init__(self, name: str, take: Callable[[], T | None], do: Callable[[T], None], *, daemon: bool = False):
        self.name = name
        self.lock = threading.Lock()
        self._take = take
        self._do = do
        self._daemon = daemon
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def is_current(self) -> bool:
        """Whether the calling thread is this worker's (work it does must not ask for more)."""
        return self._thread is not None and self._thread is threading.current_thread()

    def kick(self) -> None:
        """Start the thread unless it is running. Call under `lock`, after recording the work."""
        if self.running:
            return
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=self._daemon)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self.lock:
                piece = self._take()
                if piece is None:
                    self._thread = None
                    return
            self._do(piece)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread to run out of work; False if *timeout* ran out first."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()
