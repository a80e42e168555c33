"""MemoryStore: the thin facade over the modules (lake, write, query, retrieve, …).

It holds no rules of its own: it resolves the read basis, checks arguments and hands
each call to the one module that owns the concept.
"""

from __future__ import annotations

import builtins  # `MemoryStore.list` shadows the builtin inside the class
import functools
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast

from . import policy as policy_rules
from .audit import AuditLog, audit_trail
from .browse import History, Listing
from .catch_up import CATCH_UP_MODES, WritesInFlight, after_write
from .context import Context
from .errors import StoreError, ValidationError
from .forget import ForgetReport, Ledger, PurgeReport
from .group import GroupCommit
from .lake import Lake, rows_to_pylist
from .limits import DEFAULT_MAX_TEXT_BYTES
from .maintenance import Maintenance, MaintenancePolicy
from .objectstore import interval_seconds
from .outside import ExportReport
from .query import READ_CACHE_BYTES, CacheBudget, ReadCacheStats, Visibility, tables_for
from .ranking import Ranking
from .records import (
    Envelope,
    Episode,
    Fact,
    Policy,
    Preference,
    check_kinds,
    record_from_row,
    subject_key,
)
from .redact import Redactor
from .replay import ReplayResult
from .retrieve import Hit, Retriever, context_block
from .scope import Principal, Scope
from .time import Basis, Clock, StoreClock, require_aware, resolve_basis
from .write import BatchResult, Writer, WriteResult

if TYPE_CHECKING:
    from .batch import Batch
    from .capture.loaders import LoadReport
    from .capture.pipeline import CaptureJob, CaptureResult, Seen


P = ParamSpec("P")
R = TypeVar("R")
Committed = TypeVar("Committed", WriteResult, BatchResult)

#: When rows are embedded into the vector index (`open`'s ``index=``).
INDEX_MODES: tuple[str, ...] = ("on_recall", "background")


def open(
    uri: str | os.PathLike[str] = "data/store",
    *,
    storage_options: dict[str, str] | None = None,
    ledger_uri: str | None = None,
    clock: Clock | None = None,
    embedder: Any = None,
    redactor: Redactor | None = None,
    create: bool = True,
    purge_on_open: Principal | None = None,
    ranking: Ranking | None = None,
    index: str = "on_recall",
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
    maintenance: MaintenancePolicy | None = None,
    refresh: float | timedelta | None = None,
    read_cache_bytes: int | None = None,
    catch_up: str = "write",
) -> MemoryStore:
    """Create or open a memory store at a local path or an object-store URI.

    The deletion ledger is read before anything is served, so a store restored from a
    backup older than a forget never serves the forgotten subject. With
    ``purge_on_open=steward`` the restored store's bytes of every forgotten subject are
    also erased before `open` returns (a purge of forgotten rows only; expired memory
    waits for an explicit `purge`). Without it, the next `purge` erases them.
    ``maintenance=`` is when the store compacts and checkpoints itself
    (`maintenance.MaintenancePolicy`; ``MaintenancePolicy(None, None)`` turns it off).

    ``ranking=ml.Ranking(...)`` sets how `recall` orders what is visible (signals,
    fusion and its weight, episode context); a recall may pass its own. ``index=``
    says when rows are embedded into the vector index: ``"on_recall"`` (the first recall
    that needs them; a long build shows progress) or ``"background"`` (a thread catches
    the index up after each write, so the first recall finds it built).

    ``catch_up=`` says who takes a write's rows into what earlier reads of the org built
    (its slot heads at now, its index partition, its position map): ``"write"`` (the
    default: a write of up to `catch_up.CATCH_UP_ROWS` rows does, before it returns, so
    the next read does not; ~3 ms on a 100k-record store) or ``"read"`` (the next read
    does). What a reader sees is the same either way.

    ``max_text_bytes`` is the most UTF-8 bytes any one text field of a record may hold
    (a structured value counts as its JSON); a bigger one is refused with a
    ``ValidationError`` naming the field and its size, and nothing is written.

    ``refresh=`` is how stale a read may be. By default (``None``) every read asks each
    table it reads for commits made since (one request per table on an object store;
    a stat() on a local disk, and on Linux only for the tables whose logs an inotify watch
    saw change: `logwatch`), so it sees every write committed before it began; a
    store always sees its own writes at once. With an interval (seconds, or a
    ``timedelta``) a read does not ask a table asked less than that long ago: a
    read-mostly agent saves the requests, and another process's write may take up to
    the interval to show (docs/performance.md, "Object stores").

    ``read_cache_bytes`` is the most the visibility caches may hold (each org's current
    heads and a few past ones, its history of versions, and readers' remembered results):
    512 MB by default, which holds every org of a 1M-record store. A smaller bound trades
    memory for reads that build again what was evicted: an org's history is one query of
    its rows (~10 ms at 100k records, ~55 ms at 1M). ``0`` keeps only what the read under
    way needs. The index partitions and BM25 models are not counted (docs/performance.md).

    >>> import shutil, tempfile, memory_lakehouse as ml
    >>> root = tempfile.mkdtemp()
    >>> with ml.open(root) as store:
    ...     store.root == root
    True
    >>> shutil.rmtree(root)
    """
    return MemoryStore(
        str(uri),
        storage_options=storage_options,
        ledger_uri=ledger_uri,
        clock=clock,
        embedder=embedder,
        redactor=redactor,
        create=create,
        purge_on_open=purge_on_open,
        ranking=ranking,
        index=index,
        max_text_bytes=max_text_bytes,
        maintenance=maintenance,
        refresh=refresh,
        read_cache_bytes=read_cache_bytes,
        catch_up=catch_up,
    )


