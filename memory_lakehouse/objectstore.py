"""Objects under an object-store root, and when a read asks the log for news.

`RemoteFiles` reads, lists and deletes objects through delta-rs's own storage handler
(`deltalake._internal.DeltaFileSystemHandler`, the same client, credentials and
endpoint as the tables), called directly from the calling thread. Not through
``pyarrow.fs.PyFileSystem``: pyarrow's I/O threads calling back into that Python
filesystem could outlive a scan and abort the interpreter at exit ("terminate called
without an active exception"), and a Delta dataset scan lists the log. Data files are
read whole (one GET) and parsed in memory.

Finding a table's next commit costs one request: open ``_delta_log/<version + 1>.json``
(a HEAD; a 404 says nothing is new). delta-rs's ``update_incremental`` LISTs the log.

`Freshness` says when a read probes: once per table per public read (read-your-writes:
a store always sees its own writes, which it applies as it makes them, and by default
every public read sees what any other writer committed before it began), or, with a
refresh interval, at most once per interval (bounded staleness for read-mostly agents).
Writes, maintenance and governance always probe.
"""

from __future__ import annotations

import builtins  # `RemoteFiles.list` shadows the builtin inside the class
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from deltalake import DeltaTable


def commit_file(version: int) -> str:
    """The log file of one commit, relative to the table root."""
    return f"_delta_log/{version:020d}.json"


#: How often `open_delta_table` tries again when the log moved while it was being read.
OPEN_ATTEMPTS = 5


def open_delta_table(
    uri: str, *, storage_options: Mapping[str, str] | None = None, version: int | None = None
) -> DeltaTable:
    """``DeltaTable(uri, ...)``, tried again when a file the log named went while it was read.

    Loading a table reads ``_last_checkpoint``, lists the log, then reads the checkpoint
    and the commits after it. Maintenance (this process's background run of the policy,
    or another process's) may write a newer checkpoint and prune the older one and the
    commit files below it in between (`maintenance.Maintenance._prune_log`); delta-rs
    then fails with "... not found". A second look finds the newer checkpoint. A table
    that does not exist (`TableNotFoundError`) is not tried again.
    """
    from deltalake import DeltaTable  # looked up at call time: a test stands in for it
    from deltalake.exceptions import DeltaError, TableNotFoundError

    for attempt in range(OPEN_ATTEMPTS):
        try:
            return DeltaTable(uri, version=version, storage_options=dict(storage_options) if storage_options else None)
        except TableNotFoundError:
            raise
        except (DeltaError, FileNotFoundError) as exc:
            if attempt == OPEN_ATTEMPTS - 1 or not log_moved(exc):
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


def log_moved(exc: BaseException) -> bool:
    """Whether delta-rs failed because a log or data file it had been told of is gone (a
    concurrent prune or vacuum), rather than for a reason a second try cannot change."""
    return isinstance(exc, FileNotFoundError) or "not found" in str(exc).lower()


