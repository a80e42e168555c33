"""After a small write, the steps the org's next read would take first, taken by the write.

A read after a write to its org first takes the written rows into what earlier reads
built: the org's slot heads at now (`query.Visibility.catch_up`: an advance by the rows,
never a query), its index partition, BM25 row count and position map
(`retrieve.Retriever.catch_up`). On the 100k-record tenants store that was 3 of a first
recall's 4.9 ms after a write. An agent writes when it has answered and reads when the
next request arrives, often another user's: the write's caller pays the steps instead,
and the read that matters for the next answer finds them done.

Nothing here decides what a reader sees. These are the read's own steps, run earlier on
the same structures, and only on structures a read has built: a write never builds an
org's heads, history, index or BM25 model, and never runs a query. A commit of more than
`CATCH_UP_ROWS` rows (a backfill's batch) is left to the next read, which takes the rows
of many commits in one advance, and so is a write that finishes while another write of
the store is in flight (`WritesInFlight`): with eight threads writing one record at a
time, catching up after each write cut the group-committed writes from ~530 to ~120 a
second on the tenants bench and raised its peak RSS by ~100 MB, for work the next read
does once for all of them. ``ml.open(catch_up="read")`` leaves every step to the read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .progress import log
from .retrieve import INDEXED_KINDS

if TYPE_CHECKING:
    from .store import MemoryStore
    from .write import WriteResult

#: When the read structures take a write's rows in (`open`'s ``catch_up=``).
CATCH_UP_MODES: tuple[str, ...] = ("write", "read")
#: The most rows a commit may add for its write to catch the structures up (an agent's turn
#: writes a few; an ingest batch of 1,000 would pay an advance of every org it touched).
CATCH_UP_ROWS = 32
#: Actions that add a row (a duplicate or a dropped record adds none).
_ADDING = ("inserted", "superseded")


class WritesInFlight:
    """How many of the store's writes are under way, so a write knows whether it finished alone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def enter(self) -> None:
        with self._lock:
            self._count += 1

    def leave(self) -> bool:
        """This write is done; whether no other write is in flight."""
        with self._lock:
            self._count -= 1
            return self._count == 0


def after_write(store: MemoryStore, results: Iterable[WriteResult], *, alone: bool) -> None:
    """Catch up the structures reads built for the orgs and kinds *results* wrote to, when the
    write finished *alone* (no other write of the store in flight) and added few rows.

    Runs as a read (`lake.Lake.run_read`: a rewrite in another thread waits). The write
    has committed by now: a failure here is logged, not raised, and the next read takes
    the steps itself.
    """
    added = [r for r in results if r.action in _ADDING]
    if not alone or not added or len(added) > CATCH_UP_ROWS:
        return
    # only what reads built: asked first, as a write to a store nobody reads costs a basis
    # (the ledger's and every table's refresh) and a lock a kind otherwise
    cells = [
        (kind, org)
        for kind, org in dict.fromkeys((r.kind, r.scope.org) for r in added)
        if store.vis.has_cells(kind, org)
    ]
    orgs = [
        org
        for org in dict.fromkeys(r.scope.org for r in added if r.kind in INDEXED_KINDS)
        if store.retriever.loaded(org)
    ]
    if not cells and not orgs:
        return

    def run() -> None:
        basis = store._basis()
        for kind, org in cells:
            store.vis.catch_up(kind, org, basis)
        for org in orgs:
            store.retriever.catch_up(org)

    try:
        store.lake.run_read(run)
    except Exception as exc:  # the write stands: the next read catches up itself
        log.warning("catching up after a write failed (the next read will): %s", exc)
