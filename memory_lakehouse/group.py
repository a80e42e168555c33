"""Group commit: concurrent single writes of one process share a commit.

An agent serving many users at once writes from many threads, one record per turn, and a
Delta commit costs ~6-8 ms whatever it holds. Writes that arrive while a commit is in
flight wait for it, and the next commit takes all of them: one caller (the leader)
commits the group through the one write path (`write.Writer.commit`, each record
authorised by its own principal, as `store.batch()` does) while the others wait, and each
caller gets its own `WriteResult`, or its own error, as if it had written alone.

What stays as it was:

* A caller returns once its record is committed (read-your-writes), never before.
* One thread writing in turn never waits for anybody: a group of one is `commit_one`.
* A record the write path refuses fails its own caller only: a group is one
  transaction, all or nothing, so when its commit raises, nothing of it was written
  and each record of it is committed again on its own.
* A record about a forgotten subject raises `StaleGeneration` to its caller, as a
  single write does (a batch would drop and report it).

Writes in one group share the commit's version, transaction and system time: they were
concurrent, and a reader at any basis sees all of them or none. Writes with a
different ``reason`` or ``generation`` go in different commits (a commit records one
reason).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

from .records import Envelope
from .scope import Principal, Scope
from .write import Writer, WriteResult


@dataclass(eq=False)
class _Pending:
    record: Envelope
    principal: Principal
    scope: Scope | None
    reason: str | None
    generation: int | None
    result: WriteResult | None = None
    error: BaseException | None = None
    done: bool = False

    @property
    def group_key(self) -> tuple[Any, ...]:
        return (self.reason, self.generation)


class GroupCommit:
    """Single writes of one store, grouped while a commit is in flight (see the module)."""

    def __init__(self, writer: Writer) -> None:
        self._writer = writer
        self._cond = threading.Condition()
        self._waiting: list[_Pending] = []
        self._leading = False
        #: False commits every write on its own, in turn (the behaviour before group commit).
        self.enabled = True
        #: Commits made for groups of more than one write, and the writes they held (diagnosis, benches).
        self.groups = 0
        self.grouped_writes = 0

    def write(
        self,
        record: Envelope,
        principal: Principal,
        *,
        scope: Scope | None = None,
        reason: str | None = None,
        generation: int | None = None,
    ) -> WriteResult:
        if not self.enabled:
            return self._writer.commit_one(record, principal, scope=scope, reason=reason, generation=generation)
        pending = _Pending(record, principal, scope, reason, generation)
        with self._cond:
            self._waiting.append(pending)
            while not pending.done:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True  # this caller commits what waits, its own record among it
                group, self._waiting = self._waiting, []
                self._cond.release()
                try:
                    self._commit(group)
                finally:
                    self._cond.acquire()
                    self._leading = False
                    self._cond.notify_all()
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    def _commit(self, group: list[_Pending]) -> None:
        runs: dict[tuple[Any, ...], list[_Pending]] = {}
        for pending in group:
            runs.setdefault(pending.group_key, []).append(pending)
        for run in runs.values():
            try:
                if len(run) == 1 or not self._shared(run):
                    for pending in run:
                        self._alone(pending)
                else:
                    self._together(run)
            finally:
                for pending in run:  # nothing may leave a caller waiting forever
                    if not pending.done:
                        pending.error = pending.error or RuntimeError("the group commit ended before this write")
                        pending.done = True

    def _alone(self, pending: _Pending) -> None:
        try:
            pending.result = self._writer.commit_one(
                pending.record,
                pending.principal,
                scope=pending.scope,
                reason=pending.reason,
                generation=pending.generation,
            )
        except BaseException as exc:  # the caller's own error, raised in its own thread
            pending.error = exc
        pending.done = True

    def _shared(self, run: list[_Pending]) -> list[Envelope] | None:
        """The run's records with each caller's scope folded in, or None if one cannot be."""
        records = []
        for pending in run:
            record = pending.record
            if pending.scope is not None:
                if record.scope is not None and record.scope != pending.scope:
                    return None  # the write path's own rule decides: commit it alone
                record = dataclasses.replace(record, scope=pending.scope)
            records.append(record)
        return records

    def _together(self, run: list[_Pending]) -> None:
        records = self._shared(run)
        assert records is not None
        try:
            results = self._writer.commit(
                records,
                run[0].principal,
                by_record=[p.principal for p in run],
                reason=run[0].reason,
                generation=run[0].generation,
            )
        except Exception:
            # all or nothing: nothing of the group was written; each record on its own
            # tells its caller what is wrong with it (and the others are written)
            for pending in run:
                self._alone(pending)
            return
        self.groups += 1
        self.grouped_writes += len(run)
        for pending, result in zip(run, results, strict=True):
            if result.action == "forgotten":
                pending.error = self._writer.stale(pending.record)
            else:
                pending.result = result
            pending.done = True
