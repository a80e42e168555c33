"""`_commits`: the durable, content-free record of every commit's system time.

System time comes from the Delta log: a row is known from the commit whose txn id it
carries (`lake.Commit`). The log is the source, but two things make it a poor *only*
home for that record over years:

* Delta deletes commit files older than ``delta.logRetentionDuration`` once a
  checkpoint covers them (when expired-log cleanup is on), and the checkpoint keeps the
  table's files, not the commits' metadata: the store clock's reading would be gone;
* outside engines (polars, DuckDB, Spark) read a table's snapshot, not its commit
  metadata, so they cannot tell when a row became known.

So maintenance copies the log's commit metadata into a Delta table of its own,
``<root>/_commits``: one row per commit of each memory table (``table, version,
txn_id, committed_at, operation, actor, reason, writers, kinds, records``), the same
fields the log holds and nothing more (no row content: file statistics only on
``version`` and ``committed_at``). It is written before any checkpoint may let the log
forget a version (`maintenance.Maintenance.checkpoint`), the lake reads it back for
versions whose commit file is gone (and, on open, instead of re-reading every commit
file), and outside engines join rows to it on ``txn_id`` (docs/outside-engines.md).
A copy is only ever appended; two processes copying the same commit write identical
rows, and readers keep one per ``(table, version)``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from .objectstore import open_delta_table, read_table_rows
from .records import TS

if TYPE_CHECKING:
    from .lake import Commit

#: Where the record lives under the store root.
COMMITS_TABLE = "_commits"

COMMITS_SCHEMA = pa.schema(
    [
        pa.field("table", pa.string(), nullable=False),
        pa.field("version", pa.int64(), nullable=False),
        pa.field("txn_id", pa.string()),
        pa.field("committed_at", TS, nullable=False),  # the store clock's reading, as the store read it
        pa.field("operation", pa.string(), nullable=False),
        pa.field("actor", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("writers", pa.list_(pa.string())),
        pa.field("kinds", pa.list_(pa.string())),  # every table the transaction appended to
        pa.field("records", pa.int64()),
    ]
)

COMMITS_CONFIG = {
    "delta.dataSkippingStatsColumns": "version,committed_at",
    "delta.logRetentionDuration": "interval 36500 days",
    "delta.enableExpiredLogCleanup": "false",
    "delta.enableChangeDataFeed": "false",
    "delta.enableDeletionVectors": "false",
    "delta.checkpointInterval": "10",
}


class CommitRecord:
    """The ``_commits`` table of one store: read what is recorded, append what is not yet."""

    def __init__(self, uri: str, *, storage_options: dict[str, str] | None = None) -> None:
        self.uri = uri
        self.storage_options = storage_options or None
        self._lock = threading.RLock()
        self._dt: DeltaTable | None = None
        self._version = -2
        self._rows: pa.Table | None = None

    def _table(self, *, create: bool = False) -> DeltaTable | None:
        """The table, or None while nothing was ever recorded (reading never creates it)."""
        if self._dt is None:
            try:
                self._dt = open_delta_table(self.uri, storage_options=self.storage_options)
            except TableNotFoundError:
                if not create:
                    return None
                self._dt = DeltaTable.create(
                    self.uri,
                    schema=COMMITS_SCHEMA,
                    mode="ignore",
                    configuration=COMMITS_CONFIG,
                    storage_options=self.storage_options,
                )
        return self._dt

    def rows(self, *, refresh: bool = True) -> pa.Table:
        """Every recorded commit, one row per ``(table, version)``, in version order per table.

        ``refresh=False`` answers from what this handle read last (a store opening reads
        it once for all its tables)."""
        with self._lock:
            if not refresh and self._rows is not None:
                return self._rows
            dt = self._table()
            if dt is None:
                return COMMITS_SCHEMA.empty_table()
            try:
                dt.update_incremental()
            except Exception:  # a stale handle after a rewrite elsewhere: reopen
                dt = self._dt = open_delta_table(self.uri, storage_options=self.storage_options)
            if self._rows is None or dt.version() != self._version:
                raw = read_table_rows(dt, self.uri, self.storage_options, COMMITS_SCHEMA)
                self._rows = _unique(raw.sort_by([("table", "ascending"), ("version", "ascending")]))
                self._version = dt.version()
            return self._rows

    def watermarks(self) -> dict[str, int]:
        """Per table, the highest version recorded (every version up to it is recorded)."""
        rows = self.rows()
        if rows.num_rows == 0:
            return {}
        grouped = rows.group_by("table").aggregate([("version", "max")])
        return dict(zip(grouped.column("table").to_pylist(), grouped.column("version_max").to_pylist(), strict=True))

    def commits(self, table: str, *, refresh: bool = True) -> dict[int, Commit]:
        """The recorded commits of *table*, by version."""
        from .lake import Commit

        rows = self.rows(refresh=refresh)
        picked = rows.filter(pc.equal(rows.column("table"), table))
        out = {}
        for r in picked.to_pylist():
            out[int(r["version"])] = Commit(
                table=r["table"],
                version=int(r["version"]),
                txn_id=r["txn_id"],
                committed_at=r["committed_at"],
                operation=r["operation"],
                actor=r["actor"],
                reason=r["reason"],
                writers=tuple(r["writers"] or ()),
                kinds=tuple(r["kinds"] or ()),
                record_count=int(r["records"] or 0),
            )
        return out

    def append(self, commits: Iterable[Commit], *, committed_at: datetime) -> int:
        """Record *commits* (those not recorded yet); return how many rows were written."""
        with self._lock:
            dt = self._table(create=True)
            assert dt is not None
            marks = self.watermarks()
            new = sorted((c for c in commits if c.version > marks.get(c.table, -1)), key=lambda c: (c.table, c.version))
            if not new:
                return 0
            data = pa.Table.from_pylist(
                [
                    {
                        "table": c.table,
                        "version": c.version,
                        "txn_id": c.txn_id,
                        "committed_at": c.committed_at,
                        "operation": c.operation,
                        "actor": c.actor,
                        "reason": c.reason,
                        "writers": list(c.writers),
                        "kinds": list(c.kinds),
                        "records": c.record_count,
                    }
                    for c in new
                ],
                schema=COMMITS_SCHEMA,
            )
            meta = {
                "memlake.op": "record-commits",
                "memlake.committed_at": committed_at.isoformat(),
                "memlake.records": str(len(new)),
            }
            write_deltalake(dt, data, mode="append", commit_properties=CommitProperties(custom_metadata=meta))
            self._rows = None
            return len(new)


def _unique(rows: pa.Table) -> pa.Table:
    """One row per ``(table, version)`` (two processes may have recorded the same commit)."""
    if rows.num_rows < 2:
        return rows
    tables, versions = rows.column("table").to_pylist(), rows.column("version").to_pylist()
    keep = [i for i in range(rows.num_rows) if i == 0 or (tables[i], versions[i]) != (tables[i - 1], versions[i - 1])]
    return rows.take(pa.array(keep, pa.int64())) if len(keep) != rows.num_rows else rows
