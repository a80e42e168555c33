"""Blind appends to a local Delta table, written into its log directly.

Every write of the store is a blind append: new data files and one commit that adds
them. delta-rs makes such a commit cost more the more the table holds: after each
commit it brings its in-memory snapshot up to date, work that grows with the live files
and the tombstones (a one-row append took 9 ms on a fresh table and 16 ms on one with
2,000 files, on the same machine in the same run). Nothing in a blind append needs that
snapshot. So on a local store the lake writes the append as the Delta protocol spells
it out: a Parquet file per org partition (what delta-rs writes: Hive-style directory,
no partition column in the file, Snappy; `PARQUET_OPTIONS`), then commit file
``<version>.json`` holding ``commitInfo`` (with the store's metadata) and one ``add`` per
file, with the statistics the table asks for (``delta.dataSkippingStatsColumns``). The
commit file is created with ``link(2)``, which fails when the name exists: the same
put-if-absent delta-rs uses on a local file system, so a commit never overwrites another
writer's; on a collision the append moves to the next version (a blind append conflicts
with nothing), unless the commit it lost to changed the table's schema or protocol, when
it steps aside (`DirectAppendUnsupported`) and delta-rs writes it.

What stays with delta-rs: creating tables, every rewrite (purge, compaction), object
stores, and any table this module does not fully understand (`table_supported`: a
writer feature, a constraint, an invariant, generated or identity columns, column
mapping, another partitioning or schema). Checkpoints, which delta-rs writes after
every ``delta.checkpointInterval``-th commit, are still delta-rs's: the caller asks it
for one after each such version this module writes, in a thread of its own
(`lake.Lake._checkpoint_after_append`).

Tests: ``tests/test_direct_append.py`` reads what this writes with delta-rs, polars and
the store, interleaves it with delta-rs's own appends, and checks each refusal.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .objectstore import commit_file

#: What a table's protocol may ask of writers for this module to write to it: reader and
#: writer versions 1 and 2 without table features. Version 2's one extra duty, column
#: invariants, is checked apart (`table_supported`).
MAX_WRITER_VERSION = 2
MAX_READER_VERSION = 1

#: The most partitions (files) an append may touch and still be written here. Encoding a
#: file costs more here than in delta-rs's writer, and delta-rs's commit costs more: with
#: both stores written alike in one process (batches of 50 rows per org, the tenants
#: workload), a batch over 1 / 4 / 8 / 12 / 16 / 20 orgs took 10.1 / 32.0 / 41.1 / 68.3 /
#: 71.6 / 96.4 ms here and 18.4 / 36.4 / 47.5 / 69.1 / 66.7 / 85.8 ms through delta-rs.
MAX_PARTITIONS = 12

#: How an append's Parquet files are encoded: Snappy (as delta-rs), without dictionary pages
#: or column statistics. An append's file holds one org's rows of one batch (tens of rows,
#: often one), where a dictionary saves a few bytes and the statistics prune nothing (the
#: snapshot reads every file whole; data skipping reads the log's statistics, written below),
#: and building both was ~30% of the file's cost (/tmp micro-benchmark, 30 alternated
#: rounds on the tenants workload's batch: a 50-row file 1.86 -> 1.30 ms, a one-row file
#: 1.65 -> 1.20). Compaction rewrites these files through delta-rs's writer, with both.
PARQUET_OPTIONS: dict[str, object] = {"compression": "snappy", "use_dictionary": False, "write_statistics": False}

#: How many versions ahead of the last one it knows an append looks for a free version
#: before it gives up (each step is one commit another writer landed meanwhile).
MAX_VERSION_STEPS = 10_000


class DirectAppendUnsupported(Exception):
    """This append must go through delta-rs (an unfamiliar table, or one that just changed).

    *for_good*: every later append to this store would be refused too (its file system
    cannot hard-link), so the caller stops trying.
    """

    def __init__(self, reason: str, *, for_good: bool = False) -> None:
        super().__init__(reason)
        self.for_good = for_good


#: What ``link(2)`` says on a file system without hard links.
NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


@dataclass(frozen=True)
class TableShape:
    """What an append needs to know about a table, read from its metadata once."""

    partition_by: tuple[str, ...]
    stats_columns: tuple[str, ...]
    checkpoint_interval: int
    schema: pa.Schema  # of the rows it was checked for (an append of other rows checks again)


def table_supported(protocol: object, metadata: object, schema: pa.Schema, data_schema: pa.Schema) -> TableShape:
    """The table's shape when this module can append to it; else raise `DirectAppendUnsupported`.

    *protocol* and *metadata* are delta-rs's (``DeltaTable.protocol()``, ``.metadata()``),
    *schema* the table's Arrow schema, *data_schema* that of the rows to append.
    """
    reader, writer = getattr(protocol, "min_reader_version", 99), getattr(protocol, "min_writer_version", 99)
    if reader > MAX_READER_VERSION or writer > MAX_WRITER_VERSION:
        raise DirectAppendUnsupported(f"protocol {reader}/{writer}")
    if getattr(protocol, "writer_features", None) or getattr(protocol, "reader_features", None):
        raise DirectAppendUnsupported("table features")
    config: Mapping[str, str] = getattr(metadata, "configuration", None) or {}
    if any(k.startswith("delta.constraints.") for k in config) or config.get("delta.columnMapping.mode", "none") != (
        "none"
    ):
        raise DirectAppendUnsupported("constraints or column mapping")
    for f in schema:
        meta = f.metadata or {}
        if any(k.startswith((b"delta.invariants", b"delta.generation", b"delta.identity")) for k in meta):
            raise DirectAppendUnsupported(f"column {f.name} has an invariant, a generation or an identity")
    partition_by = tuple(getattr(metadata, "partition_columns", ()) or ())
    if [f.name for f in schema] != [f.name for f in data_schema] or any(
        a.type != b.type for a, b in zip(schema, data_schema, strict=True)
    ):
        raise DirectAppendUnsupported("the rows' schema differs from the table's")
    if any(not pa.types.is_string(schema.field(c).type) for c in partition_by):
        raise DirectAppendUnsupported("a partition column that is not a string")
    stats = tuple(c.strip() for c in config.get("delta.dataSkippingStatsColumns", "").split(",") if c.strip())
    if not stats or any(c not in schema.names or not pa.types.is_timestamp(schema.field(c).type) for c in stats):
        raise DirectAppendUnsupported("statistics on columns other than timestamps")
    try:
        interval = checkpoint_interval(config)
    except ValueError:
        raise DirectAppendUnsupported("an unreadable checkpoint interval") from None
    return TableShape(partition_by, stats, interval, data_schema)


def checkpoint_interval(configuration: Mapping[str, str]) -> int:
    """A table's ``delta.checkpointInterval``: every how many versions a checkpoint is
    written (Delta's default, 100, when unset). Raises ValueError when unreadable."""
    return max(1, int(configuration.get("delta.checkpointInterval", "100")))


def faster_here(data: pa.Table, shape: TableShape) -> bool:
    """Whether *data* touches few enough partitions for this module to be the faster writer."""
    keys = list(shape.partition_by)
    if not keys or data.num_rows <= MAX_PARTITIONS:  # no more partitions than rows: a single write needs no count
        return True
    return bool(data.select(keys).group_by(keys, use_threads=False).aggregate([]).num_rows <= MAX_PARTITIONS)


def append(table_dir: str, data: pa.Table, shape: TableShape, metadata: Mapping[str, str], *, after: int) -> int:
    """Append *data* as one commit after version *after*; return its version.

    Commits other writers landed since *after* are stepped over once read and found to
    add or remove files only. Raises `DirectAppendUnsupported` when one of them changed
    the table's metadata or protocol, or when the log no longer
    holds version *after* (pruned below a checkpoint: the caller's view is too old to
    know what follows it); the data files written are deleted first.
    """
    written: list[str] = []
    tmp = os.path.join(table_dir, "_delta_log", f".{uuid.uuid4()}.json.tmp")
    try:
        parts = _partitions(data, shape)
        names = [_file_name(values) for values, _ in parts]
        written.extend(os.path.join(table_dir, *name) for name in names)
        if len(parts) > 1:  # Parquet encoding releases the GIL: a batch's ~20 org files on every core
            futures = [
                _pool().submit(_write_part, table_dir, name, part, values, shape)
                for name, (values, part) in zip(names, parts, strict=True)
            ]
            wait(futures)  # all of them, so no file lands after a failure's cleanup
            adds = [f.result() for f in futures]
        else:
            adds = [_write_part(table_dir, names[0], parts[0][1], parts[0][0], shape)]
        info = {
            "timestamp": int(time.time() * 1000),
            "operation": "WRITE",
            "operationParameters": {"mode": "Append", "partitionBy": json.dumps(list(shape.partition_by))},
            "isBlindAppend": True,
            **dict(metadata),
            "operationMetrics": {"num_added_files": len(adds), "num_added_rows": data.num_rows},
            "engineInfo": "memory_lakehouse direct append",
        }
        body = "\n".join(json.dumps(a, separators=(",", ":")) for a in [{"commitInfo": info}, *adds]) + "\n"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(body)
        return _link_next(tmp, table_dir, after)
    except BaseException:
        if not _linked(tmp):  # the commit did not land: its files are nobody's
            for path in written:
                _remove(path)
        raise
    finally:
        _remove(tmp)


def _linked(tmp: str) -> bool:
    """Whether the commit file staged at *tmp* was linked into the log (it then has two names)."""
    try:
        return os.stat(tmp).st_nlink > 1
    except OSError:
        return False


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _link_next(tmp: str, table_dir: str, after: int) -> int:
    """Create the first free commit file after version *after* as a hard link to *tmp*."""
    version = after
    for _ in range(MAX_VERSION_STEPS):
        if version >= 0 and not os.path.exists(os.path.join(table_dir, commit_file(version))):
            # the log no longer holds the version this append follows (maintenance pruned it
            # below a checkpoint): what came after it is unknown here, so is the next free number
            raise DirectAppendUnsupported(f"version {version} is no longer in the log")
        try:
            os.link(tmp, os.path.join(table_dir, commit_file(version + 1)))
            return version + 1
        except OSError as exc:
            if exc.errno in NO_HARD_LINKS:
                raise DirectAppendUnsupported("the file system cannot hard-link", for_good=True) from exc
            if not isinstance(exc, FileExistsError):
                raise
            version += 1
            if _changes_table(os.path.join(table_dir, commit_file(version))):
                raise DirectAppendUnsupported(f"version {version} changed the table") from None
    raise DirectAppendUnsupported(f"more than {MAX_VERSION_STEPS} commits landed meanwhile")


def _changes_table(path: str) -> bool:
    """Whether a commit changes what an append must know (metadata or protocol)."""
    with open(path, encoding="utf-8") as f:
        return any("metaData" in action or "protocol" in action for action in map(json.loads, filter(str.strip, f)))


def _partitions(data: pa.Table, shape: TableShape) -> list[tuple[dict[str, str | None], pa.Table]]:
    """The rows of each partition, without the partition columns (the directory names them)."""
    if not shape.partition_by:
        return [({}, data)]
    keys = list(shape.partition_by)
    if data.num_rows == 1:  # a single write: its one row names its partition (a group-by costs ~0.2 ms)
        return [({k: data.column(k)[0].as_py() for k in keys}, data.drop_columns(keys))]
    ordered = data.sort_by([(k, "ascending") for k in keys])
    # a run per partition in the sorted rows: one (values, count) per distinct key, in sorted order
    runs = ordered.select(keys).group_by(keys, use_threads=False).aggregate([([], "count_all")])
    out: list[tuple[dict[str, str | None], pa.Table]] = []
    start = 0
    for run in runs.to_pylist():
        count = run.pop("count_all")
        out.append((run, ordered.slice(start, count).drop_columns(keys)))
        start += count
    return out


def _file_name(values: Mapping[str, str | None]) -> list[str]:
    """A new data file's path in the table, a part each: its partition's directories
    (Hive-style, escaped as delta-rs escapes them), then the file."""
    return [*(f"{k}={_escape(v)}" for k, v in values.items()), f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"]


def _write_part(
    table_dir: str, name: list[str], part: pa.Table, values: Mapping[str, str | None], shape: TableShape
) -> dict[str, object]:
    """Write one partition's rows as the Parquet file *name*; return its ``add`` action."""
    path = os.path.join(table_dir, *name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(part, path, **PARQUET_OPTIONS)
    st = os.stat(path)
    return {
        "add": {
            "path": "/".join(quote(p, safe="=") for p in name),  # the log holds a URI: escaped once more
            "partitionValues": dict(values),
            "size": st.st_size,
            "modificationTime": int(st.st_mtime * 1000),
            "dataChange": True,
            "stats": json.dumps(_stats(part, shape.stats_columns), separators=(",", ":")),
        }
    }


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The threads that encode a batch's files (one per core, made on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="memlake-append")
        return _POOL


def _forget_pool_in_child() -> None:
    """A forked child has none of the parent's threads: an inherited pool would queue work forever."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


def _escape(value: str | None) -> str:
    """A partition value as a directory name, the way delta-rs (and Hive) spell it."""
    return "__HIVE_DEFAULT_PARTITION__" if value is None else quote(value, safe="")


def _stats(part: pa.Table, columns: Sequence[str]) -> dict[str, object]:
    """File statistics as delta-rs writes them: min and max truncated to milliseconds (UTC)."""
    mins: dict[str, str] = {}
    maxs: dict[str, str] = {}
    nulls: dict[str, int] = {}
    for c in columns:
        col = part.column(c)
        nulls[c] = col.null_count
        if col.null_count < len(col):
            bounds = pc.min_max(col.cast(pa.timestamp("us", tz="UTC")))
            mins[c] = _stat_time(bounds["min"].value)
            maxs[c] = _stat_time(bounds["max"].value)
    return {"numRecords": part.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


def _stat_time(micros: int) -> str:
    """A timestamp statistic as delta-rs spells it: whole seconds bare, else truncated to milliseconds."""
    ms = micros // 1000
    text = (EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}Z" if micros % 1_000_000 == 0 else f"{text}.{ms % 1000:03d}Z"


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
