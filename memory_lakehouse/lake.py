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

Reads go through a warm, incrementally refreshed snapshot per table (`TableView`):
new commits are read file by file; a rewrite (purge, optimize) triggers a full reload.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from .errors import StoreError
from .records import SPECS, STATS_COLUMNS, TS, subject_key
from .time import StoreClock

META_PREFIX = "memlake."
LOG_RETENTION = "interval 36500 days"

TABLE_CONFIG: dict[str, str] = {
    "delta.dataSkippingStatsColumns": ",".join(STATS_COLUMNS),
    "delta.logRetentionDuration": LOG_RETENTION,
    "delta.enableExpiredLogCleanup": "false",
    "delta.enableChangeDataFeed": "false",
    "delta.enableDeletionVectors": "false",
    "delta.appendOnly": "false",  # purge must be able to rewrite files
}

#: Operations that add memory (learning). Everything else is maintenance or governance.
MEMORY_OPS = frozenset({"write", "propose", "approve", "retract"})


@dataclass(frozen=True)
class Commit:
    """One Delta commit of one table, as the store reads it back from the log."""

    table: str
    version: int
    txn_id: Optional[str]
    committed_at: datetime  # the store clock's reading (system time)
    operation: str  # write/propose/approve/retract/forget/purge, or a Delta maintenance op
    actor: Optional[str]
    reason: Optional[str]
    writers: tuple[str, ...]
    kinds: tuple[str, ...]  # every table this transaction appended to
    record_count: int

    @property
    def is_memory(self) -> bool:
        return self.operation in MEMORY_OPS


def _parse_commit(table: str, entry: Mapping[str, Any]) -> Commit:
    meta = {k[len(META_PREFIX):]: v for k, v in entry.items() if k.startswith(META_PREFIX)}
    if "committed_at" in meta:
        committed_at = datetime.fromisoformat(meta["committed_at"])
    else:  # a commit by another engine, or maintenance: Delta's own timestamp (epoch ms)
        committed_at = datetime.fromtimestamp(int(entry.get("timestamp", 0)) / 1000, tz=timezone.utc)
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


