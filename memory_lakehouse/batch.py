"""Many principals' records in one commit: ``with store.batch() as b: b.write(rec, by=p)``.

A multi-tenant agent ingests what many users said in one go. `write_many` commits one
principal's records; a batch collects records of any number of principals and commits
them through the same write path (`write.Writer.commit`) in one transaction when the
block ends, each record authorised by its own principal (compare sqlite-utils'
``atomic``). All or nothing: a record any principal may not write, a bad record, or an
exception inside the block, and nothing is written. The commit's actor is every
distinct principal, comma-separated (the log says who wrote; rows say what).
"""

from __future__ import annotations

import dataclasses
from types import TracebackType
from typing import TYPE_CHECKING

from .errors import StoreError, ValidationError
from .records import Envelope
from .scope import Principal, Scope
from .write import BatchResult

if TYPE_CHECKING:
    from .store import MemoryStore


class Batch:
    """Records collected for one commit; `result` holds the `BatchResult` once it is made."""

    def __init__(self, store: MemoryStore, *, reason: str | None = None) -> None:
        self._store = store
        self._reason = reason
        self._records: list[Envelope] = []
        self._by: list[Principal] = []
        self._done = False
        self.result: BatchResult | None = None

    def write(self, record: Envelope, *, by: Principal, scope: Scope | None = None) -> None:
        """Add *record*, written by *by* (at *scope*, the record's own, or *by*'s), to the commit."""
        if self._done:
            raise StoreError("this batch has been committed or discarded; open a new one with store.batch()")
        if not isinstance(by, Principal):
            raise ValidationError("by= must be a Principal (who is acting)", field="by")
        if not isinstance(record, Envelope):
            raise ValidationError(f"a batch holds records, got {type(record).__name__}", field="record")
        if scope is not None and record.scope is None:
            record = dataclasses.replace(record, scope=scope)
        self._records.append(record)
        self._by.append(by)

    def __len__(self) -> int:
        return len(self._records)

    def commit(self) -> BatchResult:
        """Commit what was collected (the end of the ``with`` block does this)."""
        if self._done:
            raise StoreError("this batch has been committed or discarded")
        self._done = True
        if not self._records:
            self.result = BatchResult((), None)
            return self.result
        self.result = self._store._commit_batch(self._records, self._by, reason=self._reason)
        return self.result

    def __enter__(self) -> Batch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self._done = True  # discarded: nothing of it is written
            return
        self.commit()
