"""Delta tables: layout, table configuration, appends with commit metadata, snapshots.

Each record kind is one Delta table under the store root, partitioned by org. Every
write is a blind append whose commit metadata carries the transaction id, the actor,
the reason, the writers and the store clock's reading: that log *is* system time.
A row is known from the commit that added it (``known_since``), never from a time the
caller stamps into the row.

Three table settings carry invariants (see ``TABLE_CONFIG``):

* file statistics only on time columns, so no content or identifier survives a purge
  in ``_delta_log`` as a min/max value;
* a log retention far beyond Delta's 30-day default and no expired-log cleanup, so
  the commit metadata that answers "what did we know at t" is never deleted (the log
  carries no content, so keeping it costs no privacy);
* no change data feed and no deletion vectors (both would copy or hide row content).

On a local store an append is written into the table's log by `direct_append` (Parquet
files and a put-if-absent commit file, as the Delta protocol spells them) rather than
by delta-rs, whose commit grows with the table's files; delta-rs still creates the
tables, writes their checkpoints, every rewrite, and any append `direct_append` does
not take (an object store, an unfamiliar table).

Reads go through a warm, incrementally refreshed snapshot per table (`TableView`):
new commits are read file by file; a rewrite (purge, optimize) triggers a full reload.

The root may be a local path or an object-store URI (``s3://bucket/prefix`` with
delta-rs storage options). What differs on an object store:

* a refresh finds a table's next commit with one request (opening
  ``_delta_log/<version + 1>.json``; no LIST) and reads the new commit and data files
  whole through delta-rs's storage handler, called directly (`objectstore.RemoteFiles`:
  no pyarrow filesystem, whose worker threads calling back into Python could outlive
  a scan and abort the interpreter at exit); a rewrite (purge, compaction) reloads the
  table through delta-rs;
* concurrent writers rely on the store's conditional put (``If-None-Match: *``, the
  delta-rs default on S3 since 0.23): a commit that loses the race is retried at the
  next version, never overwritten. A store without it needs a locking provider;
* no cross-process maintenance lock: a rewrite (purge) that loses its commit race
  fails with a commit conflict and can simply be run again;
* purge and its verification list, read and delete objects through `ObjectStore`
  (the same storage handler delta-rs uses), so they work the same as on a local store;
* the HNSW index, a derived cache, stays on local disk (see `retrieve.Retriever.index`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from stat import S_ISREG
from typing import Any, TypeVar, overload
from urllib.parse import unquote
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from . import direct_append
from .background import Worker
from .commit_gate import CommitGate
from .commitlog import COMMITS_TABLE, CommitRecord
from .errors import LakehouseError, StoreError
from .logwatch import asking, watch_logs
from .objectstore import (
    Freshness,
    RemoteFiles,
    commit_file,
    conform,
    log_moved,
    open_delta_table,
    parse_actions,
)
from .records import SPECS, STATS_COLUMNS, TS, subject_key
from .slots import IdRows, SlotRows
from .snapshot_gate import SnapshotGate, run_read
from .time import StoreClock

log = logging.getLogger(__name__)
T = TypeVar("T")

META_PREFIX = "memlake."
LOG_RETENTION = "interval 36500 days"

TABLE_CONFIG: dict[str, str] = {
    "delta.dataSkippingStatsColumns": ",".join(STATS_COLUMNS),
    "delta.logRetentionDuration": LOG_RETENTION,
    "delta.enableExpiredLogCleanup": "false",
    "delta.enableChangeDataFeed": "false",
    "delta.enableDeletionVectors": "false",
    "delta.appendOnly": "false",  # purge must be able to rewrite files
    # each append through a handle costs more the more log it replays: a checkpoint every
    # 10 commits keeps a reopened handle cheap (~10 ms per append at 300 files, 14 ms at 100)
    "delta.checkpointInterval": "10",
}

#: Columns the snapshot adds to each row (never stored in the table).
SYSTEM_COLUMNS = ("known_since", "commit_version", "actor_key")

#: Reads combine a snapshot's chunks once it has more than this many.
MAX_READ_CHUNKS = 4
#: Appends through one delta-rs handle before it is reopened (see `Lake._write_handle`).
HANDLE_MAX_COMMITS = 32

#: Operations that add memory (learning). Everything else is maintenance or governance.
MEMORY_OPS = frozenset({"write", "propose", "approve", "retract"})


@dataclass(frozen=True)
class Commit:
    """One Delta commit of one table, as the store reads it back from the log."""

    table: str
    version: int
    txn_id: str | None
    committed_at: datetime  # the store clock's reading (system time)
    operation: str  # write/propose/approve/retract/forget/purge, or a Delta maintenance op
    actor: str | None
    reason: str | None
    writers: tuple[str, ...]
    kinds: tuple[str, ...]  # every table this transaction appended to
    record_count: int

    @property
    def is_memory(self) -> bool:
        return self.operation in MEMORY_OPS


#: The operations whose commits remove data files (a compaction's, a purge's, a DELETE's).
REWRITE_OPERATIONS = frozenset({"optimize", "purge", "delete"})
#: How old a data file no snapshot references and no log entry names must be before purge and
#: vacuum take it for a leftover (a rewrite's whose tombstone expired, a failed append's) rather
#: than an append in flight (written, not yet committed): an append commits its files within
#: seconds, and Delta forgets a removed file's tombstone only ``delta.deletedFileRetentionDuration``
#: (a week by default) after the rewrite.
IN_FLIGHT_GRACE_SECONDS = 3600.0


@dataclass(frozen=True)
class Unreferenced:
    """A table's data files no snapshot references (`Lake.unreferenced_files`): those the log
    names as removed (`named`: purge's), and those no live tombstone names that are old
    enough (`expired`: purge's and vacuum's)."""

    named: list[str]
    expired: list[str]


#: Delta's pointer to a table's newest checkpoint, relative to the table.
LAST_CHECKPOINT = "_delta_log/_last_checkpoint"


def _last_checkpoint(raw: bytes | None) -> tuple[int, int] | None:
    """(version, parts) of a ``_last_checkpoint`` file's content; None when absent or unreadable."""
    if not raw:
        return None
    try:
        last = json.loads(raw)
        return int(last["version"]), int(last.get("parts") or 1)
    except (ValueError, KeyError, TypeError):
        return None


def _checkpoint_interval(handle: DeltaTable) -> int:
    """`direct_append.checkpoint_interval` of the table behind *handle*; Delta's default when unreadable."""
    try:
        return direct_append.checkpoint_interval(handle.metadata().configuration)
    except ValueError:
        return 100


def _parse_commit(table: str, entry: Mapping[str, Any]) -> Commit:
    meta = {k[len(META_PREFIX) :]: v for k, v in entry.items() if k.startswith(META_PREFIX)}
    if "committed_at" in meta:
        committed_at = datetime.fromisoformat(meta["committed_at"])
    else:  # a commit by another engine, or maintenance: Delta's own timestamp (epoch ms)
        committed_at = datetime.fromtimestamp(int(entry.get("timestamp", 0)) / 1000, tz=UTC)
    op = meta.get("op") or str(entry.get("operation", "UNKNOWN")).lower()
    return Commit(
        table=table,
        version=int(entry["version"]),
        txn_id=meta.get("txn_id"),
        committed_at=committed_at,
        operation=op,
        actor=meta.get("actor"),
        reason=meta.get("reason") or None,
        writers=tuple(json.loads(meta.get("writers", "[]"))),
        kinds=tuple(json.loads(meta.get("kinds", "[]"))),
        record_count=int(meta.get("records", 0)),
    )


def _rearranges(actions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a commit only moves rows between files: file actions, every one ``dataChange: false``."""
    files = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
    return bool(files) and all(f is not None and f.get("dataChange") is False for f in files)


def commit_metadata(
    *,
    txn_id: str,
    committed_at: datetime,
    op: str,
    actor: str,
    reason: str | None,
    writers: Iterable[str] = (),
    kinds: Iterable[str] = (),
    records: int = 0,
) -> dict[str, str]:
    """The custom metadata of a store commit: who, when, why — never content."""
    return {
        META_PREFIX + "txn_id": txn_id,
        META_PREFIX + "committed_at": committed_at.isoformat(),
        META_PREFIX + "op": op,
        META_PREFIX + "actor": actor,
        META_PREFIX + "reason": reason or "",
        META_PREFIX + "writers": json.dumps(sorted(set(writers))),
        META_PREFIX + "kinds": json.dumps(sorted(set(kinds))),
        META_PREFIX + "records": str(records),
    }


#: An index of one column kept up with a view's appended chunks (`Lake._followed`).
_Follower = TypeVar("_Follower", SlotRows, IdRows)

_UTC = ZoneInfo("UTC")  # what pyarrow puts on a timestamp[tz=UTC] value (ZoneInfo caches one per key)
_UTC_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)


def rows_to_pylist(table: pa.Table) -> list[dict[str, Any]]:
    """``table.to_pylist()``: one dict per row, the same values.

    pyarrow converts each value of a ``timestamp[us, tz=UTC]`` column through the time zone
    database (~10 µs a value: 0.2 ms of a recall's eight hits); from the integers it is
    one addition. The integers are a view of each chunk (a cast to int64 costs ~8 µs a
    column, a view ~1). tests/test_recall.py checks it against ``to_pylist``.
    """
    columns = [column_to_pylist(column) for column in table.itercolumns()]
    names = table.schema.names
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)] if columns else []


def column_to_pylist(column: pa.ChunkedArray) -> list[Any]:
    """``column.to_pylist()``: the same values, UTC timestamps from their integers (`rows_to_pylist`)."""
    kind = column.type
    chunks = column.chunks  # each chunk's to_pylist: ChunkedArray.to_pylist costs ~4 µs more a column
    if kind.id == _TIMESTAMP_ID and kind.tz == "UTC" and kind.unit == "us":
        micros = [v for chunk in chunks for v in chunk.view(pa.int64()).to_pylist()]
        return [None if v is None else _UTC_EPOCH + timedelta(microseconds=v) for v in micros]
    if len(chunks) == 1:
        values: list[Any] = chunks[0].to_pylist()
        return values
    return [v for chunk in chunks for v in chunk.to_pylist()]


_TIMESTAMP_ID = pa.timestamp("us").id


def _per_value(column: pa.ChunkedArray, value_of: Callable[[Any], Any], kind: pa.DataType) -> pa.Array:
    """``value_of(v)`` for each non-null *v* of *column*, called once per distinct value; null for null.

    One distinct value and no null (an append of one transaction, one actor) is a repeat
    of its value; otherwise a lookup by `index_in` and `take` (~40 µs even for one row).
    """
    distinct = [v for v in pc.unique(column).to_pylist() if v is not None]
    if len(distinct) == 1 and column.null_count == 0:
        return pa.repeat(pa.scalar(value_of(distinct[0]), kind), len(column))
    idx = pc.index_in(column, value_set=pa.array(distinct, column.type))
    return pc.take(pa.array([value_of(v) for v in distinct], kind), idx).combine_chunks()


def take_rows(table: pa.Table, positions: pa.Array | pa.ChunkedArray | np.ndarray) -> pa.Table:
    """``table.take(positions)``, taken record batch by record batch: the same rows in the same order.

    Reads take a few rows of a kind's snapshot by position. pyarrow's ``Table.take``
    works over whole chunked columns: one row of a 100k-row, 30-column snapshot with a
    few dozen chunks (a write appends one) costs 3-6 ms, and ``RecordBatch.take`` on the
    batches the positions fall in ~0.2 ms. With one chunk, ``Table.take`` is as cheap.
    Of a table in several chunks, a few rows (`SLICED_ROWS_PER_BATCH` per chunk) are
    sliced one by one, in the order asked, and the slices concatenated: eight rows of
    22 columns over three chunks 0.30 ms taken, 0.11 sliced; one column 0.09 and 0.03.
    Of one chunk the take stays: slicing cost narrow tables more (one column, six rows:
    0.013 taken, 0.026 sliced).
    """
    if isinstance(positions, pa.ChunkedArray):
        positions = positions.combine_chunks()
    wanted = positions.to_numpy(zero_copy_only=False) if isinstance(positions, pa.Array) else positions
    wanted = np.asarray(wanted, dtype=np.int64)
    if not len(wanted):
        return table.slice(0, 0)  # Table.take of nothing costs as much as of one row
    batches = table.to_batches()
    if len(batches) == 1 or len(wanted) * 8 >= table.num_rows:
        # one chunk, or a good share of the rows (a replay's visible sets): Table.take is the
        # cheaper one (for 150k positions of 100k rows it costs 2/3 of taking and reordering)
        return table.take(pa.array(wanted, pa.int64()))
    starts = np.cumsum([0] + [b.num_rows for b in batches])
    if wanted.min() < 0 or wanted.max() >= table.num_rows:
        raise IndexError(f"take_rows: positions out of range for a table of {table.num_rows} rows")
    if len(wanted) <= SLICED_ROWS_PER_BATCH * len(batches):
        which = np.searchsorted(starts, wanted, side="right") - 1  # the batch each position falls in
        at = (wanted - starts[which]).tolist()
        rows = [batches[b].slice(i, 1) for b, i in zip(which.tolist(), at, strict=True)]
        return pa.Table.from_batches([pa.concat_batches(rows)], schema=table.schema)
    order = np.argsort(wanted, kind="stable")
    ordered = wanted[order]
    cuts = np.searchsorted(ordered, starts)
    parts = [
        batches[i].take(pa.array(ordered[cuts[i] : cuts[i + 1]] - starts[i], pa.int64()))
        for i in range(len(batches))
        if cuts[i + 1] > cuts[i]
    ]
    out = pa.Table.from_batches(parts, schema=table.schema)
    if np.all(order[1:] > order[:-1]):
        return out  # the positions were in order already
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    merged = out.combine_chunks().to_batches()  # one batch: its take is the cheap one
    return pa.Table.from_batches([merged[0].take(pa.array(back, pa.int64()))], schema=table.schema)


def distinct_positions(positions: pa.Array | pa.ChunkedArray | np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct *positions* (of a table of *size* rows) in ascending order, and where each
    of *positions* is among them: ``distinct[index] == positions``.

    For `dictionary_rows`: a replay's (decision, row) pairs name each row once per decision
    that sees it (154k pairs of 42k rows at 100k). A mark per row of the table, not a sort.
    """
    if isinstance(positions, pa.ChunkedArray):
        positions = positions.combine_chunks()
    at = np.asarray(
        positions.to_numpy(zero_copy_only=False) if isinstance(positions, pa.Array) else positions, dtype=np.int64
    )
    seen = np.zeros(size, dtype=bool)
    seen[at] = True
    distinct = np.flatnonzero(seen)
    place = np.empty(size, dtype=np.int32)
    place[distinct] = np.arange(len(distinct), dtype=np.int32)
    return distinct, place[at]


def dictionary_rows(rows: pa.Table, index: np.ndarray) -> pa.Table:
    """``rows.take(index)`` with every string column dictionary-encoded: each distinct value
    is stored once, and a row taken many times costs an index per time, not its text.

    A replay's result names a row once per decision that sees it, with its search text:
    at 100k (200 decisions, 154k pairs of 42k rows) 33 MB as plain strings, 18 MB so.
    """
    at = pa.array(index, pa.int32())
    columns = []
    for column in rows.columns:
        values = column.combine_chunks()
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            encoded = values.dictionary_encode()
            columns.append(pa.DictionaryArray.from_arrays(encoded.indices.take(at), encoded.dictionary))
        else:
            columns.append(values.take(at))
    return pa.Table.from_arrays(columns, names=rows.column_names)


#: Of a snapshot in several chunks, `take_rows` slices rows one by one, rather than taking
#: them chunk by chunk, up to this many per chunk (measured crossover: 8-10 at 22 columns,
#: more for fewer).
SLICED_ROWS_PER_BATCH = 6


def new_txn_id() -> str:
    return "txn_" + uuid.uuid4().hex


@dataclass
class TableView:
    """A warm snapshot of one table: its rows and its commits, refreshed incrementally.

    ``rows`` carry their system time (``known_since``, ``commit_version``; null while
    their transaction is incomplete) and ``actor_key``. ``chunks`` are the tables
    appended since ``epoch`` began (`Lake.appended`), so a consumer (the DuckDB mirror) can apply just
    what is new; a rewrite of files starts a new epoch. They are kept as spans of
    ``rows`` (``spans``: first row, row count) and sliced from the rows when read, so
    combining the rows' chunks (`Lake.all_rows`) leaves no table behind holding the old
    buffers, and nothing to point anew.
    """

    table: str
    version: int = -1
    paths: set[str] = field(default_factory=set)
    rows: pa.Table | None = None
    commits: dict[int, Commit] = field(default_factory=dict)
    by_txn: dict[str, Commit] = field(default_factory=dict)
    epoch: int = 0
    spans: list[tuple[int, int]] = field(default_factory=list)
    #: per column, an index of it kept up with the appended chunks (`Lake._followed`): the
    #: epoch and chunk count it reflects, and the index (`SlotRows`, `IdRows`)
    followers: dict[str, tuple[tuple[int, int], Any]] = field(default_factory=dict)
    high_water: datetime | None = None  # the latest system time of a memory commit so far

    @property
    def num_rows(self) -> int:
        """The snapshot's rows: every appended chunk's, without slicing one."""
        return 0 if self.rows is None else self.rows.num_rows


class AppendedChunks(Sequence[pa.Table]):
    """A view's appended tables, each a zero-copy slice of its rows (`TableView.spans`).

    Before, each append kept its own table, and every combine of the rows had to point the
    combined tail's tables at the new buffers: one slice per append since the epoch
    began, so a process that wrote once per turn paid more on every read (800 writes: ~1 ms
    every few reads; a few thousand until a compaction: tens of ms).
    """

    def __init__(self, rows: pa.Table | None, spans: list[tuple[int, int]]) -> None:
        self._rows = rows
        self._spans = spans

    def __len__(self) -> int:
        return len(self._spans)

    @overload
    def __getitem__(self, index: int) -> pa.Table: ...
    @overload
    def __getitem__(self, index: slice) -> list[pa.Table]: ...
    def __getitem__(self, index: int | slice) -> pa.Table | list[pa.Table]:
        if isinstance(index, slice):
            return [self._slice(span) for span in self._spans[index]]
        return self._slice(self._spans[index])

    def _slice(self, span: tuple[int, int]) -> pa.Table:
        assert self._rows is not None
        return self._rows.slice(*span)


def _combine(view: TableView) -> None:
    """Combine the chunks of ``view.rows`` after the first into one, or all of them once that
    tail outgrows a quarter of the first: copying 100k rows after every few single writes
    cost a read ~10 ms. Positions do not move."""
    assert view.rows is not None
    base = len(view.rows.column(0).chunk(0))
    tail = view.rows.slice(base)
    if tail.num_rows * 4 > base:
        view.rows = view.rows.combine_chunks()
    else:
        view.rows = pa.concat_tables([view.rows.slice(0, base), tail.combine_chunks()])


def is_local_uri(uri: str) -> bool:
    """Whether *uri* names a local path (a bare path or ``file://``) rather than an object store."""
    return "://" not in str(uri) or str(uri).startswith("file://")


class ObjectStore:
    """The files under one root — a local directory or an object-store prefix — by relative path.

    What purge and its verification need and Delta does not offer: list every object,
    read one whole, delete one. On an object store it goes through delta-rs's own
    storage handler, called directly (`objectstore.RemoteFiles`: the same storage
    options, credentials and endpoint as the tables, no pyarrow filesystem layer).
    """

    def __init__(self, root: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.is_local = is_local_uri(root)
        self.root = str(Path(str(root).removeprefix("file://")).absolute()) if self.is_local else str(root).rstrip("/")
        self.storage_options = dict(storage_options or {})
        self._remote: RemoteFiles | None = None

    def __repr__(self) -> str:
        return f"ObjectStore({self.root!r})"

    @property
    def remote(self) -> RemoteFiles:
        if self._remote is None:
            self._remote = RemoteFiles(self.root, self.storage_options)
        return self._remote

    def list(self, prefix: str = "") -> dict[str, int]:
        """Every file under *prefix*: its path relative to the root -> its size in bytes."""
        if self.is_local:
            return {rel: st.st_size for rel, st in self._local_stats(prefix)}
        return self.remote.list(prefix)

    def modified(self, prefix: str = "") -> dict[str, float]:
        """Every file under *prefix*: its path relative to the root -> when it was last
        written (seconds since the epoch, the file system's or object store's own clock)."""
        if self.is_local:
            return {rel: st.st_mtime for rel, st in self._local_stats(prefix)}
        return self.remote.modified(prefix)

    def _local_stats(self, prefix: str) -> Iterator[tuple[str, os.stat_result]]:
        """Each file under *prefix* with its stat; one deleted between the walk and its stat
        (maintenance in another thread removes log files below a checkpoint) is left out,
        as an object store's listing of a moment would."""
        top = Path(self.root) / prefix
        if top.is_dir():
            for p in top.rglob("*"):
                try:
                    st = p.stat()
                except FileNotFoundError:
                    continue
                if S_ISREG(st.st_mode):
                    yield p.relative_to(self.root).as_posix(), st

    def read(self, rel: str) -> bytes:
        """The whole object at *rel*."""
        if self.is_local:
            return (Path(self.root) / rel).read_bytes()
        return self.remote.read(rel)

    def read_if_exists(self, rel: str) -> bytes | None:
        """The whole object at *rel*, or None when there is none."""
        if not self.is_local:
            return self.remote.read_if_exists(rel)
        try:
            return self.read(rel)
        except FileNotFoundError:
            return None

    def delete(self, rel: str) -> None:
        """Delete the object at *rel* (no error if it is already gone)."""
        if self.is_local:
            (Path(self.root) / rel).unlink(missing_ok=True)
            return
        self.remote.delete(rel)

    def contains(self, uri: str) -> bool:
        """Whether *uri* lies under this root."""
        other = str(Path(str(uri).removeprefix("file://")).absolute()) if is_local_uri(uri) else str(uri).rstrip("/")
        return other == self.root or other.startswith(self.root + "/")


def _os_reason(exc: BaseException) -> str:
    """What went wrong, in a few words: an OS error's own text, else the first line of the message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    text = str(exc)
    if "permission denied" in text.lower():
        return "permission denied"
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__


@contextmanager
def storage_errors(action: str) -> Iterator[None]:
    """Raise the storage layer's own errors (delta-rs, the OS) as `StoreError` naming the store.

    A read-only store, a full disk or a vanished mount is a fact about the store, not a
    bug: the caller gets one typed error with the path and the reason.
    """
    try:
        yield
    except (LakehouseError, TableNotFoundError, CommitFailedError):
        raise  # ours, or handled by the caller (create, retry)
    except (DeltaError, OSError) as exc:
        raise StoreError(f"cannot {action}: {_os_reason(exc)}") from exc


def check_local_root(root: str, *, create: bool) -> None:
    """A local store's directory must be a readable directory; only *create* makes a missing one.

    Opening a store to read must not leave an empty directory behind, and a file or an
    unreadable directory must be named as such, not reported as "no store".
    """
    path = Path(root)
    try:
        if path.exists() and not path.is_dir():
            raise StoreError(f"{root} is a file, not a memory store directory")
        if not path.exists():
            if not create:
                raise StoreError(
                    f"no memory store at {root}: the directory does not exist (memlake init --store {root} creates one)"
                )
            path.mkdir(parents=True, exist_ok=True)
        os.listdir(root)
    except OSError as exc:
        if isinstance(exc, StoreError):
            raise
        verb = "read" if path.is_dir() else "create"
        raise StoreError(f"cannot {verb} the store at {root}: {_os_reason(exc)}") from exc


class Lake:
    """The store's Delta tables under one root (a local path or an object-store URI)."""

    #: Blind appends to a local store skip delta-rs's writer (`direct_append`); False sends every
    #: append through delta-rs (an A/B switch for the bench and the tests).
    direct_appends = True

    def __init__(
        self,
        root: str,
        *,
        storage_options: dict[str, str] | None = None,
        clock: StoreClock | None = None,
        create: bool = True,
        refresh_interval: float = 0.0,
    ) -> None:
        self.root = str(root).rstrip("/")
        self.storage_options = dict(storage_options or {})
        self.is_local = is_local_uri(self.root)
        if self.is_local:
            self.root = str(Path(self.root.removeprefix("file://")).absolute())
        self.objects = ObjectStore(self.root, self.storage_options)
        self.commit_record = CommitRecord(f"{self.root}/{COMMITS_TABLE}", storage_options=self.storage_options)
        self.clock = clock or StoreClock()
        self._lock = threading.RLock()
        #: reads hold snapshots still; a move to a new epoch waits for the reads in flight
        self.gate = SnapshotGate(self._lock)
        self._pending_unchecked = False  # a refresh let go before completing transactions: the next one does
        self._handles: dict[str, DeltaTable] = {}  # what reads reload from: advanced only by the log
        self._writers: dict[str, DeltaTable] = {}  # what appends go through (see `_write_handle`)
        self.views: dict[str, TableView] = {k: TableView(k) for k in SPECS}
        self._known: dict[str, pa.Table] | None = None  # kind -> rows joined with system time
        self.generation = 0  # bumps whenever any view changes; caches key on it
        self._pending: set[str] = set()  # kinds holding rows of incomplete transactions
        self._log_dirs: dict[str, str] = {}
        self._checkpoints_seen: dict[str, tuple[tuple[int, int], int]] = {}  # table -> (stat, version)
        self._handle_writes: dict[str, int] = {}  # appends through each handle since it was opened
        self._own_writes: dict[str, tuple[str | None, pa.Table]] = {}  # kind -> (txn, rows) just appended
        self._direct: dict[str, tuple[int, direct_append.TableShape]] = {}  # kind -> (last version, shape)
        self._commit_gates: dict[str, CommitGate] = {}  # table -> `commit_gate`
        #: called after each append with the bytes appended per table (the maintenance policy)
        self.after_append: list[Callable[[Mapping[str, int]], None]] = []
        #: write the checkpoints direct appends ask for in a thread of their own (False: in the append)
        self.background_checkpoints = True
        self._checkpoints_asked: dict[str, int] = {}  # table -> the newest version asked for
        self._checkpointer: Worker[tuple[str, int]] = Worker(
            "memlake-checkpoint", self._next_checkpoint, lambda asked: self.write_checkpoint(*asked)
        )
        #: when reads ask the log for news (per public read, or per interval: `objectstore.Freshness`)
        self.freshness = Freshness(refresh_interval)
        self._named: set[str] = set()  # tables named by the commits a refresh just took in
        self._open_tables(create)
        #: which local tables' logs changed since a refresh last asked (None: every table is asked)
        self._watch = (
            watch_logs({kind: os.path.join(self.uri(kind), "_delta_log") for kind in SPECS}) if self.is_local else None
        )
        if self._watch is not None:
            weakref.finalize(self, self._watch.close)
        self.refresh(force=True)

    # ------------------------------------------------------------------ layout

    def uri(self, table: str) -> str:
        return f"{self.root}/{table}"

    def _open_tables(self, create: bool) -> None:
        if self.is_local:
            check_local_root(self.root, create=create)
        for kind, spec in SPECS.items():
            try:
                with storage_errors(f"open the store at {self.root}"):
                    self._handles[kind] = open_delta_table(self.uri(kind), storage_options=self.storage_options)
            except TableNotFoundError:
                if self.is_local and (Path(self.uri(kind)) / "_delta_log").is_dir():
                    raise StoreError(
                        f"cannot read the store at {self.root}: table {kind} has a log that cannot be read"
                    ) from None
                if not create:
                    raise StoreError(
                        f"no memory store at {self.root} (table {kind} missing): "
                        f"memlake init --store {self.root} creates one"
                    ) from None
                with storage_errors(f"create the store at {self.root}"):
                    self._handles[kind] = DeltaTable.create(
                        self.uri(kind),
                        schema=spec.schema,
                        partition_by=["org"],
                        mode="ignore",
                        configuration=TABLE_CONFIG,
                        storage_options=self.storage_options or None,
                    )

    # ------------------------------------------------------------------ writes

    def append(self, tables: Mapping[str, pa.Table], metadata: Mapping[str, str]) -> dict[str, int]:
        """`_append`, with the storage layer's errors (permission denied, disk full) as `StoreError`."""
        with storage_errors(f"write to the store at {self.root}"):
            return self._append(tables, metadata)

    def _append(self, tables: Mapping[str, pa.Table], metadata: Mapping[str, str]) -> dict[str, int]:
        """Blind-append each table's rows in one commit per table; return the new versions.

        The append goes through this process's warm table handle (loading a table by
        path replays its log: ~20 ms at a few dozen commits). If another writer committed
        in between and the handle's commit fails, the append is repeated by path, where
        delta-rs retries at the next version. A multi-table transaction is visible only
        once all its parts are committed (see `_complete`).
        """
        txn = metadata.get(META_PREFIX + "txn_id")
        for kind in sorted(tables):
            data = tables[kind]
            if data.num_rows == 0:
                continue
            with self.commit_gate(kind).appending():
                self._append_one(kind, data, metadata)
            self._own_writes[kind] = (txn, data)
        try:
            self.refresh(kinds=list(tables))
        finally:
            self._own_writes.clear()
        versions = {
            k: c.version for k in tables for c in [self.views[k].by_txn.get(txn) if txn else None] if c is not None
        }
        for hook in list(self.after_append):
            hook({k: t.nbytes for k, t in tables.items() if t.num_rows})
        return versions

    def _append_one(self, kind: str, data: pa.Table, metadata: Mapping[str, str]) -> None:
        """One table's part of `_append`: one commit, directly or through delta-rs."""
        if self._append_directly(kind, data, metadata):
            return
        props = CommitProperties(custom_metadata=dict(metadata))
        # delta-rs writes the interval's checkpoint inside the append (~23 ms every tenth
        # 1,000-record batch at 100k) and fails an append that landed when the checkpoint
        # fails: the checkpoint is asked of this store's own checkpointer instead
        hooks = PostCommitHookProperties(create_checkpoint=False)
        handle = self._write_handle(kind)
        try:
            write_deltalake(handle, data, mode="append", commit_properties=props, post_commithook_properties=hooks)
        except CommitFailedError:
            # landed at a version this handle does not know; the next interval's checkpoint
            # (or maintenance's) covers it
            write_deltalake(
                self.uri(kind),
                data,
                mode="append",
                commit_properties=props,
                post_commithook_properties=hooks,
                storage_options=self.storage_options or None,
            )
            return
        version = handle.version()
        if version % _checkpoint_interval(handle) == 0:
            self._checkpoint_after_append(kind, version)

    def commit_gate(self, table: str) -> CommitGate:
        """This process's turns between appends to *table* and its rewrites (`commit_gate.CommitGate`)."""
        with self._lock:
            return self._commit_gates.setdefault(table, CommitGate())

    def _append_directly(self, kind: str, data: pa.Table, metadata: Mapping[str, str]) -> bool:
        """Append *data* to a local table without delta-rs (`direct_append`); False when delta-rs must,
        or is the faster writer (an append over more than `direct_append.MAX_PARTITIONS` orgs).

        The table's shape and the last version this process saw are kept per table; the
        first append (and the one after a fallback) reads them from the write handle. Every
        ``delta.checkpointInterval``-th version this writes gets its checkpoint from
        delta-rs, as delta-rs's own appends do.
        """
        if not (self.is_local and self.direct_appends):
            return False
        state = self._direct.get(kind)
        try:
            if state is None or not data.schema.equals(state[1].schema):
                handle = self._write_handle(kind)
                table_schema = pa.schema(handle.schema().to_arrow())
                shape = direct_append.table_supported(handle.protocol(), handle.metadata(), table_schema, data.schema)
                state = (handle.version(), shape)
            after, shape = state
            if not direct_append.faster_here(data, shape):  # a batch over many orgs: delta-rs writes it faster
                self._direct[kind] = state
                return False
            version = direct_append.append(self.uri(kind), data, shape, metadata, after=after)
        except direct_append.DirectAppendUnsupported as refused:
            self._direct.pop(kind, None)
            if refused.for_good:
                self.direct_appends = False
            return False
        self._direct[kind] = (version, shape)
        if version % shape.checkpoint_interval == 0:
            self._checkpoint_after_append(kind, version)
        return True

    def _checkpoint_after_append(self, kind: str, version: int) -> None:
        """The checkpoint delta-rs writes after every ``delta.checkpointInterval``-th commit, for an
        append's commit (`direct_append`'s, or delta-rs's with its own checkpoint switched off):
        handed to a thread of its own (`background_checkpoints`),
        since bringing a handle to the new version and writing the checkpoint took 40-100 ms
        at 4,000 commits, on every tenth append (most of the p90 of single writes)."""
        if not self.background_checkpoints:
            self.write_checkpoint(kind, version)
            return
        with self._checkpointer.lock:
            self._checkpoints_asked[kind] = max(version, self._checkpoints_asked.get(kind, version))
            self._checkpointer.kick()

    def _next_checkpoint(self) -> tuple[str, int] | None:
        """The checkpoint worker's next (table, version): of the versions asked for a table
        before its turn, the newest."""
        if not self._checkpoints_asked:
            return None
        kind = next(iter(self._checkpoints_asked))
        return kind, self._checkpoints_asked.pop(kind)

    def write_checkpoint(self, kind: str, version: int) -> None:
        """Write a checkpoint of *kind* at *version*, from a handle of its own. The
        commit it follows has landed whatever happens here, so a failure must not fail the
        write: a checkpoint is only a shortcut for readers, and the next interval (or
        maintenance) writes one. Opening retries a log pruned meanwhile (`open_delta_table`);
        so does a checkpoint whose handle's base checkpoint a prune took, once. Skipped when
        the table already has a checkpoint at or past *version* (maintenance wrote one
        meanwhile): ``_last_checkpoint`` must not move back to a version whose following
        commits maintenance may prune."""
        newest = _last_checkpoint(self.objects.read_if_exists(f"{kind}/{LAST_CHECKPOINT}"))
        if newest is not None and newest[0] >= version:
            return
        for attempt in range(2):
            try:
                open_delta_table(
                    self.uri(kind), version=version, storage_options=self.storage_options
                ).create_checkpoint()
                return
            except Exception as exc:
                if attempt == 0 and log_moved(exc):
                    continue
                log.warning("memlake: no checkpoint after the append to %s (%s); the next one writes it", kind, exc)
                return

    def stop_watching(self) -> None:
        """Let go of the watch over the tables' logs (`logwatch`): the store is closing."""
        if self._watch is not None:
            self._watch.close()

    def wait_for_checkpoints(self, timeout: float | None = None) -> bool:
        """Wait for the checkpoints appends handed to the background; False if *timeout* ran out."""
        return self._checkpointer.wait(timeout)

    def _write_handle(self, kind: str) -> DeltaTable:
        """The warm handle to append through, brought up to date only when it is behind.

        delta-rs makes each write through a handle cost more the more commits that
        handle has replayed since it was opened (~25 ms after 150, ~8 ms fresh from a
        checkpoint), and `update_incremental` costs ~10 ms even when nothing changed:
        so skip the update when a stat() shows no newer commit, and reopen the handle
        every `HANDLE_MAX_COMMITS` appends.

        Writes never go through the handle reads reload from: when another writer's
        commit lands first, delta-rs retries ours at the next version and moves the
        writing handle past the other commit without its files; a reload from that
        handle lost the other writer's rows (seen on S3 with two processes).
        """
        handle = self._writers.get(kind)
        self._handle_writes[kind] = self._handle_writes.get(kind, 0) + 1
        if handle is None or self._handle_writes[kind] >= HANDLE_MAX_COMMITS:
            self._handle_writes[kind] = 0
            handle = self._writers[kind] = open_delta_table(self.uri(kind), storage_options=self.storage_options)
            return handle
        hint = self._latest_version_hint(kind)
        if hint is None or hint != handle.version():
            try:
                handle.update_incremental()
            except Exception as exc:  # the commits it had to read next were pruned: start from the checkpoint
                if not log_moved(exc):
                    raise
                handle = self._writers[kind] = open_delta_table(self.uri(kind), storage_options=self.storage_options)
        return handle

    # ------------------------------------------------------------------ reads

    def _latest_version_hint(self, table: str) -> int | None:
        """Cheap probe for a newer commit: one stat() on a local store, else None (see `_new_commits`)."""
        if not self.is_local:
            return None
        v = self.views[table].version
        log = self._log_dirs.get(table) or self._log_dirs.setdefault(table, os.path.join(self.uri(table), "_delta_log"))
        while os.path.exists(f"{log}/{v + 1:020d}.json"):
            v += 1
        return v

    def run_read(self, read: Callable[[], T]) -> T:
        """One public read: every snapshot it reads stays in its epoch until it ends
        (`snapshot_gate`), and each table's log is asked at most once inside
        (`objectstore.Freshness`). Run again from the start when a snapshot had to move
        under it; nested reads share the outermost one's hold and probes."""

        def fresh() -> T:
            with self.freshness.reading():
                return read()

        return run_read(self.gate, fresh, self.refresh)

    def refresh(self, kinds: Iterable[str] | None = None, *, force: bool = False) -> bool:
        """Bring views up to date with the log; return True when anything changed.

        *kinds* defaults to every table. A new commit of a transaction that also wrote to
        other tables brings those in too: its rows are known once its last part is.
        Inside a public read (`reading`) a table already asked is not asked again.
        """
        changed: list[str] = []
        watch = self._watch
        with self._lock:
            unseen: dict[str, tuple[int, int]] = {}  # table -> (epoch, rows) as this refresh found it
            try:
                todo = list(kinds) if kinds is not None else list(SPECS)
                quiet: set[str] | None = None if watch is not None and not force else set()
                asked: set[str] = set()
                while todo:
                    kind = todo.pop(0)
                    if kind in asked or kind not in self.views:
                        continue
                    asked.add(kind)
                    if not force and not self.freshness.wants_probe(kind):
                        continue
                    if quiet is None:  # the tables nothing changed in since they were last asked: as if asked
                        assert watch is not None
                        quiet = watch.unchanged_of(SPECS)
                    if kind in quiet:
                        self.freshness.probed(kind)
                        todo.extend(sorted(self._awaited(kind) - asked))
                        continue
                    self._named = set()
                    view = self.views[kind]
                    unseen[kind] = (view.epoch, view.num_rows)
                    with asking(watch, kind):
                        if self._refresh_table(kind, force):
                            changed.append(kind)
                            self._pending_unchecked = True
                    self.freshness.probed(kind)
                    todo.extend(sorted((self._named | self._awaited(kind)) - asked))
                if self._pending_unchecked:  # also left over by a refresh a read let go of halfway
                    self._pending_unchecked = False
                    self._complete_pending(unseen)
            finally:  # also when a read let go of a refresh halfway (`SnapshotMoved`): what it took in counts
                if changed:
                    self._known = None
                    self.generation += 1
        return bool(changed)

    def _awaited(self, kind: str) -> set[str]:
        """The tables whose parts the incomplete transactions of *kind*'s rows wait for."""
        view = self.views[kind]
        if kind not in self._pending or view.rows is None:
            return set()
        rows = view.rows.filter(pc.is_null(view.rows.column("known_since")))
        commits = [view.by_txn.get(t) for t in pc.unique(rows.column("txn_id")).to_pylist() if t is not None]
        return {k for c in commits if c is not None for k in c.kinds}

    def _refresh_table(self, kind: str, force: bool) -> bool:
        view = self.views[kind]
        if view.rows is None or (force and not self.is_local):
            return self._reload(kind)
        if self.is_local:
            hint = self._latest_version_hint(kind)
            if hint is None or hint == view.version:
                return self._left_behind(kind) and self._reload(kind)
            try:
                news = [(v, self.log_actions(kind, v)) for v in range(view.version + 1, hint + 1)]
            except FileNotFoundError:  # maintenance pruned them meanwhile: a checkpoint covers them
                return self._reload(kind)
        else:  # one request when nothing is new (no LIST of the log), and one for the checkpoint
            news = self.objects.remote.new_commits(kind, view.version)
            if not news:
                return self._left_behind(kind) and self._reload(kind)
        return self._apply_commits(kind, news) or self._reload(kind)

    def _left_behind(self, kind: str) -> bool:
        """Whether *kind*'s newest checkpoint lies past this view, when its next commit file is missing.

        Maintenance deletes commit files below a checkpoint (`MaintenancePolicy.keep_log_versions`),
        so a view that many commits behind finds no next file although the table has moved
        on: it must reload from the checkpoint rather than take that for "nothing new". One
        stat of ``_last_checkpoint`` on a local store (read again only when it changed),
        one request on an object store.
        """
        rel = f"{kind}/{LAST_CHECKPOINT}"
        if not self.is_local:
            last = _last_checkpoint(self.objects.read_if_exists(rel))
            return last is not None and last[0] > self.views[kind].version
        try:
            st = os.stat(os.path.join(self.root, rel))
        except FileNotFoundError:
            return False
        stat = (st.st_mtime_ns, st.st_size)
        seen = self._checkpoints_seen.get(kind)
        if seen is None or seen[0] != stat:
            last = _last_checkpoint(self.objects.read_if_exists(rel))
            if last is None:  # being rewritten: the next read asks again
                return False
            seen = self._checkpoints_seen[kind] = (stat, last[0])
        return seen[1] > self.views[kind].version

    def log_actions(self, table: str, version: int) -> list[dict[str, Any]]:
        """The actions of one commit file (immutable once written): commitInfo, add, remove...

        Raises FileNotFoundError when the log has cleaned that version up.
        """
        return parse_actions(self.objects.read(f"{table}/{commit_file(version)}").decode("utf-8"))

    def _apply_commits(self, kind: str, news: list[tuple[int, list[dict[str, Any]]]]) -> bool:
        """Fast path: take in just the new commits (version, actions) and read only the files they add.

        A commit whose every file action says ``dataChange: false`` (a compaction: Delta's
        mark for "the same rows in other files") only renames the files the view holds:
        the rows, their positions and everything derived from them stay (reloading the
        100k tenants store after a compaction cost 250-330 ms, then ~20-40 ms more on the
        first read of each org, whose heads and index partition were rebuilt).
        Returns False when a commit removes rows or changes the table's metadata (a purge,
        a delete): the caller then reloads the whole snapshot.
        """
        view = self.views[kind]
        commits, adds = [], []
        moved_in: set[str] = set()
        moved_out: set[str] = set()
        for version, actions in news:
            rearranges = _rearranges(actions)
            for action in actions:
                if "metaData" in action or ("remove" in action and not rearranges):
                    return False
                if "commitInfo" in action:
                    commits.append(_parse_commit(kind, {**action["commitInfo"], "version": version}))
                elif "remove" in action:
                    moved_out.add(unquote(action["remove"]["path"]))
                elif "add" in action and rearranges:
                    moved_in.add(unquote(action["add"]["path"]))
                elif "add" in action:
                    adds.append(action["add"])
        added = {unquote(a["path"]) for a in adds}
        # a file this view never took in: it cannot vouch for the rows (no copy of view.paths,
        # here or below: both copies cost a refresh ~0.03 ms at 2,000 files, and grow with the files)
        if any(p not in view.paths and p not in added and p not in moved_in for p in moved_out):
            return False
        for commit in commits:
            self._record_commit(view, commit)
        schema = SPECS[kind].schema
        parts = []
        own_txn, own_rows = self._own_writes.get(kind, (None, None))
        if own_rows is not None and adds and [c.txn_id for c in commits] == [own_txn]:
            # our own append (one file per org partition it touched): the rows are the ones just
            # written, no need to read them back (a batch mixing 20 orgs read 20 files: ~9 ms)
            view.paths.update(unquote(add["path"]) for add in adds)
            adds, parts = [], [conform(own_rows, schema)]
        if adds and not self.is_local:
            parts.append(
                self.objects.remote.read_data_files(kind, [(a["path"], a.get("partitionValues")) for a in adds], schema)
            )
            view.paths.update(unquote(add["path"]) for add in adds)
            adds = []
        for add in adds:
            path = unquote(add["path"])
            data = pq.read_table(Path(self.uri(kind)) / path)
            for col, value in (add.get("partitionValues") or {}).items():
                if col not in data.column_names:
                    data = data.append_column(col, pa.array([value] * data.num_rows, pa.string()))
            parts.append(conform(data, schema))
            view.paths.add(path)
        if parts:
            self._append_chunk(view, pa.concat_tables(parts))
        view.paths |= moved_in  # in place: nothing else holds the set
        view.paths -= moved_out
        view.version = news[-1][0]
        return True

    def _commits_between(self, kind: str, dt: DeltaTable, after: int, upto: int) -> list[Commit]:
        """The commits ``after < v <= upto``, oldest first, each read from the version's own
        (immutable) commit file.

        Not from ``history()``: it numbers the commits it lists from the handle's snapshot
        version, so commits another writer landed meanwhile came back under the wrong
        version numbers and their rows never got a system time (seen on S3 with two
        processes). A store opening takes what ``_commits`` recorded instead of re-reading
        thousands of commit files, and a commit file the log has cleaned up is read from
        there (`commitlog`); ``history()`` is the last resort.
        """
        recorded = self.commit_record.commits(kind, refresh=False) if after < 0 else {}
        out, missing = [], []
        for version in range(after + 1, upto + 1):
            if version in recorded:
                out.append(recorded[version])
                continue
            try:
                actions = self.log_actions(kind, version)
            except (FileNotFoundError, OSError):
                missing.append(version)
                continue
            info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
            out.append(_parse_commit(kind, {**info, "version": version}))
        if missing:
            recorded = self.commit_record.commits(kind)
            out.extend(recorded[v] for v in missing if v in recorded)
            still = {v for v in missing if v not in recorded}
            if still:
                out.extend(_parse_commit(kind, e) for e in dt.history() if int(e["version"]) in still)
        return sorted(out, key=lambda c: c.version)

    def _reload(self, kind: str) -> bool:
        """Slow path: the whole snapshot through delta-rs (first open, remote stores, rewrites)."""
        view = self.views[kind]
        dt = self._handles[kind]
        try:
            dt.update_incremental()
        except Exception:  # a handle can go stale after rewrites elsewhere: reopen it
            dt = self._handles[kind] = open_delta_table(self.uri(kind), storage_options=self.storage_options)
        version = dt.version()
        if version == view.version:
            return False
        adds = pa.table(dt.get_add_actions(flatten=False))
        current = {unquote(p) for p in adds.column("path").to_pylist()} if adds.num_rows else set()
        schema = SPECS[kind].schema
        whole = view.rows is None or not view.paths <= current
        if whole and view.rows is not None:
            move = self.gate.may_move()  # a new epoch: not under a read in flight (`snapshot_gate`)
            if move == "again":  # waited for the reads in flight, the lock let go: look again
                return self._reload(kind)
            if move == "later":
                return False
        for commit in self._commits_between(kind, dt, view.version, version):
            self._record_commit(view, commit)
        if whole:
            view.epoch += 1
            view.spans = []
            view.rows = None
        if not self.is_local:  # every file read whole through delta-rs's handler: no pyarrow dataset scan
            paths = adds.column("path").to_pylist() if adds.num_rows else []
            parts = adds.column("partition").to_pylist() if "partition" in adds.column_names else [None] * len(paths)
            wanted = [(p, part) for p, part in zip(paths, parts, strict=True) if whole or unquote(p) not in view.paths]
            fresh = self.objects.remote.read_data_files(kind, wanted, schema)
        elif whole:
            fresh = dt.to_pyarrow_dataset().to_table()
        else:
            dataset = dt.to_pyarrow_dataset()
            new = current - view.paths
            frags = [f for f in dataset.get_fragments() if unquote(_rel(f.path)) in new]
            fresh = (
                pads.FileSystemDataset(frags, dataset.schema, dataset.format, dataset.filesystem).to_table()
                if frags
                else schema.empty_table()
            )
        self._append_chunk(view, conform(fresh, schema))
        view.paths = current
        view.version = version
        return True

    def _record_commit(self, view: TableView, commit: Commit) -> None:
        """Record a commit; call in version order.

        System time never runs backwards along a table's versions: a writer whose clock
        lagged (another process, or a commit that landed after a retry) is known from the
        latest reading before it, so an as-of read always sees a prefix of the versions.
        """
        if commit.is_memory:
            if view.high_water is not None and commit.committed_at < view.high_water:
                commit = replace(commit, committed_at=view.high_water)
            view.high_water = commit.committed_at
        view.commits[commit.version] = commit
        self._named.update(commit.kinds)
        if commit.txn_id:
            view.by_txn.setdefault(commit.txn_id, commit)
        if commit.is_memory:
            self.clock.observe(commit.committed_at)

    def _append_chunk(self, view: TableView, raw: pa.Table) -> None:
        chunk = self._with_system_time(view.table, raw)
        if chunk.column("known_since").null_count:
            self._pending.add(view.table)
        view.spans.append((0 if view.rows is None else view.rows.num_rows, chunk.num_rows))
        view.rows = chunk if view.rows is None else pa.concat_tables([view.rows, chunk])
        if view.rows.column(0).num_chunks > 64:  # keep take() and scans cheap; positions don't move
            _combine(view)

    def _complete_pending(self, unseen: Mapping[str, tuple[int, int]] | None = None) -> None:
        """Rows of a multi-table transaction become known when its last part lands.

        *unseen*: per table, its epoch and row count when the refresh under way began (the
        rows after them were appended by it, under the lock: no reader has met them). When
        every pending row of a table is such a row, the transaction's parts landed within
        one refresh (a `write_many` or capture mixing kinds: the writer refreshes its
        tables together), and those rows get their system time in place
        (`_completed_in_place`). Otherwise a reader may have met them unknown, and the
        view starts a new epoch, which every read structure built from it rebuilds: on the
        100k tenants store the first recall after a fact + preference `write_many` took
        ~280 ms that way, against ~3 after a write of one kind.
        """
        for kind in sorted(self._pending):
            view = self.views[kind]
            if view.rows is None or view.rows.num_rows == 0:
                self._pending.discard(kind)
                continue
            pending = pc.is_null(view.rows.column("known_since"))
            if not pc.any(pending).as_py():
                continue
            txns = set(view.rows.filter(pending).column("txn_id").to_pylist())
            if any(c is not None and c.is_memory and self._complete(c) for c in map(view.by_txn.get, txns)):
                if self._completed_in_place(view, pending, (unseen or {}).get(kind)):
                    continue
                move = self.gate.may_move()  # a new epoch: not under a read in flight (`snapshot_gate`)
                if move == "again":
                    self._complete_pending(unseen)
                    return
                if move == "later":
                    self._pending_unchecked = True
                    continue
                raw = view.rows.drop_columns(list(SYSTEM_COLUMNS))
                view.epoch += 1
                view.rows = None
                view.spans = []
                self._pending.discard(kind)
                self._append_chunk(view, raw)

    def _completed_in_place(self, view: TableView, pending: pa.ChunkedArray, found: tuple[int, int] | None) -> bool:
        """Give the rows a refresh appended their system time again, when every pending row of
        *view* is one of them (*found*: the view's epoch and row count as the refresh found
        it; a new epoch since holds no row a reader has met). Positions and spans stay: the
        rows are the same, with ``known_since`` and ``commit_version`` as a rebuild would
        compute them (`_with_system_time`). False when a reader may have met a pending row."""
        if found is None:
            return False
        epoch, rows = found
        start = rows if view.epoch == epoch else 0
        assert view.rows is not None
        if pc.any(pending.slice(0, start)).as_py():
            return False
        tail = self._with_system_time(view.table, view.rows.slice(start).drop_columns(list(SYSTEM_COLUMNS)))
        view.rows = pa.concat_tables([view.rows.slice(0, start), tail]) if start else tail
        if not tail.column("known_since").null_count:
            self._pending.discard(view.table)
        return True

    def _complete(self, commit: Commit) -> bool:
        """A transaction counts only when every table it wrote to has its part."""
        return all(commit.txn_id in self.views[k].by_txn for k in commit.kinds if k in self.views)

    def txn_known_since(self, txn_id: str) -> datetime | None:
        """System time of a transaction this store has read back (None if it has not)."""
        commit = next((v.by_txn[txn_id] for v in self.views.values() if txn_id in v.by_txn), None)
        return self._txn_time(commit) if commit is not None else None

    def _txn_time(self, commit: Commit) -> datetime:
        """A complete transaction is known once its last part is: all its rows become visible together."""
        parts = [self.views[k].by_txn.get(commit.txn_id) for k in commit.kinds if k in self.views and commit.txn_id]
        return max([commit.committed_at] + [p.committed_at for p in parts if p is not None])

    def _with_system_time(self, kind: str, rows: pa.Table) -> pa.Table:
        """Attach each row's system time (from its commit) and its actor key."""
        view = self.views[kind]

        def known(txn: str) -> datetime | None:
            c = view.by_txn.get(txn)
            return self._txn_time(c) if c is not None and c.is_memory and self._complete(c) else None

        def version(txn: str) -> int | None:
            c = view.by_txn.get(txn)
            return c.version if c is not None and known(txn) is not None else None

        txn_ids = rows.column("txn_id")
        rows = rows.append_column("known_since", _per_value(txn_ids, known, TS))
        rows = rows.append_column("commit_version", _per_value(txn_ids, version, pa.int64()))
        return rows.append_column("actor_key", _per_value(rows.column("actor"), subject_key, pa.string()))

    def snapshot(self, kind: str) -> tuple[int, pa.Table]:
        """*kind*'s epoch and its rows (`all_rows`), read together: a consumer keeping a cursor
        (epoch, rows seen) must not pair an epoch with rows a later append grew (`appended`)."""
        with self._lock:
            return self.views[kind].epoch, self.all_rows(kind)

    def appended(self, kind: str) -> tuple[int, AppendedChunks]:
        """*kind*'s epoch and the tables appended since it began, read together.

        A view's rows, spans and epoch change together under this lock (a write's refresh in
        another thread appends while reads run). Read apart, a consumer could pair the rows
        of one moment with the spans of the next: the DuckDB mirror counted a chunk it had
        not inserted as applied, gave every later row the position of another, and an
        initech reader was served globex's rows until the next epoch
        (tests/test_snapshot_gate.py).
        """
        with self._lock:
            view = self.views[kind]
            return view.epoch, AppendedChunks(view.rows, list(view.spans))

    def slot_rows(self, kind: str) -> SlotRows:
        """Where each slot's rows are in the snapshot (`all_rows`), as of now: every lineage id with
        a row (a superset of the live ones), and the positions of a slot's rows. Kept up with the
        appended chunks; rebuilt when a rewrite starts a new epoch. `slot_positions` reads the
        positions under this lock, so no append lands in between."""
        return self._followed(kind, "lineage_id", SlotRows)

    def slot_positions(self, kind: str, lineage_ids: Iterable[str]) -> np.ndarray:
        """The positions in `all_rows` of every row of those slots, ascending (`SlotRows`)."""
        with self._lock:
            slots = self.slot_rows(kind)
            assert slots.rows == self.views[kind].num_rows
            return slots.positions(lineage_ids)

    def id_rows(self, kind: str) -> IdRows:
        """A hash of each row's record id in the snapshot (`all_rows`), as of now: kept up with the
        appended chunks, rebuilt when a rewrite starts a new epoch (as `slot_rows`)."""
        return self._followed(kind, "record_id", IdRows)

    def _followed(self, kind: str, column: str, make: Callable[[], _Follower]) -> _Follower:
        """*kind*'s index of *column* made by *make* (`SlotRows`, `IdRows`), as of now: the chunks
        appended since it was last asked taken in (``extend``), made anew on a new epoch
        (a rewrite moves rows)."""
        view = self.views[kind]
        with self._lock:
            epoch, chunks = self.appended(kind)
            (at_epoch, applied), index = view.followers.get(column, ((-1, 0), None))
            if index is None or at_epoch != epoch:
                index, applied = make(), 0
            for chunk in chunks[applied:]:
                index.extend(chunk.column(column))
            view.followers[column] = ((epoch, len(chunks)), index)
            follower: _Follower = index
            return follower

    def id_positions(self, kind: str, record_ids: Iterable[str]) -> np.ndarray:
        """The positions in `all_rows` of the rows with those record ids, ascending: the rows
        whose id's hash is one of theirs (`IdRows`), kept if their id is one of them. The ids
        are hashed once a process first asks (~0.1 s at 1M rows), not by a process that only
        reads or writes."""
        wanted = list(dict.fromkeys(record_ids))
        if not wanted:
            return np.empty(0, dtype=np.int64)
        with self._lock:
            ids = self.id_rows(kind)
            assert ids.rows == self.views[kind].num_rows
            at = ids.candidates(wanted)
            found = take_rows(self.all_rows(kind).select(["record_id"]), at).column("record_id")
        same = np.asarray(pc.is_in(found, value_set=pa.array(wanted, pa.string())).to_numpy(zero_copy_only=False))
        positions: np.ndarray = at[same.astype(bool)].astype(np.int64)
        return positions

    def all_rows(self, kind: str) -> pa.Table:
        """Every row of the snapshot with its system-time columns (null while incomplete).

        Reads take rows by position, and a take costs per chunk and column (36 chunks x
        30 columns: ~4 ms, one chunk: ~0.1 ms), so the first read after a few appends
        combines them; positions do not move. Only the appended tail is combined (copying
        100k rows after every few single writes cost a read ~10 ms), until it outgrows a
        quarter of the first chunk.
        """
        view = self.views[kind]
        if view.rows is None:
            return self._with_system_time(kind, SPECS[kind].schema.empty_table())
        if view.rows.column(0).num_chunks > MAX_READ_CHUNKS:
            with self._lock:
                _combine(view)
        return view.rows

    def known_rows(self, kind: str) -> pa.Table:
        """Rows of *kind* with their system time: ``known_since``, ``commit_version``, ``actor_key``.

        Rows of an incomplete transaction (a crashed multi-table batch) are left out.
        """
        with self._lock:
            if self._known is None:
                self._known = {}
            if kind not in self._known:
                rows = self.all_rows(kind)
                if rows.column("known_since").null_count:
                    rows = rows.filter(pc.is_valid(rows.column("known_since")))
                self._known[kind] = rows  # no copy when every row is known (a filter copies: 45 MB at 100k)
            return self._known[kind]

    def commits(self) -> list[Commit]:
        """Every commit of every table, oldest first (by clock, then table version)."""
        with self._lock:
            out = [c for v in self.views.values() for c in v.commits.values()]
        return sorted(out, key=lambda c: (c.committed_at, c.table, c.version))

    def memory_commit_at(self, table: str, at: datetime) -> Commit | None:
        """The last *memory* commit of *table* at or before *at* (maintenance commits skipped)."""
        best = None
        for c in self.views[table].commits.values():
            if c.is_memory and c.committed_at <= at and (best is None or c.version > best.version):
                best = c
        return best

    def load_as_version(self, table: str, version: int) -> pa.Table:
        """Rows of *table* exactly as Delta time travel gives them at *version*."""
        dt = open_delta_table(self.uri(table), version=version, storage_options=self.storage_options)
        schema = SPECS[table].schema
        if not self.is_local:
            return self.objects.remote.read_delta_table(dt, table, schema)
        return conform(dt.to_pyarrow_dataset().to_table(), schema)

    def handle(self, table: str) -> DeltaTable:
        """The table's delta-rs handle, at least at the version the snapshot has read."""
        dt = self._handles[table]
        with self._lock:
            if dt.version() < self.views[table].version:  # reads advance the view without it
                dt.update_incremental()
        return dt

    @contextmanager
    def maintenance_lock(self, table: str) -> Iterator[None]:
        """Serialise file-rewriting operations on one table across processes (local stores).

        Appends never take it: they are blind and retry themselves. On object stores
        delta-rs's optimistic commit is the only guard; a rewrite that loses fails with
        delta-rs's commit conflict and can be retried.
        """
        if not self.is_local:
            yield
            return
        import fcntl

        lock_dir = Path(self.root) / "_locks"
        lock_dir.mkdir(exist_ok=True)
        with open(lock_dir / f"{table}.lock", "a") as fh:  # "a": taking the lock changes no file
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _removals(self, table: str) -> tuple[list[str], list[str]]:
        """(files live tombstones name, files any rewrite commit still in the log names).

        Two sources, because the log forgets. The newest checkpoint keeps a tombstone for
        every file removed within ``delta.deletedFileRetentionDuration``, including files
        whose commit files the log's cleanup has deleted; the rewrite commits still in the
        log (compactions, purges: the snapshot knows their operation) name the rest, and
        those after the checkpoint are live tombstones too. Costs one read of the
        checkpoint and one per rewrite commit still in the log.
        """
        version, live = self._checkpoint_tombstones(table)
        with self._lock:
            versions = sorted(v for v, c in self.views[table].commits.items() if c.operation in REWRITE_OPERATIONS)
        named: list[str] = []
        for v in versions:
            try:
                lines = self.log_actions(table, v)
            except (FileNotFoundError, OSError):  # cleaned up with the log: the checkpoint has its tombstones
                continue
            paths = [unquote(a["remove"]["path"]) for a in lines if "remove" in a]
            named += paths
            if v > version:
                live += paths
        return live, named

    def unreferenced_files(self, table: str, *, older_than: float = IN_FLIGHT_GRACE_SECONDS) -> Unreferenced:
        """*table*'s data files (paths relative to it) that the current snapshot does not refer to.

        `Unreferenced.named`: those the log names as removed (`_removals`);
        `Unreferenced.expired`: those no live tombstone names (Delta's vacuum deletes the
        others once their removal is old enough), written more than *older_than* seconds
        ago and never less than `IN_FLIGHT_GRACE_SECONDS` (a younger one may be an append
        in flight). Call after a refresh.
        """
        referenced = set(self.views[table].paths)
        live, named = self._removals(table)
        bound = time.time() - max(float(older_than), IN_FLIGHT_GRACE_SECONDS)
        data = {
            path[len(table) + 1 :]: at
            for path, at in self.objects.modified(table).items()
            if path.endswith(".parquet") and not path.startswith(f"{table}/_delta_log/")
        }
        unreferenced = [rel for rel in data if rel not in referenced]
        names, tombstones = {*live, *named}, set(live)
        return Unreferenced(
            named=[rel for rel in unreferenced if rel in names],
            expired=[rel for rel in unreferenced if rel not in tombstones and data[rel] < bound],
        )

    def _checkpoint_tombstones(self, table: str) -> tuple[int, list[str]]:
        """The version of *table*'s newest checkpoint and the paths its tombstones name
        ((-1, []) without one)."""
        last = _last_checkpoint(self.objects.read_if_exists(f"{table}/{LAST_CHECKPOINT}"))
        if last is None:
            return -1, []
        version, parts = last
        names = (
            [f"{version:020d}.checkpoint.parquet"]
            if parts == 1
            else [f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)]
        )
        paths: list[str] = []
        for name in names:
            try:
                data = pq.read_table(
                    pa.BufferReader(self.objects.read(f"{table}/_delta_log/{name}")), columns=["remove"]
                )
            except (FileNotFoundError, OSError):
                return -1, []  # a newer checkpoint replaced it meanwhile: the commit files name the rest
            removes = data.column("remove").combine_chunks()
            paths += [unquote(p) for p in pc.struct_field(removes, "path").to_pylist() if p is not None]
        return version, paths

    def files(self) -> list[Path]:
        """Every file under a local store root (object stores: `objects.list()`)."""
        if not self.is_local:
            raise StoreError("file paths exist only for local stores; use lake.objects.list() on object stores")
        return [p for p in Path(self.root).rglob("*") if p.is_file()]


def _rel(path: str) -> str:
    return path.lstrip("/")