def parse_actions(text: str) -> list[dict[str, Any]]:
    """The actions of one commit file: commitInfo, add, remove, metaData..."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class RemoteFiles:
    """The objects under one object-store root, through delta-rs's handler (no pyarrow filesystem)."""

    def __init__(self, root: str, storage_options: Mapping[str, str] | None = None) -> None:
        from deltalake._internal import DeltaFileSystemHandler

        self.root = str(root).rstrip("/")
        self._handler = DeltaFileSystemHandler(self.root, dict(storage_options or {}) or None, None)

    def __repr__(self) -> str:
        return f"RemoteFiles({self.root!r})"

    def read(self, rel: str) -> bytes:
        """The whole object at *rel* (a HEAD, then one GET). Raises FileNotFoundError."""
        fh = self._handler.open_input_file(rel)
        data: bytes = fh.read(fh.size())
        return data

    def read_if_exists(self, rel: str) -> bytes | None:
        """The object at *rel*, or None when there is none (one request: the HEAD that finds no object)."""
        try:
            return self.read(rel)
        except FileNotFoundError:
            return None

    def list(self, prefix: str = "") -> dict[str, int]:
        """Every object under *prefix*: its path relative to the root -> its size in bytes."""
        infos = self._handler.get_file_info_selector(prefix.strip("/"), True, True)  # allow_not_found, recursive
        return {i.path.lstrip("/"): int(i.size or 0) for i in infos if i.type == pafs.FileType.File}

    def modified(self, prefix: str = "") -> dict[str, float]:
        """Every object under *prefix*: its path relative to the root -> when it was written
        (seconds since the epoch, by the object store's clock)."""
        infos = self._handler.get_file_info_selector(prefix.strip("/"), True, True)
        return {
            i.path.lstrip("/"): i.mtime.timestamp() if i.mtime is not None else 0.0
            for i in infos
            if i.type == pafs.FileType.File
        }

    def delete(self, rel: str) -> None:
        """Delete the object at *rel* (no error if it is already gone)."""
        try:
            self._handler.delete_file(rel)
        except FileNotFoundError:
            pass

    def new_commits(self, table: str, after: int) -> builtins.list[tuple[int, builtins.list[dict[str, Any]]]]:
        """The commits of *table* (a path under the root, "" for the root) after version *after*.

        One request when there is none: each commit is found by opening the next
        version's file, until one is missing (Delta versions have no gaps).
        """
        prefix = f"{table.strip('/')}/" if table.strip("/") else ""
        out = []
        version = after + 1
        while (data := self.read_if_exists(prefix + commit_file(version))) is not None:
            out.append((version, parse_actions(data.decode("utf-8"))))
            version += 1
        return out

    def read_data_files(
        self, table: str, adds: Iterable[tuple[str, Mapping[str, Any] | None]], schema: pa.Schema
    ) -> pa.Table:
        """The rows of the data files *adds* (``(log path, partition values)``) of *table*, in *schema*.

        Each file is read whole and parsed in memory; partition columns, which the files
        do not hold, come from the log.
        """
        prefix = f"{table.strip('/')}/" if table.strip("/") else ""
        parts = []
        for path, partition in adds:
            data = pq.read_table(pa.BufferReader(self.read(prefix + unquote(path))))
            for col, value in (partition or {}).items():
                if col not in data.column_names and col in schema.names:
                    data = data.append_column(col, pa.array([value] * data.num_rows, schema.field(col).type))
            for field in schema:  # a file written before a column was added
                if field.name not in data.column_names:
                    data = data.append_column(field.name, pa.nulls(data.num_rows, field.type))
            parts.append(conform(data, schema))
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def read_delta_table(self, dt: Any, table: str, schema: pa.Schema) -> pa.Table:
        """Every row of the Delta table *dt* (at its loaded version), without a pyarrow dataset scan."""
        adds = pa.table(dt.get_add_actions(flatten=False))
        if adds.num_rows == 0:
            return schema.empty_table()
        partitions = adds.column("partition").to_pylist() if "partition" in adds.column_names else None
        paths = adds.column("path").to_pylist()
        return self.read_data_files(table, zip(paths, partitions or [None] * len(paths), strict=True), schema)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """*table*'s columns of *schema*, in its order and types. Every table read or taken in
    passes here; a cast of a table whose types already match cost ~0.13 ms at 27 columns
    (a one-row append taken in by `lake.Lake`), so only one whose types differ is cast."""
    table = table.select(schema.names)
    return table if table.schema.equals(schema) else table.cast(schema)


def read_table_rows(dt: Any, uri: str, storage_options: Mapping[str, str] | None, schema: pa.Schema) -> pa.Table:
    """Every row of the Delta table *dt* at *uri*: a dataset scan locally, whole-file reads on an object store."""
    if "://" not in uri or uri.startswith("file://"):
        return conform(dt.to_pyarrow_dataset().to_table(), schema)
    return RemoteFiles(uri, storage_options).read_delta_table(dt, "", schema)


def interval_seconds(refresh: Any) -> float:
    """A refresh interval in seconds from ``None``, a number of seconds or a ``timedelta``."""
    from datetime import timedelta

    from .errors import ValidationError

    if refresh is None:
        return 0.0
    if isinstance(refresh, timedelta):
        seconds = refresh.total_seconds()
    elif isinstance(refresh, (int, float)) and not isinstance(refresh, bool):
        seconds = float(refresh)
    else:
        raise ValidationError(
            f"refresh must be None, a number of seconds or a timedelta, got {type(refresh).__name__}", field="refresh"
        )
    if not seconds >= 0:  # also refuses NaN
        raise ValidationError(f"refresh must not be negative, got {refresh!r}", field="refresh")
    return seconds


class Freshness:
    """When reads probe a table's log: once per public read, or once per *interval* seconds.

    A public read runs inside `reading()`; there each table (or the ledger) is probed
    at most once, and not at all when it was probed less than *interval* seconds ago.
    Outside a public read (writes, maintenance, forget) every refresh probes. *clock*
    is the monotonic clock the interval is measured on (a test may pass its own).
    """

    def __init__(self, interval: float = 0.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._local = threading.local()
        self._probed_at: dict[str, float] = {}

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One public read: nested reads (context -> recall) share its probes."""
        depth: int = getattr(self._local, "depth", 0)
        if depth == 0:
            self._local.probed = set()
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            if depth == 0:
                self._local.probed = None

    def wants_probe(self, key: str) -> bool:
        """Whether a refresh of *key* should ask the log now."""
        probed: set[str] | None = getattr(self._local, "probed", None)
        if probed is None:
            return True
        if key in probed:
            return False
        last = self._probed_at.get(key)
        return not (self.interval > 0 and last is not None and self.clock() - last < self.interval)

    def probed(self, key: str) -> None:
        """Record that *key*'s log was just asked."""
        probed: set[str] | None = getattr(self._local, "probed", None)
        if probed is not None:
            probed.add(key)
        self._probed_at[key] = self.clock()
