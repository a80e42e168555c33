"""One snapshot per read: a table's snapshot moves to a new epoch only while no other read is in flight.

A read holds positions into a kind's Arrow snapshot from the moment it picks its visible
rows until it takes them (recall: the visible set, the ranking, then the winners). Within
an epoch positions do not move (appends add rows at the end), but a rewrite (a purge, a
reload after another process rearranged files, a multi-table transaction completing)
starts a new epoch whose positions mean other rows. A rewrite taken in by another thread
between a read's pick and its take served that read other rows than it picked: another
org's, the acme reader handed globex's facts (tests/test_snapshot_gate.py).

So reads hold this gate shared (`reading`: every public read through `run_read`, and
every section of `query.Visibility` under its lock) and a thread about to move a
snapshot asks it first (`may_move`, holding the lake's lock):

- no other read in flight: move now;
- the mover is not reading (a write's refresh, maintenance, a purge): wait until no read
  is in flight (the lake's lock let go meanwhile), then look again, since what it read
  before waiting may be stale;
- the mover is inside a read started by `run_read` while others are in flight: waiting
  would deadlock (each read waiting for the other's end), so its read is abandoned
  (`SnapshotMoved`) and run again from the start once it has moved the snapshot outside
  any read. A read has no effect but its caches, and those are keyed by epoch;
- the mover is inside a read that cannot be run again (a write's own lookup of its slots):
  the move waits for a later refresh, and that read is served the snapshot it began on.

A public read (`run_read`) entering while a mover waits lets it go first: readers that
follow one another without a gap would otherwise hold a move back for ever (three reader
threads in a loop did). It holds no lock of the store's, so a read in flight cannot be
waiting for it. Other sections (`query.Visibility`'s, entered by writes too) never wait
at the gate: the thread may hold a lock (a writer's, the ledger's) a read in flight needs.
One thread alone never waits nor runs a read twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal, TypeVar

T = TypeVar("T")


class SnapshotMoved(BaseException):  # a signal, not an error: no `except Exception` may swallow it
    """A read's own refresh must move a snapshot while other reads are in flight: run the read again."""


class SnapshotGate:
    """Reads shared, snapshot moves exclusive; built on the lake's lock (see the module docstring)."""

    def __init__(self, lock: threading.RLock) -> None:
        self._changed = threading.Condition(lock)
        self._readers: set[int] = set()  # threads inside a read
        self._restartable: set[int] = set()  # threads whose outermost read `run_read` runs
        self._depth = threading.local()  # this thread's nested reads (an inner one takes no lock)
        self.waiting = 0  # threads waiting to move a snapshot (tests and traces read it)

    @contextmanager
    def reading(self, *, restartable: bool = False) -> Iterator[None]:
        """Hold the snapshots still for one read (nested reads of a thread share the hold).
        *restartable*: the outermost read may be abandoned and run again (`run_read`)."""
        self.enter(restartable=restartable)
        try:
            yield
        finally:
            self.leave()

    def enter(self, *, restartable: bool = False) -> None:
        """`reading` as two calls (for a lock object that is also a read: `ReadLock`)."""
        depth: int = getattr(self._depth, "n", 0)
        if depth:
            self._depth.n = depth + 1
            return
        me = threading.get_ident()
        with self._changed:
            if restartable:  # a public read holds no lock a read in flight needs: it lets movers go first
                while self.waiting:
                    self._changed.wait()
                self._restartable.add(me)
            self._readers.add(me)
        self._depth.n = 1

    def leave(self) -> None:
        depth: int = self._depth.n - 1
        self._depth.n = depth
        if depth:
            return
        me = threading.get_ident()
        with self._changed:
            self._readers.discard(me)
            self._restartable.discard(me)
            self._changed.notify_all()

    def is_reading(self) -> bool:
        """Whether the calling thread is inside a read."""
        return getattr(self._depth, "n", 0) > 0

    def may_move(self) -> Literal["now", "again", "later"]:
        """Ask before moving a snapshot to a new epoch, holding the lake's lock (the gate's).

        ``"now"``: move it. ``"again"``: this thread waited for the reads in flight to end
        (the lock let go meanwhile); look again. ``"later"``: a read that cannot be run again
        while others are in flight; leave the snapshot where it is. Raises `SnapshotMoved` in a
        read `run_read` runs while others are in flight.
        """
        me = threading.get_ident()
        if not any(thread != me for thread in self._readers):
            return "now"
        if me in self._restartable:
            raise SnapshotMoved
        if me in self._readers:
            return "later"
        self.waiting += 1
        try:
            while self._readers:
                self._changed.wait()
        finally:
            self.waiting -= 1
            self._changed.notify_all()  # the public reads waiting for movers to go first
        return "again"


class ReadLock:
    """A re-entrant lock whose holder is reading (`SnapshotGate.reading`): `query.Visibility`
    takes it around every section, so what a section reads stays in its epoch."""

    def __init__(self, gate: SnapshotGate) -> None:
        self._gate = gate
        self._lock = threading.RLock()

    def __enter__(self) -> None:
        self._gate.enter()
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        self._gate.leave()


def run_read(gate: SnapshotGate, read: Callable[[], T], settle: Callable[[], object]) -> T:
    """*read* inside the gate, run again after *settle* (a refresh outside any read) when a
    snapshot had to move under it; an inner read lets the outermost one run again."""
    while True:
        try:
            with gate.reading(restartable=True):
                return read()
        except SnapshotMoved:
            if gate.is_reading():
                raise
            settle()
