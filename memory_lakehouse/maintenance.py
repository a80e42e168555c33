"""`store.maintenance`: compaction, checkpoints, vacuum and status (delta-rs's ``dt.optimize`` style).

A store written to once per agent turn reaches 10,000 commits in days, and every
append costs more the more files the table has. Maintenance keeps that flat — and
never changes an answer:

* **compact()** rewrites each org partition's small files into large ones. Rows keep
  their ``txn_id``, and a row's system time is the commit that txn id names, not the
  file it sits in, so every ``known_since`` and every as-of read is the same after. A
  compaction commit is not a memory commit (it advances versions, it teaches nothing).
* **checkpoint()** first copies the log's commit metadata into ``_commits``
  (`commitlog`), then writes a Delta checkpoint, lets Delta delete commit files older
  than the table's ``delta.logRetentionDuration`` (kept at 100 years by default) and
  deletes those more than ``MaintenancePolicy.keep_log_versions`` versions below the
  checkpoint (every one costs every append): system time survives in ``_commits``
  whatever the log forgets.
* **vacuum(retain=…)** deletes files that commits removed more than *retain* ago
  (Delta's "lite" vacuum: a file written by an append still in flight is not in the
  log, so it is never taken), and the files whose tombstones have expired, by their
  age (never younger than `lake.IN_FLIGHT_GRACE_SECONDS`). A dry run by default.
* **status()** files, commits, bytes and the oldest version time travel can still read.

Each rewrite takes the table's maintenance lock (the one purge takes) and retries when
a concurrent commit wins the race; appends never wait for that lock. Purge's guarantee holds:
a purge also deletes the files compactions removed (they may hold the rows it erases),
and a compaction after a purge reads only the purged snapshot.

A store runs maintenance itself on a policy (`MaintenancePolicy`, ``ml.open(...,
maintenance=...)``): after an append, a table with *every_commits* commits since its
last compaction, or a process that appended *every_bytes* since its last run, compacts
that table and records the commits. The run goes to a thread of its own
(``MaintenancePolicy.background``): done inline it made the append that crossed the
threshold take ~0.7 s at 10k commits, one agent turn in 500. Appends and reads go on
meanwhile: a few of this process's appends to a table land beside the rewrite of one of
its org partitions, later ones wait for it (`commit_gate`: delta-rs's optimize gets a
bounded number of tries at the next version, and appends landing every few milliseconds
won them all), and a rewrite that fails beside them runs again alone.
`Maintenance.wait` and ``store.close()`` wait for the run. ``memlake maintenance`` runs
it by hand.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError

from .background import Worker
from .commitlog import COMMITS_TABLE
from .errors import ConflictError, ValidationError
from .lake import REWRITE_OPERATIONS, Lake, commit_metadata, new_txn_id
from .objectstore import open_delta_table
from .records import SPECS, check_kinds

if TYPE_CHECKING:
    from .store import MemoryStore

T = TypeVar("T")
log = logging.getLogger(__name__)

#: Compaction aims at files of this size (delta-rs's default is 100 MiB; memory rows are small).
TARGET_SIZE = 64 * 2**20
#: A rewrite that loses its commit race is tried this many times before ConflictError.
ATTEMPTS = 5


@dataclass(frozen=True)
class MaintenancePolicy:
    """When a store maintains itself: after an append that brings a table to *every_commits*
    commits since its last compaction, or this process to *every_bytes* appended since its
    last run (None turns a trigger off). ``MaintenancePolicy(None, None)`` never runs."""

    every_commits: int | None = 500
    every_bytes: int | None = 256 * 2**20
    target_size: int = TARGET_SIZE
    #: Commit files a checkpoint leaves in each table's ``_delta_log`` below its version (None: all).
    #: Every append pays for each commit file kept (~18 µs apiece in delta-rs, docs/performance.md),
    #: and ``_commits`` holds every commit's system time, so older ones only serve Delta time travel.
    keep_log_versions: int | None = 100
    #: Run the policy in a thread of its own (True), or inside the append that made it due (False:
    #: that caller waits for the compaction and checkpoint, ~0.7 s on a table of 10k commits).
    background: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.background, bool):
            raise ValidationError("background must be True or False", field="background")
        if self.keep_log_versions is not None and (
            not isinstance(self.keep_log_versions, int)
            or isinstance(self.keep_log_versions, bool)
            or self.keep_log_versions < 0
        ):
            raise ValidationError("keep_log_versions must be a non-negative integer or None", field="keep_log_versions")
        for name in ("every_commits", "every_bytes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValidationError(f"{name} must be a positive integer or None", field=name)


@dataclass(frozen=True)
class TableStatus:
    """One table as maintenance sees it."""

    table: str
    version: int  # the latest commit (-1: empty)
    commits: int  # commits in the table's history (version + 1)
    files: int  # data files in the current snapshot
    bytes: int  # their size
    small_files: int  # files below the compaction target
    partitions: int  # org partitions
    oldest_readable_version: int  # the oldest version Delta time travel can still load
    commits_since_compaction: int
    commits_recorded: int  # versions copied into `_commits`
    log_files: int  # commit files left in _delta_log


@dataclass(frozen=True)
class MaintenanceStatus:
    tables: dict[str, TableStatus]

    @property
    def files(self) -> int:
        return sum(t.files for t in self.tables.values())

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tables.values())

    @property
    def commits(self) -> int:
        return sum(t.commits for t in self.tables.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "commits": self.commits,
            "tables": {k: asdict(v) for k, v in self.tables.items()},
        }

    def summary(self) -> list[str]:
        lines = [
            f"{'table':<11}{'version':>8}{'files':>7}{'small':>7}{'bytes':>12}{'since compact':>15}"
            f"{'oldest readable':>17}{'recorded':>10}"
        ]
        for t in self.tables.values():
            lines.append(
                f"{t.table:<11}{t.version:>8}{t.files:>7}{t.small_files:>7}{t.bytes:>12}"
                f"{t.commits_since_compaction:>15}{t.oldest_readable_version:>17}{t.commits_recorded:>10}"
            )
        return lines


@dataclass(frozen=True)
class CompactReport:
    """What `compact` rewrote, per table: partitions, files removed and added."""

    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def files_removed(self) -> int:
        return sum(t["files_removed"] for t in self.tables.values())

    @property
    def files_added(self) -> int:
        return sum(t["files_added"] for t in self.tables.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": self.tables,
            "files_removed": self.files_removed,
            "files_added": self.files_added,
            "seconds": self.seconds,
        }

    def summary(self) -> list[str]:
        if not self.tables:
            return ["compact: nothing to compact"]
        return [
            f"compact {k}: {v['partitions']} partition(s), {v['files_removed']} file(s) -> {v['files_added']}"
            for k, v in self.tables.items()
        ]


@dataclass(frozen=True)
class CheckpointReport:
    """Commits recorded in ``_commits``, the version each table was checkpointed at, log files deleted."""

    commits_recorded: int
    checkpoints: dict[str, int]
    log_files_deleted: int
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> list[str]:
        return [
            f"checkpoint: recorded {self.commits_recorded} commit(s) in {COMMITS_TABLE}; checkpointed "
            + ", ".join(f"{k}@{v}" for k, v in self.checkpoints.items())
            + f"; {self.log_files_deleted} expired log file(s) deleted"
        ]


@dataclass(frozen=True)
class VacuumReport:
    """Files a vacuum deleted (or, in a dry run, would delete), per table."""

    dry_run: bool
    retain: timedelta
    files: dict[str, tuple[str, ...]]
    bytes: int
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "retain_seconds": self.retain.total_seconds(),
            "files": {k: list(v) for k, v in self.files.items()},
            "bytes": self.bytes,
            "seconds": self.seconds,
        }

    def summary(self) -> list[str]:
        n = sum(len(v) for v in self.files.values())
        head = "vacuum (dry run): would delete" if self.dry_run else "vacuum: deleted"
        lines = [f"{head} {n} file(s), {self.bytes} bytes, removed more than {self.retain} ago"]
        if self.dry_run:
            lines.append("run again with --yes (dry_run=False) to delete")
        return lines


class Maintenance:
    """``store.maintenance``: keep a long-lived store cheap to write and read, answers unchanged."""

    def __init__(self, store: MemoryStore, policy: MaintenancePolicy | None = None) -> None:
        self._store = store
        self.policy = policy if policy is not None else MaintenancePolicy()
        self._compacted_at: dict[str, int] = {}  # table -> the version of its last compaction seen
        self._scanned: dict[str, int] = {}  # table -> commits scanned for compactions up to this version
        self._bytes = 0  # appended by this process since its last run
        self._inline = False  # a run inside an append is going on (its own appends must not start another)
        #: the background run; its lock guards the fields below and the dueness bookkeeping above
        self._worker: Worker[list[str]] = Worker("memlake-maintenance", self._next_run, self._run_policy)
        self._lock = self._worker.lock
        self._queued: list[str] | None = None  # the tables of the run an append just asked for
        self._touched: set[str] = set()  # tables appended to while the background run went on
        #: The exception of the last run of the policy that failed (None: the last one succeeded).
        self.last_error: Exception | None = None
        #: Rewrites whose try beside the appends failed and that ran again alone (`_beside_appends`).
        self.rewrites_run_alone = 0
        store.lake.after_append.append(self._after_append)

    @property
    def lake(self) -> Lake:
        return self._store.lake

    # ---------------------------------------------------------------- status

    def status(self) -> MaintenanceStatus:
        """Files, commits, bytes and the oldest readable version of every table.

        >>> # store.maintenance.status().tables["fact"].files
        """
        self._store._check_open()
        lake = self.lake
        lake.refresh()
        recorded = lake.commit_record.watermarks()
        out = {}
        for kind in SPECS:
            view = lake.views[kind]
            adds = _add_actions(lake, kind)
            sizes = adds.column("size_bytes").to_pylist() if adds.num_rows else []
            orgs = set(adds.column("partition.org").to_pylist()) if adds.num_rows else set()
            log = lake.objects.list(f"{kind}/_delta_log")
            jsons = sorted(int(rel.rsplit("/", 1)[1].split(".")[0]) for rel in log if rel.endswith(".json"))
            out[kind] = TableStatus(
                table=kind,
                version=view.version,
                commits=view.version + 1,
                files=len(sizes),
                bytes=sum(sizes),
                small_files=sum(1 for s in sizes if s < self.policy.target_size // 2),
                partitions=len(orgs),
                oldest_readable_version=self._oldest_readable(kind, jsons, log),
                commits_since_compaction=view.version - self._last_compaction(kind),
                commits_recorded=recorded.get(kind, -1) + 1,
                log_files=len(jsons),
            )
        return MaintenanceStatus(out)

    def _oldest_readable(self, kind: str, jsons: Sequence[int], log: Mapping[str, int]) -> int:
        """The oldest version whose log can be replayed and whose files all still exist."""
        view = self.lake.views[kind]
        checkpoints = sorted(int(rel.rsplit("/", 1)[1].split(".")[0]) for rel in log if ".checkpoint." in rel)
        present = set(jsons)
        floor = 0
        if 0 not in present:  # the log was cleaned up: replay starts at a checkpoint
            floor = next(
                (c for c in checkpoints if all(v in present for v in range(c + 1, view.version + 1))), view.version
            )
        files = set(self.lake.objects.list(kind))
        for version in sorted(
            (v for v, c in view.commits.items() if c.operation in REWRITE_OPERATIONS and v > floor), reverse=True
        ):
            try:
                actions = self.lake.log_actions(kind, version)
            except (FileNotFoundError, OSError):
                continue
            removed = [unquote(a["remove"]["path"]) for a in actions if "remove" in a]
            if any(f"{kind}/{path}" not in files for path in removed):
                return max(floor, version)  # versions before it referenced a file that is gone
        return floor

    def _compacted_from(self, kind: str, began: int) -> None:
        """Count *kind*'s commits toward its next compaction from *began*, the version this
        compaction began at, not from its last partition's commit: appends land beside the
        rewrites (`commit_gate`), and counted from the last one, each run put the next one back
        by as many commits as the run took (at 30k records, the tenants bench's second run never
        came and its store was left with 612 fact files where it had 40)."""
        with self._lock:
            if self._last_compaction(kind) >= began:  # scans up to now: the run's own commits are not met again
                self._compacted_at[kind] = began

    def _last_compaction(self, kind: str) -> int:
        """The version of the table's last compaction (-1: never), scanning only new commits."""
        view = self.lake.views[kind]
        start = self._scanned.get(kind, -1)
        if view.version > start:
            last = self._compacted_at.get(kind, -1)
            for v in range(start + 1, view.version + 1):
                c = view.commits.get(v)
                if c is not None and c.operation == "optimize":
                    last = v
            self._compacted_at[kind] = last
            self._scanned[kind] = view.version
        return self._compacted_at.get(kind, -1)

    # ---------------------------------------------------------------- compact

    def compact(
        self, *, kinds: Sequence[str] | None = None, orgs: Iterable[str] | None = None, target_size: int | None = None
    ) -> CompactReport:
        """Rewrite each org partition's small files into files of about *target_size* bytes.

        Every ``known_since`` and every as-of answer is the same after; the compaction
        commit is not a memory commit. Partitions with fewer than two small files are
        left alone.

        >>> # store.maintenance.compact().files_removed
        """
        self._store._check_open()
        started = time.perf_counter()
        lake = self.lake
        target = int(target_size or self.policy.target_size)
        wanted = set(orgs) if orgs is not None else None
        lake.refresh()
        out: dict[str, dict[str, int]] = {}
        began_at: dict[str, int] = {}
        for kind in check_kinds(kinds) if kinds is not None else tuple(SPECS):
            began_at[kind] = lake.views[kind].version
            adds = _add_actions(lake, kind)
            if adds.num_rows == 0:
                continue
            small: dict[str, int] = {}
            for org, size in zip(
                adds.column("partition.org").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True
            ):
                if size < target and (wanted is None or org in wanted):
                    small[org] = small.get(org, 0) + 1
            totals = {"partitions": 0, "files_removed": 0, "files_added": 0}
            for org in sorted(o for o, n in small.items() if n >= 2):
                meta = self._meta("optimize", f"compact org partition ({small[org]} small files)")

                def compact(kind: str = kind, org: str = org, meta: dict[str, str] = meta) -> dict[str, Any]:
                    # a fresh handle on each try: a stale one fails its commit again
                    return open_delta_table(lake.uri(kind), storage_options=lake.storage_options).optimize.compact(
                        partition_filters=[("org", "=", org)],
                        target_size=target,
                        commit_properties=CommitProperties(custom_metadata=meta),
                    )

                with lake.maintenance_lock(kind):
                    metrics = self._beside_appends(kind, compact)
                if metrics.get("numFilesRemoved", 0):
                    totals["partitions"] += 1
                    totals["files_removed"] += int(metrics.get("numFilesRemoved", 0))
                    totals["files_added"] += int(metrics.get("numFilesAdded", 0))
            if totals["partitions"]:
                out[kind] = totals
        if out:
            lake.refresh(force=True)
            for kind in out:
                self._compacted_from(kind, began_at[kind])
        return CompactReport(out, round(time.perf_counter() - started, 3))

    # ---------------------------------------------------------------- checkpoint

    def record_commits(self) -> int:
        """Copy every commit the log holds and ``_commits`` does not yet into ``_commits``."""
        self._store._check_open()
        lake = self.lake
        lake.refresh()
        commits = [c for kind in SPECS for c in lake.views[kind].commits.values()]
        with lake.maintenance_lock(COMMITS_TABLE):
            return self._retry(lambda: lake.commit_record.append(commits, committed_at=self._store.clock.peek()))

    def checkpoint(self, *, kinds: Sequence[str] | None = None, cleanup: bool = True) -> CheckpointReport:
        """Record the commits in ``_commits``, then checkpoint each table at a recorded version.

        With *cleanup*, Delta then deletes commit files older than the table's
        ``delta.logRetentionDuration`` that the checkpoint covers, and `_prune_log` those
        more than ``policy.keep_log_versions`` below it; every one of them is in
        ``_commits`` first, so no system time is lost with them.
        """
        started = time.perf_counter()
        lake = self.lake
        recorded = self.record_commits()
        marks = lake.commit_record.watermarks()
        done: dict[str, int] = {}
        deleted = 0
        for kind in check_kinds(kinds) if kinds is not None else tuple(SPECS):
            version = marks.get(kind, -1)
            if version < 0:
                continue
            before = len(lake.objects.list(f"{kind}/_delta_log"))
            with lake.maintenance_lock(kind):
                dt = open_delta_table(lake.uri(kind), version=version, storage_options=lake.storage_options)
                dt.create_checkpoint()
                if cleanup:
                    dt.cleanup_metadata()
                    if self.policy.keep_log_versions is not None:
                        self._prune_log(kind, below=version - self.policy.keep_log_versions)
            deleted += max(0, before + 1 - len(lake.objects.list(f"{kind}/_delta_log")))
            done[kind] = version
        return CheckpointReport(recorded, done, deleted, round(time.perf_counter() - started, 3))

    def _prune_log(self, kind: str, *, below: int) -> int:
        """Delete *kind*'s commit files and checkpoints of versions below *below*; returns how many.

        Delta's own cleanup goes by age (``delta.logRetentionDuration``, 100 years here), so a
        busy store would keep every commit file, and each costs every append. This goes by
        count. It runs only under the maintenance lock, right after a checkpoint at a version
        ``_commits`` has recorded, so every version it deletes is recorded (the lake reads
        `_commits` for a version whose commit file is gone) and readers start from that
        checkpoint; Delta time travel reaches back to the oldest checkpoint kept.
        """
        removed = 0
        for rel in self.lake.objects.list(f"{kind}/_delta_log"):
            name = rel.rsplit("/", 1)[-1]
            head = name.split(".", 1)[0]
            if head.isdigit() and int(head) < below and name.endswith((".json", ".crc", ".checkpoint.parquet")):
                self.lake.objects.delete(rel)
                removed += 1
        return removed

    # ---------------------------------------------------------------- vacuum

    def vacuum(
        self, *, retain: timedelta = timedelta(days=7), dry_run: bool = True, kinds: Sequence[str] | None = None
    ) -> VacuumReport:
        """Delete the files commits removed more than *retain* ago (a dry run by default).

        The candidates are the files the log says were removed (compaction, purge): Delta's
        lite vacuum. Once a tombstone expires (``delta.deletedFileRetentionDuration``) the
        log no longer names its file, so a data file no snapshot references and no log
        entry names goes too when it was written more than *retain* ago, and never
        younger than `lake.IN_FLIGHT_GRACE_SECONDS` (an append still in flight elsewhere
        is seconds old; `Lake.unreferenced_files`). Time travel to a version that needed
        a vacuumed file stops working; the store's own as-of reads do not use time travel
        and keep their answers.

        >>> # store.maintenance.vacuum(retain=timedelta(days=7))            # what would go
        >>> # store.maintenance.vacuum(retain=timedelta(days=7), dry_run=False)
        """
        self._store._check_open()
        if not isinstance(retain, timedelta) or retain < timedelta(0):
            raise ValidationError("retain must be a non-negative timedelta", field="retain")
        started = time.perf_counter()
        lake = self.lake
        lake.refresh()
        hours = int(retain.total_seconds() // 3600)
        files: dict[str, tuple[str, ...]] = {}
        size = 0
        for kind in check_kinds(kinds) if kinds is not None else tuple(SPECS):
            present = lake.objects.list(kind)
            meta = self._meta("vacuum", f"delete files removed more than {retain} ago")
            with lake.maintenance_lock(kind):
                dt = open_delta_table(lake.uri(kind), storage_options=lake.storage_options)

                def vacuum(dt: DeltaTable = dt, meta: dict[str, str] = meta) -> list[str]:
                    return dt.vacuum(
                        retention_hours=hours,
                        dry_run=dry_run,
                        enforce_retention_duration=False,
                        commit_properties=CommitProperties(custom_metadata=meta),
                    )

                with lake.commit_gate(kind).rewriting(exclusive=True):
                    gone = self._retry(vacuum)
                leftovers = lake.unreferenced_files(kind, older_than=retain.total_seconds()).expired
                if not dry_run:
                    for rel in leftovers:
                        lake.objects.delete(f"{kind}/{rel}")
            rels = tuple(sorted({_relative(lake, kind, path) for path in gone} | set(leftovers)))
            if rels:
                files[kind] = rels
                size += sum(present.get(f"{kind}/{rel}", 0) for rel in rels)
        if not dry_run and files:
            lake.refresh()
        return VacuumReport(dry_run, retain, files, size, round(time.perf_counter() - started, 3))

    # ---------------------------------------------------------------- the policy

    def run(self, *, kinds: Sequence[str] | None = None) -> tuple[CompactReport, CheckpointReport]:
        """What the policy runs: compact, then record the commits and checkpoint."""
        compacted = self.compact(kinds=kinds)
        return compacted, self.checkpoint(kinds=kinds)

    def _after_append(self, appended: Mapping[str, int]) -> None:
        """The policy, after every append of this process (never fails the write)."""
        if self._inline or self._worker.is_current():
            return  # an append made by the run itself
        with self._lock:
            self._bytes += sum(appended.values())
            if self._worker.running:
                self._touched.update(appended)  # looked at again when the run ends
                return
            due = self._due(appended)
            if not due:
                return
            if self.policy.background:
                self._queued = due
                self._worker.kick()
                return
            self._inline = True
        try:
            self._run_policy(due)
        finally:
            self._inline = False

    def _due(self, tables: Iterable[str]) -> list[str]:
        """Of *tables* (just appended to), those the policy would run for now. Call under ``_lock``."""
        policy = self.policy
        tables = list(tables)
        due = [
            k
            for k in tables
            if policy.every_commits is not None
            and self.lake.views[k].version - self._last_compaction(k) >= policy.every_commits
        ]
        if policy.every_bytes is not None and self._bytes >= policy.every_bytes:
            due = sorted(set(due) | set(tables))
        return due

    def _next_run(self) -> list[str] | None:
        """The background worker's next run (called under ``_lock``): the one an append asked
        for, then one for what appends made due meanwhile (never more often than appends come:
        a table still due after its run waits for its next append); None when neither."""
        if self._queued is not None:
            due, self._queued = self._queued, None
            return due
        due = self._due(self._touched)
        self._touched = set()
        return due or None

    def _run_policy(self, due: list[str]) -> None:
        with self._lock:
            counted = self._bytes  # what this run answers for: appends during a background run count on
        try:
            self.run(kinds=due)
            with self._lock:
                self._bytes = max(0, self._bytes - counted)
            self.last_error = None
        except Exception as exc:  # the write itself succeeded: maintenance is tried again later
            self.last_error = exc
            warnings.warn(
                f"memlake: maintenance after an append failed ({type(exc).__name__}: {exc}); "
                "it runs again after a later append",
                RuntimeWarning,
                stacklevel=2,
            )

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the policy's background run, if one is going on; False if *timeout* ran out first.

        ``store.close()`` waits too. Reads need not: the run changes no answer.
        """
        return self._worker.wait(timeout)

    # ---------------------------------------------------------------- plumbing

    def _meta(self, op: str, reason: str) -> dict[str, str]:
        return commit_metadata(
            txn_id=new_txn_id(), committed_at=self._store.clock.peek(), op=op, actor="maintenance", reason=reason
        )

    def _beside_appends(self, kind: str, rewrite: Callable[[], T]) -> T:
        """Run *rewrite* of *kind*'s table beside this process's appends (`commit_gate`); when
        that try fails, run it again alone (appends held), as often as `_retry` does."""
        gate = self.lake.commit_gate(kind)
        try:
            with gate.rewriting():
                return rewrite()
        except DeltaError as exc:  # CommitFailedError among them
            self.rewrites_run_alone += 1
            log.info("a rewrite of %s beside %d append(s) failed (%s): run again alone", kind, gate.landed, exc)
        with gate.rewriting(exclusive=True):
            return self._retry(rewrite)

    @staticmethod
    def _retry(action: Callable[[], T]) -> T:
        """Run a rewrite again when a concurrent commit won the race (appends never conflict for long)."""
        for attempt in range(ATTEMPTS):
            try:
                return action()
            except CommitFailedError as exc:
                if attempt == ATTEMPTS - 1:
                    raise ConflictError(f"maintenance lost its commit race {ATTEMPTS} times: {exc}") from exc
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")


def _add_actions(lake: Lake, kind: str) -> pa.Table:
    """The current snapshot's files of *kind*: path, size_bytes, partition.org (flattened)."""
    dt = open_delta_table(lake.uri(kind), storage_options=lake.storage_options)
    return pa.table(dt.get_add_actions(flatten=True))


def _relative(lake: Lake, kind: str, path: str) -> str:
    """A path vacuum reports (absolute or table-relative) as relative to the table."""
    path = unquote(path)
    prefix = lake.uri(kind).removeprefix("file://").rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path.lstrip("/")
