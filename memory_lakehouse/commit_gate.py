"""Turns between this process's appends to a table and its rewrites of it (compaction, vacuum).

A rewrite through delta-rs reads the table, works for a while, then commits; its commit
tries the next free version a bounded number of times, and each commit another writer
landed meanwhile costs it one try (optimize gets 15 plus one for each commit it made
itself, whatever the caller asks: delta-io/delta-rs#3337). Appends landing every few
milliseconds beside it won every try. So appends and rewrites of a table took turns, and
an append waited for a whole org partition's compaction: at 100k records, a compaction of
the fact table took 8.3 s (0.4 s a partition) and the 24 single writes that landed
meanwhile took 391 ms at the median, 816 at most (``/tmp`` script, writes to the 20 loaded
orgs while ``store.maintenance.compact`` ran in a thread).

Now a rewrite runs beside appends until `ALLOWANCE` of them have landed; later ones wait
for it. The commits landed meanwhile stay well within delta-rs's tries. A rewrite that
fails anyway (another process's writers are not counted here; delta-rs also refused to
read a log it listed while an append was linking its commit: "Expected contiguous commit
files, but found gap") is run again alone (``exclusive``): in-flight appends finish, new
ones wait, as every rewrite did before. Its first try's files were never committed:
purge and vacuum delete such files once they are older than `lake.IN_FLIGHT_GRACE_SECONDS`.

Appends still take turns with one another (one commit of a table at a time, as before),
and one rewrite of a table runs at a time. Writers in other processes are not held.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: How many appends may land beside one rewrite before the next waits for it: well within
#: the 15 tries delta-rs gives a rewrite's commit, with room for other processes' commits.
ALLOWANCE = 8


class CommitGate:
    """One table's gate: `appending` around each append's commit, `rewriting` around a rewrite."""

    def __init__(self, allowance: int = ALLOWANCE) -> None:
        self.allowance = allowance
        self._state = threading.Condition()
        self._appends = threading.Lock()  # one append's commit at a time
        self._appending = False  # an append is committing (an exclusive rewrite waits for it)
        self._rewriting = False
        self._exclusive = False
        self._landed = 0  # appends let through since the rewrite began

    @contextmanager
    def appending(self) -> Iterator[None]:
        """Around one append's commit: waits while a rewrite runs alone or has let `allowance` through."""
        with self._appends:
            with self._state:
                while self._rewriting and (self._exclusive or self._landed >= self.allowance):
                    self._state.wait()
                if self._rewriting:
                    self._landed += 1
                self._appending = True
            try:
                yield
            finally:
                with self._state:
                    self._appending = False
                    self._state.notify_all()

    @contextmanager
    def rewriting(self, *, exclusive: bool = False) -> Iterator[None]:
        """Around one rewrite: beside appends (up to `allowance` of them), or *exclusive*ly (an
        append in flight finishes first, later ones wait). One rewrite of the table at a time."""
        with self._state:
            while self._rewriting:
                self._state.wait()
            self._rewriting, self._exclusive, self._landed = True, exclusive, 0
            while exclusive and self._appending:
                self._state.wait()
        try:
            yield
        finally:
            with self._state:
                self._rewriting = self._exclusive = False
                self._state.notify_all()

    @property
    def landed(self) -> int:
        """Appends let through beside the rewrite running now (or the last one)."""
        return self._landed

    @property
    def held(self) -> bool:
        """Whether a rewrite runs alone now: every append waits for it."""
        return self._rewriting and self._exclusive