def _read(method: Callable[Concatenate[MemoryStore, P], R]) -> Callable[Concatenate[MemoryStore, P], R]:
    """A public read: one snapshot of each table from start to end, each table's log asked at
    most once while it runs (`Lake.run_read`)."""

    def read(self: MemoryStore, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.lake.run_read(lambda: method(self, *args, **kwargs))

    return cast("Callable[Concatenate[MemoryStore, P], R]", functools.wraps(method)(read))


class MemoryStore:
    """Bi-temporal, scoped, governed agent memory in Delta tables. Use `open()`."""

    def __init__(
        self,
        uri: str,
        *,
        storage_options: dict[str, str] | None = None,
        ledger_uri: str | None = None,
        clock: Clock | None = None,
        embedder: Any = None,
        redactor: Redactor | None = None,
        create: bool = True,
        purge_on_open: Principal | None = None,
        ranking: Ranking | None = None,
        index: str = "on_recall",
        max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
        maintenance: MaintenancePolicy | None = None,
        refresh: float | timedelta | None = None,
        read_cache_bytes: int | None = None,
        catch_up: str = "write",
    ) -> None:
        if index not in INDEX_MODES:
            raise ValidationError(f"index must be one of {INDEX_MODES}, got {index!r}", field="index")
        self.catch_up = catch_up  # checked here, before anything is opened
        self.index_mode = index
        self._writes_in_flight = WritesInFlight()
        budget = CacheBudget.of(READ_CACHE_BYTES if read_cache_bytes is None else read_cache_bytes)
        self.clock = StoreClock(clock)
        interval = interval_seconds(refresh)
        self.lake = Lake(
            uri, storage_options=storage_options, clock=self.clock, create=create, refresh_interval=interval
        )
        self.root = self.lake.root
        self.ledger = Ledger(
            ledger_uri or f"{self.root}/_ledger", storage_options=storage_options, freshness=self.lake.freshness
        )
        self.vis = Visibility(self.lake, budget=budget)
        self.vis.set_forgotten(self.ledger.forgotten())
        self.writer = Writer(
            self.lake, self.vis, redactor=redactor, generations=self._generations, max_text_bytes=max_text_bytes
        )
        #: concurrent `write` calls share commits (`group.GroupCommit`; ``.enabled = False`` turns it off)
        self.group_commit = GroupCommit(self.writer)
        self.retriever = Retriever(self.vis, embedder, ranking=ranking)
        self._closed = False
        #: compaction, checkpoints, vacuum, status (`maintenance.Maintenance`)
        self.maintenance = Maintenance(self, maintenance)
        if purge_on_open is not None:  # replay the ledger's forgets physically before serving
            from .forget import run_purge

            by = self._principal(purge_on_open)
            by.check_steward(by.scope, "purge")
            run_purge(self, by, grace=timedelta(0), dry_run=False, expired=False)

    def close(self) -> None:
        """Wait for a background maintenance run, save index partitions with rows caught up since
        their last save, and release DuckDB.

        Nothing is lost without it — a partition behind the store catches up on the next
        open — but that catching up embeds the unsaved rows again. Idempotent; ``with
        ml.open(...) as store:`` calls it on the way out. Open the store again to go on.
        """
        if self._closed:
            return
        self.maintenance.wait()  # a background run of the policy uses the store until it ends
        self.lake.wait_for_checkpoints()
        self._closed = True
        self.retriever.wait_for_warm_up()
        self.retriever.flush(let_go=True)
        self.vis.con.close()
        self.lake.stop_watching()
        self.ledger.stop_watching()

    @property
    def catch_up(self) -> str:
        """Who takes a small write's rows into what reads built (`catch_up.after_write`):
        ``"write"``, the write before it returns, or ``"read"``, the next read. It may be
        changed while the store serves; anything else is refused, not read as ``"read"``."""
        return self._catch_up

    @catch_up.setter
    def catch_up(self, mode: str) -> None:
        if mode not in CATCH_UP_MODES:
            raise ValidationError(f"catch_up must be one of {CATCH_UP_MODES}, got {mode!r}", field="catch_up")
        self._catch_up = mode

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing

    def _basis(
        self,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
        valid_at: datetime | None = None,
        *,
        kinds: Iterable[str] | None = None,
    ) -> Basis:
        """The read's basis, after the ledger and the tables of *kinds* (default: all) took in news."""
        self._sync_ledger()
        # "now" must not be earlier than a commit another process already made
        self.lake.refresh(tables_for(kinds) if kinds is not None else None)
        return resolve_basis(self.clock.peek(), as_of=as_of, known_at=known_at, valid_at=valid_at)

    def _sync_ledger(self) -> None:
        if self.ledger.refresh():
            self.vis.set_forgotten(self.ledger.forgotten())
            # a forget or purge elsewhere: drop in-memory index partitions, or a later save
            # of this process's partition would write erased vectors back to disk
            self.retriever.clear_caches()

    def _generations(self, keys: Iterable[str]) -> Mapping[str, int]:
        self._sync_ledger()
        return self.ledger.generations(keys)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store at {self.root} is closed: open it again (ml.open) to go on")

    def _principal(self, by: Any) -> Principal:
        self._check_open()
        if not isinstance(by, Principal):
            raise ValidationError("by= must be a Principal (who is acting)", field="by")
        return by

    def read_cache_stats(self) -> ReadCacheStats:
        """What the read caches hold against ``read_cache_bytes`` (`query.ReadCacheStats`), and
        how many reads since `open` picked an org's history from them or queried it."""
        self._check_open()
        return self.vis.cache_stats()

    @contextmanager
    def tracer(self, callback: Callable[..., None]) -> Iterator[None]:
        """Show every DuckDB query and planner decision while the block runs.

        >>> # with store.tracer(print): store.get_fact("user:42", "plan", by=alice)
        """

        def relay(message: str, params: Mapping[str, Any]) -> None:
            callback(message if not params else f"{message}\n  params: {dict(params)}")

        with self.vis.tracing(relay):
            yield

    # ------------------------------------------------------------------ writes

    def write(
        self,
        record: Envelope,
        *,
        by: Principal,
        scope: Scope | None = None,
        reason: str | None = None,
        generation: int | None = None,
    ) -> WriteResult:
        """Write one record through the one write path; see `write.Writer`.

        Raises `StaleGeneration` (nothing written) for history a forget erased: a record
        about a subject forgotten at or after its ``valid_from``. Memory valid after the
        forget is accepted: a new life of the subject.

        Writes from several threads at once share commits (`group.GroupCommit`): each
        returns once its record is committed, with its own result or error.
        """
        principal = self._principal(by)
        return self._committed(
            lambda: self.group_commit.write(record, principal, scope=scope, reason=reason, generation=generation)
        )

    def write_many(
        self,
        records: Sequence[Envelope],
        *,
        by: Principal,
        scope: Scope | None = None,
        reason: str | None = None,
        generation: int | None = None,
    ) -> BatchResult:
        """Write a batch: the same path as `write`, one commit per table, all or nothing.

        Records about a subject forgotten at or after their ``valid_from`` are dropped,
        not written, and reported (action ``"forgotten"``; ``result.counts``,
        ``result.dropped``); the rest of the batch is written. So re-running a backfill
        after ``forget`` + ``purge`` does not bring the erased subject back.
        """
        principal = self._principal(by)
        return self._committed(
            lambda: self.writer.commit(list(records), principal, scope=scope, reason=reason, generation=generation)
        )

    def _committed(self, commit: Callable[[], Committed]) -> Committed:
        """Run *commit* (a write, a batch, a proposal, an approval, a retraction, a capture's
        commits), then what follows a commit: the background index build
        (``index="background"``) and the read caches' catch-up (``catch_up="write"``, when
        no other write of the store was in flight: `catch_up.WritesInFlight`)."""
        self._writes_in_flight.enter()
        try:
            result = commit()
        finally:
            alone = self._writes_in_flight.leave()
        if self.index_mode == "background":
            self.retriever.warm_up()
        if self.catch_up == "write":
            after_write(self, [result] if isinstance(result, WriteResult) else result, alone=alone)
        return result

    def batch(self, *, reason: str | None = None) -> Batch:
        """Records of many principals, one commit, each authorised by its own principal.

        >>> # with store.batch() as b:
        >>> #     b.write(Fact("user:1", "plan", "Pro", t, source="crm"), by=alice)
        >>> #     b.write(Fact("user:2", "plan", "Free", t, source="crm"), by=bob)
        >>> # b.result  # the BatchResult, in the order written
        """
        from .batch import Batch

        self._check_open()
        return Batch(self, reason=reason)

    def _commit_batch(
        self, records: Sequence[Envelope], by: Sequence[Principal], *, reason: str | None = None
    ) -> BatchResult:
        self._check_open()
        return self._committed(lambda: self.writer.commit(list(records), by[0], by_record=list(by), reason=reason))

    def propose(
        self, record: Envelope, *, by: Principal, scope: Scope | None = None, reason: str | None = None
    ) -> WriteResult:
        """Record a draft (status ``proposed``): never recalled as memory until approved."""
        principal = self._principal(by)
        return self._committed(
            lambda: self.writer.commit_one(
                record, principal, scope=scope, reason=reason, status="proposed", op="propose"
            )
        )

    def approve(self, record_id: str, *, by: Principal, reason: str | None = None, **corrections: Any) -> WriteResult:
        """Promote a proposal to active memory, with optional corrections. Agents cannot approve."""
        principal = self._principal(by)
        return self._committed(
            lambda: self.writer.approve(record_id, principal, reason=reason, corrections=corrections)
        )

    def retract(self, record_id: str, *, by: Principal, reason: str) -> WriteResult:
        """End a record: a new row that hides it from every later read (history keeps it)."""
        principal = self._principal(by)
        return self._committed(lambda: self.writer.retract(record_id, principal, reason=reason))

    def load(
        self,
        path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        format: str,
        by: Principal,
        scope: Scope | None = None,
        ttl: timedelta | None = None,
        progress: bool | None = None,
    ) -> LoadReport:
        """Load a LongMemEval or LoCoMo file (or several, or a directory) as turns; see `capture.loaders`.

        Each session is one commit at the session's date, so ``as_of=question_date``
        sees only earlier sessions. Bad input raises before anything is written; a second
        load of the same files changes nothing. The questions come back in the report.

        >>> # report = store.load("locomo10.json", format="locomo", by=alice); report.turns
        """
        from .capture.loaders import load

        return load(self, path, format=format, by=self._principal(by), scope=scope, ttl=ttl, progress=progress)

    def capture(
        self,
        session_id: str,
        messages: Sequence[Any],
        *,
        by: Principal,
        subject: str | None = None,
        scope: Scope | None = None,
        extractor: Any = None,
        worker: Any = None,
    ) -> CaptureJob:
        """Store a session's turns, then extract and reconcile them; see `capture.pipeline`.

        *messages* are `Turn`s or mappings (``role``, ``text``/``content``, optional
        ``speaker``, ``said_at``, ``position``). *subject* names whom the whole session is
        about (default: each turn's speaker). An agent's capture is proposals only.
        *extractor* defaults to `capture.RuleExtractor`; with *worker* (e.g.
        `capture.ExtractionWorker()`) extraction runs off the request path and a subject
        forgotten meanwhile makes the worker drop its results.

        >>> # job = store.capture("s1", [{"role": "user", "text": "I moved to Austin"}], by=alice, subject="user:42")
        >>> # job.result().results[0].action
        """
        from .capture.pipeline import capture

        return capture(
            self,
            session_id,
            messages,
            by=self._principal(by),
            subject=subject,
            scope=scope,
            extractor=extractor,
            worker=worker,
        )

    def extract(self, task: Any, *, by: Principal, extractor: Any = None) -> CaptureResult:
        """Run one `capture.ExtractionTask` (what a queue consumer calls; see `capture.worker`)."""
        from .capture.pipeline import ExtractionTask, run_task

        if isinstance(task, Mapping):
            task = ExtractionTask.from_dict(task)
        return run_task(self, task, by=self._principal(by), extractor=extractor)

    @_read
    def seen(
        self,
        record_id: str,
        *,
        by: Principal,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> Seen:
        """How often a record was stated and when last: its sightings at the basis (see `capture.pipeline`)."""
        from .capture.pipeline import seen

        return seen(self, record_id, by=self._principal(by), as_of=as_of, known_at=known_at, valid_at=valid_at)

    def generation(self, subject: str) -> int:
        """The subject's deletion generation; pass it back with ``write(..., generation=)``."""
        self._check_open()
        key = subject_key(subject)
        return self._generations([key]).get(key, 0)

    # ------------------------------------------------------------------ reads

    @_read
    def get_fact(
        self,
        subject: str,
        attribute: str,
        *,
        by: Principal,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
        valid_at: datetime | None = None,
        kind: str = "fact",
    ) -> Fact | Preference | None:
        """The value of one slot at the basis, or None. No vector search involved.

        >>> # store.get_fact("user:42", "plan", by=alice).value
        """
        basis = self._basis(as_of, known_at, valid_at, kinds=[kind])
        rows = self.vis.rows(
            kind,
            self._principal(by),
            basis,
            subject=subject,
            filters={"attribute": str(attribute).strip().lower()},
            columns=["_row"],
        )
        if not rows.num_rows:
            return None
        # the one row, sliced from the snapshot: a take copies each of ~27 columns (~0.12 ms)
        row = self.lake.all_rows(kind).slice(rows.column("_row")[0].as_py(), 1)
        return cast("Fact | Preference", record_from_row(kind, rows_to_pylist(row)[0]))  # slots with an attribute

    @_read
    def recall(
        self,
        query: str,
        *,
        by: Principal,
        subject: str | None = None,
        kinds: Sequence[str] | None = None,
        k: int = 8,
        filters: dict[str, Any] | None = None,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
        valid_at: datetime | None = None,
        signals: Sequence[str] | None = None,
        ranking: Ranking | None = None,
    ) -> list[Hit]:
        """Fuzzy recall: the visibility filter first (inside the vector search), then hybrid ranking.

        Returns up to *k* hits, each with ``score`` (fused) and ``why`` (scope, which
        signal matched, what it superseded). ``filters`` are exact matches on record
        columns and only narrow what is visible: each slot's head is chosen at the basis
        first, so a filter matching only a superseded version returns nothing, never that
        version. A filter naming a column a kind lacks excludes that kind. Always *k* hits when *k* visible records exist.
        ``ranking`` (an `ml.Ranking`; default: the store's, set on `open`) says how hits
        are ordered: which signals, how they are fused and with what weight, how much
        memories of one episode lend each other. ``signals`` (for evaluation and
        diagnosis) overrides the ranking's: ``("vector",)`` or ``("bm25",)`` alone ranks
        by that signal only. What is visible never depends on either.

        >>> # store.recall("can I invite 50 members?", by=alice, subject="user:42")[0].record.value
        """
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValidationError("k must be a positive integer", field="k")
        kinds = check_kinds(kinds)
        basis = self._basis(as_of, known_at, valid_at, kinds=kinds)
        return self.retriever.recall(
            str(query),
            self._principal(by),
            basis,
            kinds=kinds,
            subject=subject,
            k=k,
            filters=filters,
            signals=signals,
            ranking=ranking,
        )

    @_read
    def context(
        self,
        query: str,
        *,
        by: Principal,
        budget_tokens: int = 800,
        subject: str | None = None,
        kinds: Sequence[str] | None = None,
        k: int = 20,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
        valid_at: datetime | None = None,
        filters: dict[str, Any] | None = None,
    ) -> Context:
        """A prompt block of the most relevant visible memories, within *budget_tokens*.

        Tokens are word pieces of the default model's tokenizer, whatever the embedder
        (`tokens.count_tokens`, which can only over-count); a memory too long for what is
        left is cut and marked ``cut``. Each line carries kind, valid time, source and
        evidence, so the model can cite what it uses. ``filters`` narrow what is visible,
        as for `recall`. The result is a ``str`` (the block, as printed) with ``.text``
        and ``.items``: one `ContextItem` per line (record_id, kind, source, evidence,
        valid time, score).

        >>> # ctx = store.context("can I invite 50 members?", by=alice); ctx.items[0].record_id
        """
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 1:
            raise ValidationError("budget_tokens must be a positive integer", field="budget_tokens")
        hits = self.recall(
            query,
            by=by,
            subject=subject,
            kinds=kinds,
            k=k,
            as_of=as_of,
            known_at=known_at,
            valid_at=valid_at,
            filters=filters,
        )
        return context_block(hits, budget_tokens=budget_tokens)

    @_read
    def get(
        self,
        record_id: str,
        *,
        by: Principal,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> Envelope | None:
        """One record by id, if *by* may see it: any version (superseded or retracted too), or None.

        Scope, forgetting and system time apply as on every read (``known_at``/``as_of``:
        what the store had recorded then); proposals are read through `pending`.

        >>> # store.get(res.record_id, by=alice).value
        """
        from .browse import get

        basis = self._basis(as_of, known_at, valid_at)
        return get(self.vis, str(record_id), self._principal(by), basis)

    @_read
    def list(
        self,
        subject: str | None,
        *,
        by: Principal,
        kinds: Sequence[str] | None = None,
        filters: dict[str, Any] | None = None,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> Listing:
        """A subject's current memories: what reads would serve *by* at the basis, per kind.

        ``subject=None`` lists everything visible (``filters`` narrow it, as in `recall`).
        The result is a sequence of records with ``to_arrow()`` / ``to_polars()``.

        >>> # [r.value for r in store.list("user:42", by=alice, kinds=["fact"])]
        """
        from .browse import listing

        kinds = check_kinds(kinds)
        basis = self._basis(as_of, known_at, valid_at, kinds=kinds)
        return listing(self.vis, subject, self._principal(by), basis, kinds, filters=filters)

    @_read
    def history(
        self,
        subject: str | None = None,
        attribute: str | None = None,
        *,
        by: Principal,
        kind: str = "fact",
        lineage: str | None = None,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
    ) -> History:
        """Every version of one slot *by* may see: valid and known intervals, pointers, reasons.

        The slot is ``subject`` + ``attribute`` (facts, preferences) or a ``lineage`` id
        (any kind). ``known_at``/``as_of`` ask what history the store held then. A
        forgotten subject has no history; a sibling scope's versions never appear.

        >>> # [(v.record.value, v.valid_from, v.valid_to) for v in store.history("user:42", "plan", by=alice)]
        """
        from .browse import history

        basis = self._basis(as_of, known_at, None, kinds=[kind])
        return history(
            self.vis,
            self.lake,
            self._principal(by),
            basis,
            kind=kind,
            subject=subject,
            attribute=attribute,
            lineage_id=lineage,
        )

    @_read
    def pending(self, *, by: Principal, kinds: Sequence[str] | None = None) -> Listing:
        """Proposals awaiting approval in the curator's subtree (none an approval points at yet).

        >>> # for p in store.pending(by=lead): store.approve(p.record_id, by=lead)
        """
        from .browse import pending
        from .records import KINDS

        kinds = KINDS if kinds is None else check_kinds(kinds)
        basis = self._basis(kinds=kinds)
        return pending(self.vis, self._principal(by), basis, kinds)

    def rebuild_index(self, org: str | None = None) -> builtins.list[str]:
        """Rebuild index partitions from the store (one org, or all) and delete the old files."""
        self._check_open()
        self.lake.refresh()
        orgs = [org] if org is not None else self.retriever.known_orgs()
        # a read: another thread's rewrite cannot move a snapshot while the rows are read
        return self.lake.run_read(lambda: self.retriever.rebuild(orgs))

    @_read
    def episodes(
        self,
        *,
        service: str,
        env: str,
        by: Principal,
        version: str | None = None,
        k: int = 5,
        symptom: str | None = None,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> builtins.list[Episode]:
        """Filter hard, then rank: what was tried on this service/env/version, newest first.

        Superseded, expired and inconclusive episodes never come back; at most *k* (five).
        """
        from .retrieve import version_in_range

        basis = self._basis(as_of, known_at, valid_at, kinds=["episode"])
        rows = self.vis.rows("episode", self._principal(by), basis, filters={"service": service, "env": env})
        out: builtins.list[Episode] = []
        for row in rows_to_pylist(rows):
            if row["outcome"] == "inconclusive":
                continue
            if version is not None and not version_in_range(version, row["version_from"], row["version_to"]):
                continue
            out.append(cast(Episode, record_from_row("episode", row)))  # the episode table holds Episodes
        if symptom:
            from .lexical import lexical_scores

            scores = lexical_scores(symptom, [f"{e.symptom} {e.action}" for e in out])
            out = [e for _, e in sorted(zip(scores, out, strict=True), key=lambda p: -float(p[0]))]
        return out[:k]

    # ------------------------------------------------------------------ policy

    @_read
    def resolve_policy(
        self, facts: Mapping[str, Any], *, at: datetime, by: Principal, known_at: datetime | None = None
    ) -> policy_rules.Decision:
        """Which approved policy governs a case at world time *at*, as known at *known_at*.

        The facts come from the system of record (memory does not own the order). The
        decision says which rule applies; it never authorises an action (see `authorize`).
        Raises ``Escalation`` when the precedence rules leave a tie.

        >>> # which policy applies to the Sept-5 order (as known now):
        >>> # store.resolve_policy(order, at=sept_5, by=alice)
        >>> # which policy did the agent know on Sept 5:
        >>> # store.resolve_policy(order, at=sept_5, by=alice, known_at=sept_5)
        """
        at = require_aware(at, "at")
        basis = self._basis(known_at=known_at, valid_at=at, kinds=["policy"])
        rows = self.vis.rows("policy", self._principal(by), basis)
        candidates = [cast(Policy, record_from_row("policy", r)) for r in rows_to_pylist(rows)]  # policies only
        return policy_rules.resolve(candidates, facts, basis.valid_at, known_at=basis.known_at)

    # ------------------------------------------------------------------ replay

    def replay(
        self, decisions: Sequence[Any], *, naive: bool = False, kinds: Sequence[str] | None = None
    ) -> ReplayResult:
        """Replay past decisions at their own time: what each could have known, and nothing more.

        *decisions* are rows of ``(decision_id, principal, query, subject, decided_at)``
        (tuples, mappings or `replay.Decision`). ``naive=True`` runs the time-blind
        query for comparison.
        """
        from .replay import as_decisions, replay

        self._check_open()
        self._sync_ledger()
        return replay(self.vis, as_decisions(decisions), kinds=check_kinds(kinds), naive=naive)

    @_read
    def export(
        self,
        path: str | os.PathLike[str],
        *,
        by: Principal,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
        valid_at: datetime | None = None,
        kinds: Sequence[str] | None = None,
        format: str = "parquet",
    ) -> ExportReport:
        """Write what *by* is served at the basis as one Parquet file per kind (`outside.export`).

        >>> # store.export("snapshots/2026-10-05", by=alice, as_of=oct_5)
        """
        from .outside import export

        basis = self._basis(as_of, known_at, valid_at)
        return export(self.vis, self._principal(by), basis, os.fspath(path), kinds=kinds, format=format)

    # ------------------------------------------------------------------ audit & forgetting

    def forget(self, subject: str, *, by: Principal, reason: str) -> ForgetReport:
        """Tombstone a subject: from the next read on nothing about it is served, at any basis.

        Bumps the subject's deletion generation (stale workers' writes are refused),
        hides its records, records scoped to it as an actor, and everything derived from
        them, inside the steward's subtree. The bytes stay until `purge`.
        """
        from .forget import forget_subject

        by = self._principal(by)
        by.check_steward(by.scope, "forget")
        self._sync_ledger()
        report = forget_subject(
            self.lake, self.ledger, by, subject, reason=reason, clock=self.clock, redactor=self.writer.redactor
        )
        self.vis.set_forgotten(self.ledger.forgotten())
        return report

    def purge(self, *, by: Principal, dry_run: bool = False, grace: timedelta = timedelta(0)) -> PurgeReport:
        """Erase for real: every forgotten row (and derived copy) and memory past its expiry plus *grace*.

        Rewrites the affected data files, deletes the old ones, rebuilds affected index
        partitions, reloads snapshots and verifies by scanning every byte under the store
        root. Other subjects' history (including as-of reads) is untouched. A dry run
        reports what would go.
        """
        from .forget import run_purge

        by = self._principal(by)
        by.check_steward(by.scope, "purge")
        self._sync_ledger()
        return run_purge(self, by, grace=grace, dry_run=dry_run)

    def _purge_index(self, erased_by_org: Mapping[str, set[str]]) -> builtins.list[str]:
        """Rebuild the index partitions that held erased records; drop every cache. A read:
        another thread's rewrite cannot move a snapshot while the rows are read."""
        return self.lake.run_read(lambda: self._rebuild_purged(erased_by_org))

    def _rebuild_purged(self, erased_by_org: Mapping[str, set[str]]) -> builtins.list[str]:
        orgs = [
            org for org in self.retriever.index.orgs() if org in erased_by_org or self._partition_holds_gone_rows(org)
        ]
        rebuilt = self.retriever.rebuild(orgs, drop=erased_by_org)
        if erased_by_org or rebuilt:  # partitions of other embedders are caches too, and hold the erased vectors
            for stale in self.retriever.index.other_models():
                shutil.rmtree(stale, ignore_errors=True)
        self.retriever.clear_caches()
        self.vis.clear_cache()  # remembered read results may hold erased rows
        return rebuilt

    def _partition_holds_gone_rows(self, org: str) -> bool:
        """After an interrupted purge a partition may still hold rows the store no longer has
        (forgotten ones, or expired ones the interrupted run erased), or its folder an older
        generation or an unfinished save (killed between writing the new one and deleting)."""
        if len({p.parent for p in self.retriever.index.files(org)}) > 1:
            return True
        part = self.retriever.index.partition(org)
        if part is None:
            return False
        if bool((part.find(list(self.vis.forgotten.record_ids)) >= 0).any()):
            return True
        return self.retriever.gone_rows(org, part) > 0

    def audit(
        self,
        *,
        by: Principal,
        subject: str | None = None,
        record_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        actor: str | None = None,
    ) -> AuditLog:
        """Who acted, when, why, on which records — from the commit log, with no content.

        Narrow by ``subject``, ``record_id``, a time window ``[since, until)`` of system
        time and/or the ``actor``; with none of them, every event in the steward's
        subtree. The result is a list of `AuditEvent` with ``to_arrow()`` / ``to_polars()``.

        >>> # store.audit(by=dpo, since=monday, actor="triage-bot")
        """
        by = self._principal(by)
        by.check_steward(by.scope, "audit")
        since = require_aware(since, "since", optional=True)
        until = require_aware(until, "until", optional=True)
        self._sync_ledger()
        self.lake.refresh()
        return audit_trail(
            self.lake, self.ledger, by, subject=subject, record_id=record_id, since=since, until=until, actor=actor
        )