def commit_metadata(
    *, txn_id: str, committed_at: datetime, op: str, actor: str, reason: Optional[str],
    writers: Iterable[str] = (), kinds: Iterable[str] = (), records: int = 0,
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


def new_txn_id() -> str:
    return "txn_" + uuid.uuid4().hex


@dataclass
class TableView:
    """A warm snapshot of one table: its rows and its commits, refreshed incrementally."""

    table: str
    version: int = -1
    paths: set[str] = field(default_factory=set)
    rows: Optional[pa.Table] = None
    commits: dict[int, Commit] = field(default_factory=dict)
    by_txn: dict[str, Commit] = field(default_factory=dict)


class Lake:
    """The store's Delta tables under one root (a local path or an object-store URI)."""

    def __init__(self, root: str, *, storage_options: Optional[dict[str, str]] = None,
                 clock: Optional[StoreClock] = None, create: bool = True) -> None:
        self.root = str(root).rstrip("/")
        self.storage_options = dict(storage_options or {})
        self.is_local = "://" not in self.root or self.root.startswith("file://")
        if self.is_local:
            self.root = str(Path(self.root.removeprefix("file://")).absolute())
        self.clock = clock or StoreClock()
        self._lock = threading.RLock()
        self._handles: dict[str, DeltaTable] = {}
        self.views: dict[str, TableView] = {k: TableView(k) for k in SPECS}
        self._known: Optional[dict[str, pa.Table]] = None  # kind -> rows joined with system time
        self.generation = 0  # bumps whenever any view changes; caches key on it
        self._open_tables(create)
        self.refresh(force=True)

    # ------------------------------------------------------------------ layout

    def uri(self, table: str) -> str:
        return f"{self.root}/{table}"

    def _open_tables(self, create: bool) -> None:
        if self.is_local:
            Path(self.root).mkdir(parents=True, exist_ok=True)
        for kind, spec in SPECS.items():
            try:
                self._handles[kind] = DeltaTable(self.uri(kind), storage_options=self.storage_options or None)
            except TableNotFoundError:
                if not create:
                    raise StoreError(f"no memory store at {self.root} (table {kind} missing); run `memlake init`")
                self._handles[kind] = DeltaTable.create(
                    self.uri(kind), schema=spec.schema, partition_by=["org"], mode="ignore",
                    configuration=TABLE_CONFIG, storage_options=self.storage_options or None,
                )

    # ------------------------------------------------------------------ writes

    def append(self, tables: Mapping[str, pa.Table], metadata: Mapping[str, str]) -> dict[str, int]:
        """Blind-append each table's rows in one commit per table; return the new versions.

        Appends go by path, so a concurrent writer's commit makes delta-rs retry at the
        next version instead of failing. A multi-table transaction is visible only once
        all its parts are committed (see `_complete`).
        """
        for kind in sorted(tables):
            data = tables[kind]
            if data.num_rows == 0:
                continue
            write_deltalake(
                self.uri(kind), data, mode="append",
                commit_properties=CommitProperties(custom_metadata=dict(metadata)),
                storage_options=self.storage_options or None,
            )
        self.refresh(kinds=list(tables), force=True)
        txn = metadata.get(META_PREFIX + "txn_id")
        return {k: c.version for k in tables for c in [self.views[k].by_txn.get(txn)] if c is not None}

    # ------------------------------------------------------------------ reads

    def _latest_version_hint(self, table: str) -> Optional[int]:
        """Cheap probe for a newer commit: one stat() on a local store, else None (ask Delta)."""
        if not self.is_local:
            return None
        view = self.views[table]
        v = view.version
        log = Path(self.uri(table)) / "_delta_log"
        while (log / f"{v + 1:020d}.json").exists():
            v += 1
        return v

    def refresh(self, kinds: Optional[Iterable[str]] = None, *, force: bool = False) -> bool:
        """Bring views up to date with the log; return True when anything changed."""
        changed = False
        with self._lock:
            for kind in list(kinds) if kinds is not None else list(SPECS):
                hint = self._latest_version_hint(kind)
                if not force and hint is not None and hint == self.views[kind].version:
                    continue
                changed |= self._refresh_table(kind)
            if changed:
                self._known = None
                self.generation += 1
        return changed

    def _refresh_table(self, kind: str) -> bool:
        dt = self._handles[kind]
        view = self.views[kind]
        try:
            dt.update_incremental()
        except Exception:  # a handle can go stale after rewrites elsewhere: reopen it
            dt = self._handles[kind] = DeltaTable(self.uri(kind), storage_options=self.storage_options or None)
        version = dt.version()
        if version == view.version:
            return False
        for entry in dt.history(None if view.version < 0 else version - view.version):
            if int(entry["version"]) > view.version:
                commit = _parse_commit(kind, entry)
                view.commits[commit.version] = commit
                if commit.txn_id:
                    view.by_txn.setdefault(commit.txn_id, commit)
                if commit.is_memory:
                    self.clock.observe(commit.committed_at)
        adds = pa.table(dt.get_add_actions(flatten=False))
        current = set(adds.column("path").to_pylist()) if adds.num_rows else set()
        dataset = dt.to_pyarrow_dataset()
        schema = SPECS[kind].schema
        if view.rows is None or not view.paths <= current:
            rows = dataset.to_table()  # first load, or files were rewritten/removed
        else:
            new = current - view.paths
            frags = [f for f in dataset.get_fragments() if _rel(f.path) in new]
            fresh = pads.FileSystemDataset(frags, dataset.schema, dataset.format, dataset.filesystem).to_table() \
                if frags else schema.empty_table()
            rows = pa.concat_tables([view.rows, fresh.select(schema.names).cast(schema)])
        view.rows = rows.select(schema.names).cast(schema)
        view.paths = current
        view.version = version
        return True

    def _complete(self, commit: Commit) -> bool:
        """A transaction counts only when every table it wrote to has its part."""
        return all(commit.txn_id in self.views[k].by_txn for k in commit.kinds if k in self.views)

    def known_rows(self, kind: str) -> pa.Table:
        """Rows of *kind* with their system time: ``known_since`` and ``commit_version``.

        Rows of an incomplete transaction (a crashed multi-table batch) are left out.
        """
        with self._lock:
            if self._known is None:
                self._known = {}
            if kind not in self._known:
                self._known[kind] = self._join_system_time(kind)
            return self._known[kind]

    def _join_system_time(self, kind: str) -> pa.Table:
        view = self.views[kind]
        rows = view.rows if view.rows is not None else SPECS[kind].schema.empty_table()
        txns = [t for t, c in view.by_txn.items() if c.is_memory and self._complete(c)]
        known = pa.array([view.by_txn[t].committed_at for t in txns], TS)
        versions = pa.array([view.by_txn[t].version for t in txns], pa.int64())
        idx = pc.index_in(rows.column("txn_id"), value_set=pa.array(txns, pa.string()))
        rows = rows.append_column("known_since", pc.take(known, idx))
        rows = rows.append_column("commit_version", pc.take(versions, idx))
        rows = rows.filter(pc.is_valid(idx))
        actors = rows.column("actor")
        distinct = [a for a in pc.unique(actors).to_pylist() if a is not None]
        keys = pa.array([subject_key(a) for a in distinct], pa.string())
        rows = rows.append_column("actor_key", pc.take(keys, pc.index_in(actors, value_set=pa.array(distinct, pa.string()))))
        return rows

    def commits(self) -> list[Commit]:
        """Every commit of every table, oldest first (by clock, then table version)."""
        with self._lock:
            out = [c for v in self.views.values() for c in v.commits.values()]
        return sorted(out, key=lambda c: (c.committed_at, c.table, c.version))

    def memory_commit_at(self, table: str, at: datetime) -> Optional[Commit]:
        """The last *memory* commit of *table* at or before *at* (maintenance commits skipped)."""
        best = None
        for c in self.views[table].commits.values():
            if c.is_memory and c.committed_at <= at and (best is None or c.version > best.version):
                best = c
        return best

    def load_as_version(self, table: str, version: int) -> pa.Table:
        """Rows of *table* exactly as Delta time travel gives them at *version*."""
        dt = DeltaTable(self.uri(table), version=version, storage_options=self.storage_options or None)
        schema = SPECS[table].schema
        return dt.to_pyarrow_dataset().to_table().select(schema.names).cast(schema)

    def handle(self, table: str) -> DeltaTable:
        return self._handles[table]

    def files(self) -> list[Path]:
        """Every file under a local store root (for byte scans and size reports)."""
        if not self.is_local:
            raise StoreError("file listing is only available for local stores")
        return [p for p in Path(self.root).rglob("*") if p.is_file()]


def _rel(path: str) -> str:
    return path.lstrip("/")
