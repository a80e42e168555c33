"""Forgetting: the deletion ledger, deletion generations, tombstones.

``forget(subject)`` appends a tombstone to the ledger and bumps the subject's deletion
generation; every read stops serving the subject at once, at every basis, because the
visibility query reads the ledger (`Forgotten`). The ledger is its own append-only
Delta table and may live apart from the store (``ledger_uri=``), so a store restored
from an old backup replays it before serving anything.

The ledger holds no content: subjects appear only as keys (`records.subject_key`),
records only by their random ids.

Purge works the same on a local store and on an object store (``s3://…``): it rewrites
the affected files through delta-rs, deletes exactly the files its commits removed (never
a vacuum, which on a shared object store could also take the files of appends still in
flight), and verifies by listing and reading back every object under the store root and
the ledger (`lake.ObjectStore`). On an object store the index is a per-machine local
cache (see `retrieve.Retriever.index`): the purging process rebuilds its own; another
machine's copy is rebuilt without the erased rows when that machine next loads it.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import uuid
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from .errors import ValidationError
from .lake import storage_errors, take_rows
from .logwatch import asking, watch_logs
from .objectstore import Freshness, RemoteFiles, commit_file, open_delta_table, read_table_rows
from .progress import Progress
from .query import Forgotten, Visibility
from .records import TS
from .scope import Scope

if TYPE_CHECKING:  # annotations only: lake and the store import this module
    from .lake import Lake, ObjectStore
    from .redact import Redactor
    from .scope import Principal
    from .store import MemoryStore
    from .time import StoreClock

LEDGER_SCHEMA = pa.schema(
    [
        pa.field("entry_id", pa.string(), nullable=False),
        pa.field("op", pa.string(), nullable=False),  # forget | purge
        pa.field("subject_key", pa.string()),
        pa.field("generation", pa.int64(), nullable=False),
        pa.field("record_ids", pa.list_(pa.string())),
        pa.field("at", TS, nullable=False),
        pa.field("by", pa.string(), nullable=False),
        pa.field("reason", pa.string()),
        pa.field("scope", pa.string()),  # the steward's scope: the subtree the tombstone covers
        pa.field("txn_ids", pa.list_(pa.string())),  # commits that wrote the hidden rows (audit after purge)
        # one-way fingerprints of the hidden rows (`erasure_fingerprint`): a re-run of an undated
        # one is refused (`Writer._erased_history`). Ledgers made before it lack the column.
        pa.field("fingerprints", pa.list_(pa.string())),
    ]
)

#: The ledger's name in `objectstore.Freshness` (beside the tables' kinds).
LEDGER_KEY = "_ledger"

LEDGER_CONFIG = {
    "delta.dataSkippingStatsColumns": "at,generation",
    "delta.logRetentionDuration": "interval 36500 days",
    "delta.enableExpiredLogCleanup": "false",
    "delta.enableChangeDataFeed": "false",
}


def erasure_fingerprint(kind: str, lineage_id: str, scope: Scope, content_hash: str) -> str:
    """What the ledger keeps of one erased row: which record it was, and no content.

    A record with no world time of its own (a note, memory or summary written without
    ``valid_from``) is dated by the clock at the write, so world time cannot tell a re-run
    of an erased one from new memory. Its fingerprint can: the same kind, slot, scope and
    content is the erased row again. The hash is one-way and salted like `subject_key`,
    the suppression list of a mailing system: the ledger can say "this was erased"
    without saying what it was.
    """
    raw = "\x1f".join((kind, lineage_id, scope.path, content_hash))
    return hashlib.sha256(b"memlake-erased\x00" + raw.encode()).hexdigest()[:32]


def fingerprints_of(rows: pa.Table, kind: str) -> list[str]:
    """`erasure_fingerprint` of each stored row of *kind* in *rows*."""
    cols = [rows.column(c).to_pylist() for c in ("lineage_id", "org", "division", "team", "actor", "content_hash")]
    return [
        erasure_fingerprint(kind, lineage, Scope(org, division, team, actor), chash)
        for lineage, org, division, team, actor, chash in zip(*cols, strict=True)
    ]


@dataclass(frozen=True)
class Tombstone:
    """One forget: which subject key, at which generation, hiding which records."""

    entry_id: str
    subject_key: str
    generation: int
    record_ids: tuple[str, ...]
    at: datetime
    by: str
    reason: str | None
    scope: str | None
    txn_ids: tuple[str, ...] = ()
    fingerprints: tuple[str, ...] = ()

    @property
    def scope_parts(self) -> tuple[str | None, str | None, str | None]:
        parts: list[str | None] = list((self.scope or "").split("/")) if self.scope else []
        parts += [None] * (3 - len(parts))
        return parts[0], parts[1], parts[2]


class Ledger:
    """The append-only deletion ledger (a Delta table)."""

    def __init__(
        self, uri: str, *, storage_options: dict[str, str] | None = None, freshness: Freshness | None = None
    ) -> None:
        self.uri = uri
        self.storage_options = storage_options or None
        #: when a read asks the ledger's log for news (the store's, shared with its tables)
        self.freshness = freshness
        self._remote = None if "://" not in uri or uri.startswith("file://") else RemoteFiles(uri, storage_options)
        #: where a local ledger's next commit file would appear (a string: a pathlib probe cost ~30 µs a read)
        self._log_dir = str(Path(uri) / "_delta_log")
        self._lock = threading.RLock()
        try:
            with storage_errors(f"open the deletion ledger at {uri}"):
                self._dt = open_delta_table(uri, storage_options=self.storage_options)
        except TableNotFoundError:
            with storage_errors(f"create the deletion ledger at {uri}"):
                self._dt = DeltaTable.create(
                    uri,
                    schema=LEDGER_SCHEMA,
                    mode="ignore",
                    configuration=LEDGER_CONFIG,
                    storage_options=self.storage_options,
                )
        self._version = -1
        self._entries: list[dict[str, Any]] = []
        #: whether the log changed since it was last asked, on a local ledger (`logwatch`)
        self._watch = watch_logs({LEDGER_KEY: self._log_dir}) if self._remote is None else None
        if self._watch is not None:
            weakref.finalize(self, self._watch.close)
        self.refresh()

    def refresh(self) -> bool:
        """Take in new entries; True when there were any. Inside a public read, asked at most
        once; on a local ledger, only when its log changed since it was last asked (`logwatch`)."""
        with self._lock:
            if self.freshness is not None and not self.freshness.wants_probe(LEDGER_KEY):
                return False
            try:
                if self._watch is not None and self._watch.unchanged_of([LEDGER_KEY]):
                    return False
                with asking(self._watch, LEDGER_KEY):
                    return self._refresh()
            finally:
                if self.freshness is not None:
                    self.freshness.probed(LEDGER_KEY)

    def stop_watching(self) -> None:
        """Let go of the watch over the ledger's log (`logwatch`): the store is closing."""
        if self._watch is not None:
            self._watch.close()

    def _refresh(self) -> bool:
        if self._version >= 0:
            # one stat() (local) or one request (object store) tells whether anything was appended
            if self._remote is not None:
                if self._remote.read_if_exists(commit_file(self._version + 1)) is None:
                    return False
            elif not os.path.exists(f"{self._log_dir}/{self._version + 1:020d}.json"):
                return False
        try:
            self._dt.update_incremental()
        except Exception:
            self._dt = open_delta_table(self.uri, storage_options=self.storage_options)
        if self._dt.version() == self._version:
            return False
        rows = read_table_rows(self._dt, self.uri, self.storage_options, self._stored_schema())
        for missing in (f for f in LEDGER_SCHEMA if f.name not in rows.column_names):
            rows = rows.append_column(missing, pa.nulls(rows.num_rows, missing.type))
        self._entries = rows.sort_by("at").to_pylist()
        self._version = self._dt.version()
        return True

    def _stored_schema(self) -> pa.Schema:
        """`LEDGER_SCHEMA` less the columns this ledger was made before (read as nulls)."""
        stored = set(self._dt.schema().to_arrow().names)
        return pa.schema([f for f in LEDGER_SCHEMA if f.name in stored])

    @property
    def version(self) -> int:
        return self._version

    def tombstones(self) -> list[Tombstone]:
        return [
            Tombstone(
                e["entry_id"],
                e["subject_key"],
                e["generation"],
                tuple(e["record_ids"] or ()),
                e["at"],
                e["by"],
                e["reason"],
                e.get("scope"),
                tuple(e.get("txn_ids") or ()),
                tuple(e.get("fingerprints") or ()),
            )
            for e in self._entries
            if e["op"] == "forget"
        ]

    def entries(self) -> list[dict[str, Any]]:
        return list(self._entries)

    def generations(self, keys: Iterable[str]) -> Mapping[str, int]:
        wanted = set(keys)
        out: dict[str, int] = {}
        for t in self.tombstones():
            if t.subject_key in wanted:
                out[t.subject_key] = max(out.get(t.subject_key, 0), t.generation)
        return out

    def forgotten(self) -> Forgotten:
        tombs = self.tombstones()
        return Forgotten(
            tombstones=tuple((t.subject_key, t.generation, t.at, *t.scope_parts) for t in tombs),
            record_ids=frozenset(i for t in tombs for i in t.record_ids),
            fingerprints=frozenset(f for t in tombs for f in t.fingerprints),
        )

    def append(
        self,
        op: str,
        *,
        subject_key: str | None,
        generation: int,
        record_ids: Sequence[str],
        at: datetime,
        by: str,
        reason: str | None,
        scope: str | None,
        metadata: Mapping[str, str],
        txn_ids: Sequence[str] = (),
        fingerprints: Sequence[str] = (),
    ) -> str:
        entry_id = "led_" + uuid.uuid4().hex
        row = {
            "entry_id": entry_id,
            "op": op,
            "subject_key": subject_key,
            "generation": generation,
            "record_ids": list(record_ids),
            "at": at,
            "by": by,
            "reason": reason,
            "scope": scope,
            "txn_ids": sorted(set(txn_ids)),
            "fingerprints": sorted(set(fingerprints)),
        }
        # a ledger made before a column gains it with its first new entry (older ones read null)
        evolve = len(self._stored_schema()) < len(LEDGER_SCHEMA)
        with storage_errors(f"write to the deletion ledger at {self.uri}"):
            write_deltalake(
                self.uri,
                pa.Table.from_pylist([row], schema=LEDGER_SCHEMA),
                mode="append",
                commit_properties=CommitProperties(custom_metadata=dict(metadata)),
                storage_options=self.storage_options,
                schema_mode="merge" if evolve else None,
            )
        self.refresh()
        return entry_id


@dataclass(frozen=True)
class ForgetReport:
    """What `forget` did: the tombstone's generation and the records it hides."""

    subject_key: str
    generation: int
    record_ids: tuple[str, ...]
    at: datetime
    entry_id: str
    scope: str


def forget_subject(
    lake: Lake,
    ledger: Ledger,
    principal: Principal,
    subject: str,
    *,
    reason: str,
    clock: StoreClock,
    redactor: Redactor,
) -> ForgetReport:
    """Append the tombstone that hides *subject* inside the principal's subtree, at every basis.

    Bumps the subject's deletion generation (stale workers' writes are refused) and
    records the hidden rows and the transactions that wrote them (audit after purge).
    The caller checks the principal's role.
    """
    from .lake import commit_metadata, new_txn_id
    from .records import SPECS, subject_key

    if not isinstance(subject, str) or not subject.strip():
        raise ValidationError("subject must be a non-empty string", field="subject")
    if not reason or not str(reason).strip():
        raise ValidationError("forget needs a reason (it goes into the audit trail)", field="reason")
    lake.refresh()
    key = subject_key(subject)
    ids = records_to_forget(lake, key, principal.scope)
    generation = ledger.generations([key]).get(key, 0) + 1
    at = clock.read()
    # the ledger outlives the purge and holds no content: not even the subject's name
    clean_reason = scrub_subjects(redactor.redact(reason)[0], [subject])
    meta = commit_metadata(
        txn_id=new_txn_id(), committed_at=at, op="forget", actor=principal.id, reason=clean_reason, records=len(ids)
    )
    wanted = pa.array(sorted(set(ids)), pa.string())
    txns: set[str] = set()
    fingerprints: list[str] = []
    for kind in SPECS:
        known = lake.known_rows(kind)
        hidden = known.filter(pc.is_in(known.column("record_id"), value_set=wanted))
        txns.update(hidden.column("txn_id").to_pylist())
        fingerprints += fingerprints_of(hidden, kind)
    entry = ledger.append(
        "forget",
        subject_key=key,
        generation=generation,
        record_ids=ids,
        at=at,
        by=principal.id,
        reason=clean_reason,
        scope=principal.scope.path,
        metadata=meta,
        txn_ids=sorted(txns),
        fingerprints=fingerprints,
    )
    return ForgetReport(key, generation, tuple(ids), at, entry, principal.scope.path)


def scrub_subjects(text: str, names: Iterable[str]) -> str:
    """*text* with each of the subject *names* in it replaced by ``<subject>`` (any case).

    For text that outlives a purge — commit reasons, ledger reasons — which may say why
    but not whom it was about. A name is matched whole (``user:4`` is not scrubbed out of
    ``user:42``). Cheap when no name occurs: one substring test per name.
    """
    lowered = text.lower()
    present = {n for n in (m.strip() for m in names if m) if n and n.lower() in lowered}
    if not present:
        return text
    pattern = "|".join(
        (r"(?<!\w)" if re.match(r"\w", n) else "") + re.escape(n) + (r"(?!\w)" if re.match(r"\w", n[-1]) else "")
        for n in sorted(present, key=len, reverse=True)
    )
    return re.sub(pattern, "<subject>", text, flags=re.IGNORECASE)


def records_to_forget(lake: Lake, key: str, scope: Scope) -> list[str]:
    """The subject's rows inside *scope* (any status, any kind), rows scoped to it as an
    actor, and the closure of everything derived from them."""
    import pyarrow.compute as pc

    from .records import SPECS

    ids: set[str] = set()
    derived: list[tuple[str, list[str]]] = []
    for kind in SPECS:
        rows = lake.known_rows(kind)
        inside = _inside(rows, scope)
        about = pc.and_(
            inside,
            pc.or_(
                pc.equal(rows.column("subject_key"), key), pc.fill_null(pc.equal(rows.column("actor_key"), key), False)
            ),
        )
        ids.update(rows.filter(about).column("record_id").to_pylist())
        has_parents = pc.and_(inside, pc.greater(pc.list_value_length(rows.column("derived_from")), 0))
        for row in rows.filter(pc.fill_null(has_parents, False)).select(["record_id", "derived_from"]).to_pylist():
            derived.append((row["record_id"], row["derived_from"]))
    changed = True
    while changed:  # derived-from closure: a summary of a summary of the subject goes too
        changed = False
        for rid, parents in derived:
            if rid not in ids and ids.intersection(parents):
                ids.add(rid)
                changed = True
    return sorted(ids)


def _inside(rows: pa.Table, scope: Scope) -> Any:
    import pyarrow.compute as pc

    mask = pc.equal(rows.column("org"), scope.org)
    for level in ("division", "team", "actor"):
        value = getattr(scope, level)
        if value is not None:
            mask = pc.and_(mask, pc.fill_null(pc.equal(rows.column(level), value), False))
    return mask


# ---------------------------------------------------------------------------- purge


@dataclass(frozen=True)
class PurgeReport:
    """What a purge erased (or, in a dry run, would erase), and whether the bytes are gone."""

    dry_run: bool
    subjects: int
    rows: dict[str, int]  # kind -> rows erased
    expired_rows: int
    files_rewritten: int
    bytes_reclaimed: int
    partitions_rebuilt: tuple[str, ...]
    verified: bool | None
    leftovers: tuple[str, ...] = ()  # files still holding an erased value (verification failures)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    def summary(self) -> str:
        head = "purge (dry run): would erase" if self.dry_run else "purged"
        rows = ", ".join(f"{n} {k}" for k, n in self.rows.items() if n) or "no rows"
        lines = [f"{head} {rows} ({self.subjects} forgotten subject(s), {self.expired_rows} expired row(s))"]
        if not self.dry_run:
            lines.append(
                f"rewrote {self.files_rewritten} file(s), reclaimed {self.bytes_reclaimed} bytes, "
                f"rebuilt index partitions: {', '.join(self.partitions_rebuilt) or 'none'}"
            )
            lines.append(
                "verified: no erased value left under the store root"
                if self.verified
                else f"VERIFICATION FAILED: {', '.join(self.leftovers)}"
            )
        else:
            lines.append("run again with --yes (dry_run=False) to erase")
        return "\n".join(lines)


#: Values shorter than this are too common to prove anything in a byte scan.
MIN_CANARY = 8


def purge_targets(vis: Visibility, *, now: datetime, grace: timedelta, expired: bool = True) -> dict[str, pa.Table]:
    """Rows to erase per kind: forgotten (ledger) and, with *expired*, past their expiry plus *grace*."""
    from .records import SPECS

    out = {}
    cutoff = now - grace
    with vis._lock:
        vis.lake.refresh()
        for kind in SPECS:
            table = vis._register(kind)
            expiry = "expires_at"
            if vis._refreshed(kind):  # a restated preference lives on: its sightings pushed its expiry out
                from .query import refreshed_expiry_sql

                expiry = refreshed_expiry_sql(vis._register("sighting"), "$cutoff", "$cutoff", alias=table)
            expiring = f"status <> 'retracted' AND expires_at IS NOT NULL AND {expiry} <= $cutoff"
            if not expired or kind not in ("note", "preference", "episode", "turn", "summary", "sighting"):
                expiring = "FALSE"
            out[kind] = vis.execute(
                f"SELECT _row, record_id, org, hidden, ({expiring}) AS expired FROM {table} "
                f"WHERE hidden OR ({expiring})",
                {"cutoff": cutoff} if "$cutoff" in expiring else {},
            )
    return out


def erased_values(lake: Lake, kind: str, positions: Any) -> set[str]:
    """The distinctive text of rows about to be erased: what verification must not find."""
    return _text_values(kind, take_rows(lake.all_rows(kind), positions))


def _text_columns(kind: str) -> list[str]:
    """The columns whose text is a row's content (what verification looks for)."""
    from .records import SPECS

    return ["subject", "evidence", "reason"] + [f.name for f in SPECS[kind].columns if f.type == pa.string()]


def _text_values(kind: str, rows: pa.Table) -> set[str]:
    values: set[str] = set()
    for name in _text_columns(kind):
        if name not in rows.column_names:
            continue
        for value in rows.column(name).to_pylist():
            if isinstance(value, str):
                text = value.strip('"')
                if len(text) >= MIN_CANARY:
                    values.add(text)
    return values


def _names_of(rows: pa.Table, forgotten_keys: set[str]) -> set[str]:
    """The names of forgotten subjects among erased *rows* (long enough to scan for)."""
    return {
        name
        for name, key in zip(rows.column("subject").to_pylist(), rows.column("subject_key").to_pylist(), strict=True)
        if key in forgotten_keys and isinstance(name, str) and len(name) >= MIN_CANARY
    }


def _string_leaves(array: Any) -> Iterable[pa.Array]:
    """Every string array inside an Arrow array, nested ones included (checkpoints are structs)."""
    import pyarrow.compute as pc

    t = array.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        yield array
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from _string_leaves(pc.struct_field(array, i))
    elif pa.types.is_map(t):
        yield from _string_leaves(array.keys)
        yield from _string_leaves(array.items)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        yield from _string_leaves(pc.list_flatten(array))


#: Index payloads: float32 vectors, their int8 codes and units, HNSW links; never text. The byte scan skips them
#: (they are most of a large store's bytes); `index_holding` checks them by record id.
VECTOR_FILES = (".npy", ".hnsw")


def scan_for(
    root: Path,
    values: set[str],
    *,
    skip: Sequence[str] = (),
    skip_suffixes: Sequence[str] = (),
    files: Iterable[Path] | None = None,
) -> list[str]:
    """Files under *root* (or just *files*, which lie under it) that still hold any of
    *values*: raw bytes, and decoded parquet (pages may be compressed; nested columns are walked)."""
    from .lake import ObjectStore

    if not values:
        return []
    root = Path(root)
    paths = files if files is not None else (p for p in root.rglob("*") if p.is_file())
    rels = [
        Path(p).relative_to(root).as_posix()
        for p in paths
        if not any(str(p).startswith(s) for s in skip) and Path(p).suffix not in skip_suffixes
    ]
    return _scan(ObjectStore(str(root)), values, rels)


def _scan(objects: ObjectStore, values: set[str], rels: Iterable[str]) -> list[str]:
    """Which of the objects at *rels* (under *objects*' root) hold any of *values*: sorted paths."""
    if not values:
        return []
    needles, wanted = _needles(values)
    found = []
    for rel in sorted(rels):
        try:
            data = objects.read(rel)
        except FileNotFoundError:  # gone since the listing (or a directory marker): holds nothing
            continue
        if needles.search(data) is not None or (rel.endswith(".parquet") and _parquet_values(data, wanted)):
            found.append(rel)
    return found


def _needles(values: set[str]) -> tuple[re.Pattern[bytes], pa.Array]:
    # one pass per file for every value (a regex alternation beats one `in` per value)
    return (
        re.compile(b"|".join(re.escape(v.encode()) for v in sorted(values, key=len, reverse=True))),
        pa.array(sorted(values), pa.string()),
    )


def _parquet_values(data: bytes, wanted: pa.Array) -> set[str]:
    """Which of *wanted* are whole values (quotes trimmed) somewhere in the parquet file *data*."""
    import pyarrow.parquet as pq

    out: set[str] = set()
    for col in pq.read_table(pa.BufferReader(data), use_threads=False).columns:
        for leaf in _string_leaves(col.combine_chunks()):
            text = pc.utf8_trim(leaf.cast(pa.string()), characters='"')
            out.update(text.filter(pc.fill_null(pc.is_in(text, value_set=wanted), False)).unique().to_pylist())
    return out


def _values_in(data: bytes, parquet: bool, values: set[str], needles: re.Pattern[bytes], wanted: pa.Array) -> set[str]:
    """Which of *values* (compiled by `_needles`) a file's *data* holds: raw bytes, decoded parquet."""
    found: set[str] = set()
    while True:  # a match hides the values overlapping it: look again for the rest
        new = {m.group().decode() for m in needles.finditer(data)} - found
        found |= new
        if not new or found == values:
            break
        needles = _needles(values - found)[0]
    return found | (_parquet_values(data, wanted) if parquet else set())


def verify_erased(
    lake: Lake, ledger: Ledger, index_root: Path, *, values: set[str], names: set[str], record_ids: set[str]
) -> list[str]:
    """Files that still hold something of the erased rows: a purge is verified when none does.

    *values* are the erased rows' distinctive texts, *names* the forgotten subjects' names
    among them, *record_ids* the erased rows. Two rules (docs/design-notes.md § Forgetting):

    * The tables' data files also hold the surviving rows, so a text a surviving row holds
      too (a plan name the subject shares with a kept knowledge-base article) is that
      row's, not a leftover. There the scan counts the erased texts no surviving row
      holds, the erased record ids (bar pointers a surviving row keeps) and the forgotten
      subjects' names (bar that same subject's rows kept outside the steward's subtree).
    * Everything else — commit logs and checkpoints, the ledger, the index, stray copies —
      holds no content by design: every erased text and name counts there.

    Index payloads are floats, checked by record id (`index_holding`). On an object store
    every object under the root (and under a ledger kept apart) is listed and read back
    through `lake.ObjectStore`; the index there is a local cache, checked the same way.
    """
    from .lake import ObjectStore
    from .records import SPECS

    objects = lake.objects
    files = objects.list()

    def is_data(rel: str) -> bool:
        parts = rel.split("/")
        return parts[0] in SPECS and rel.endswith(".parquet") and "_delta_log" not in parts[1:]

    data = sorted(rel for rel in files if is_data(rel))
    strict = values | names
    others = [rel for rel in files if not is_data(rel) and Path(rel).suffix not in VECTOR_FILES]
    leftovers = _scan(objects, strict, others)
    wanted = strict | record_ids
    held: dict[str, set[str]] = {}
    if wanted:
        needles, array = _needles(wanted)
        for rel in data:
            try:
                found = _values_in(objects.read(rel), True, wanted, needles, array)
            except FileNotFoundError:
                continue
            if found:
                held[rel] = found
    if held:  # text a surviving row holds does not count in data files: what is left does
        kept = _Kept(lake)
        hits = set().union(*held.values())
        innocent = {v for v in hits - names if kept.holds(v)} | (hits & names & kept.subjects)
        leftovers += _scan(objects, wanted - innocent, held)
    leftovers.sort()
    if not objects.contains(ledger.uri):
        apart = ObjectStore(ledger.uri, ledger.storage_options)
        leftovers += [f"ledger: {rel}" for rel in _scan(apart, strict, apart.list())]
    return leftovers + index_holding(index_root, record_ids)


class _Kept:
    """What the surviving rows hold: their texts, their subjects, the record ids they point at."""

    def __init__(self, lake: Lake) -> None:
        from .records import SPECS

        self.texts: set[str] = set()
        self.subjects: set[str] = set()
        self.pointers: set[str] = set()
        for kind in SPECS:
            rows = lake.all_rows(kind)
            for name in _text_columns(kind):
                self.texts.update(v.strip('"') for v in pc.unique(rows.column(name)).to_pylist() if isinstance(v, str))
            self.subjects.update(pc.unique(rows.column("subject")).to_pylist())
            self.pointers.update(pc.unique(rows.column("supersedes")).to_pylist())
            self.pointers.update(pc.unique(pc.list_flatten(rows.column("derived_from"))).to_pylist())
        self._joined: str | None = None

    def holds(self, value: str) -> bool:
        """Whether a surviving row holds *value*: as one of its texts, inside one, or as a pointer."""
        if value in self.texts or value in self.pointers:
            return True
        if self._joined is None:
            self._joined = "\x00".join(self.texts)
        return value in self._joined


#: What a purge does after rewriting each table that holds erased rows (a bar's label, or log lines).
PURGE_PHASES = (
    "deleting the files it replaced",
    "rebuilding index partitions",
    "recording in the deletion ledger",
    "verifying: scanning the bytes",
)


def run_purge(
    store: MemoryStore, principal: Principal, *, grace: timedelta, dry_run: bool, expired: bool = True
) -> PurgeReport:
    """Physical erasure: rewrite files without forgotten/expired rows, delete the old files,
    rebuild affected index partitions, reload snapshots, then verify by scanning bytes.

    Safe to re-run: an interrupted purge leaves the tombstones in place (nothing is
    served) and the next purge finishes the job: it deletes the files an earlier purge
    removed from a table but did not get to delete (and verifies their values are gone),
    rebuilds partitions that still hold erased rows, and records in the ledger what the
    interrupted run erased but did not get to record. ``expired=False`` erases forgotten
    rows only (the ledger replay of `open(..., purge_on_open=)`).
    """
    import time as _time

    import pyarrow.compute as pc

    from .lake import commit_metadata, new_txn_id
    from .records import SPECS

    started = _time.perf_counter()
    lake, vis, ledger = store.lake, store.vis, store.ledger
    now = store.clock.peek()
    targets = purge_targets(vis, now=now, grace=grace, expired=expired)
    scope = principal.scope
    rows: dict[str, int] = {}
    expired_rows = 0
    by_kind: dict[str, pa.Table] = {}
    for kind, t in targets.items():
        inside = [
            scope.contains(Scope(r["org"], *_levels(lake, kind, r["_row"])))
            for r in t.select(["org", "_row"]).to_pylist()
        ]
        t = t.filter(pa.array(inside, pa.bool_())) if t.num_rows else t
        by_kind[kind] = t
        rows[kind] = t.num_rows
        expired_rows += (
            int(pc.sum(pc.and_(t.column("expired"), pc.invert(t.column("hidden")))).as_py() or 0) if t.num_rows else 0
        )
    subjects = len({tb.subject_key for tb in ledger.tombstones()})
    if dry_run:
        return PurgeReport(
            True, subjects, rows, expired_rows, 0, 0, (), None, seconds=round(_time.perf_counter() - started, 3)
        )
    values: set[str] = set()
    names: set[str] = set()  # the forgotten subjects' own names: no surviving text excuses them
    forgotten_keys = {tb.subject_key for tb in ledger.tombstones()}
    erased_by_org: dict[str, set[str]] = {}
    erased: list[tuple[str, str]] = []  # (subject_key, record_id)
    for kind, t in by_kind.items():
        if t.num_rows:
            values |= erased_values(lake, kind, t.column("_row"))
            for org, rid in zip(t.column("org").to_pylist(), t.column("record_id").to_pylist(), strict=True):
                erased_by_org.setdefault(org, set()).add(rid)
            picked = take_rows(lake.all_rows(kind), t.column("_row"))
            names |= _names_of(picked, forgotten_keys)
            erased += zip(picked.column("subject_key").to_pylist(), picked.column("record_id").to_pylist(), strict=True)
    before = _sizes(lake)
    files_rewritten = 0
    at = store.clock.read()
    rewrites = [kind for kind, t in by_kind.items() if t.num_rows]
    with Progress(
        "purge", total=len(rewrites) + len(PURGE_PHASES), unit="steps", size=sum(rows.values()), min_items=1
    ) as bar:
        for kind in rewrites:
            t = by_kind[kind]
            bar.phase(f"rewriting the {kind} table")
            quoted = ", ".join("'" + rid.replace("'", "''") + "'" for rid in t.column("record_id").to_pylist())
            meta = commit_metadata(
                txn_id=new_txn_id(),
                committed_at=at,
                op="purge",
                actor=principal.id,
                reason="physical erasure of forgotten and expired memory",
                records=t.num_rows,
            )
            with lake.maintenance_lock(kind):
                dt = open_delta_table(lake.uri(kind), storage_options=lake.storage_options)
                metrics = dt.delete(
                    predicate=f"record_id IN ({quoted})", commit_properties=CommitProperties(custom_metadata=meta)
                )
                files_rewritten += int(metrics.get("num_removed_files", 0))
            bar.advance()
        bar.phase(PURGE_PHASES[0])
        lake.refresh(force=True)
        for kind in SPECS:  # delete what purges removed from the tables (this one and interrupted ones)
            gone = _delete_removed_files(lake, kind)
            if gone.num_rows:  # rows an interrupted purge erased: verify and record them too
                values |= _text_values(kind, gone)
                names |= _names_of(gone, forgotten_keys)
                for org, rid in zip(gone.column("org").to_pylist(), gone.column("record_id").to_pylist(), strict=True):
                    erased_by_org.setdefault(org, set()).add(rid)
                erased += zip(gone.column("subject_key").to_pylist(), gone.column("record_id").to_pylist(), strict=True)
        bar.advance()
        bar.phase(PURGE_PHASES[1])
        partitions: tuple[str, ...] = tuple(store._purge_index(erased_by_org))
        bar.advance()
        bar.phase(PURGE_PHASES[2])
        for key, ids in sorted(_erasures(ledger, lake, erased).items()):  # one entry per subject: audit finds it
            ledger.append(
                "purge",
                subject_key=key or None,
                generation=0,
                record_ids=ids,
                at=at,
                by=principal.id,
                reason=f"erased {len(ids)} row(s)" + ("" if key else " past their expiry"),
                scope=scope.path,
                metadata=commit_metadata(
                    txn_id=new_txn_id(),
                    committed_at=at,
                    op="purge",
                    actor=principal.id,
                    reason="purge",
                    records=len(ids),
                ),
            )
        bar.advance()
        bar.phase(PURGE_PHASES[3])
        after = _sizes(lake)
        leftovers = verify_erased(
            lake,
            ledger,
            store.retriever.index.root,
            values=values,
            names=names,
            record_ids={r for ids in erased_by_org.values() for r in ids},
        )
        bar.advance()
        return PurgeReport(
            False,
            subjects,
            rows,
            expired_rows,
            files_rewritten,
            max(0, sum(before.values()) - sum(after.values())),
            partitions,
            not leftovers,
            tuple(leftovers),
            seconds=round(_time.perf_counter() - started, 3),
        )


def index_holding(root: Path, record_ids: set[str]) -> list[str]:
    """Saved index partitions (any model, any generation, unfinished ones too) that still
    list one of *record_ids*: their vectors sit beside the list."""
    import json

    found = []
    if record_ids and Path(root).is_dir():
        for path in sorted(Path(root).rglob("ids.json")):
            try:
                held = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                held = None
            if not isinstance(held, list) or not record_ids.isdisjoint(held):
                found.append(f"index: {path}")
    return found


def _erasures(ledger: Ledger, lake: Lake, erased: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """What the purge entries of the ledger record: erased record ids per forgotten subject key
    ("" for memory past its expiry), including rows an interrupted purge erased unrecorded."""
    tombs = ledger.tombstones()
    keys = {t.subject_key for t in tombs}
    owner = {rid: t.subject_key for t in tombs for rid in t.record_ids}  # derived rows belong to the subject
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for key, rid in erased:
        if rid not in seen:
            seen.add(rid)
            out.setdefault(key if key in keys else owner.get(rid, ""), []).append(rid)
    recorded = {rid for e in ledger.entries() if e["op"] == "purge" for rid in (e["record_ids"] or ())}
    unrecorded = set(owner) - recorded - seen
    if unrecorded:
        from .records import SPECS

        live = {rid for kind in SPECS for rid in lake.all_rows(kind).column("record_id").to_pylist()}
        for rid in sorted(unrecorded - live):
            out.setdefault(owner[rid], []).append(rid)
    return out


def _levels(lake: Lake, kind: str, position: int) -> tuple[str | None, str | None, str | None]:
    row = lake.all_rows(kind).slice(position, 1).select(["division", "team", "actor"]).to_pylist()[0]
    return row["division"], row["team"], row["actor"]


def _sizes(lake: Lake) -> dict[str, int]:
    """Sizes of the tables' data files (what a purge reclaims; logs and index are counted apart)."""
    from .records import SPECS

    return {
        rel: size
        for kind in SPECS
        for rel, size in lake.objects.list(kind).items()
        if rel.endswith(".parquet") and not rel.startswith(f"{kind}/_delta_log/")
    }


def _delete_removed_files(lake: Lake, kind: str) -> pa.Table:
    """Delete the files rewrites removed from *kind*'s table; return the rows that were in them
    and are no longer in the table (an interrupted purge's erasures: empty after a clean run).

    A compaction's old files hold the rows it copied, the erased ones too, so every file a
    purge or compaction removed goes, once no snapshot file refers to it: those the log
    names (the checkpoint's tombstones and the rewrite commits still in the log), and those
    it no longer names (their tombstones expired) that are older than
    `lake.IN_FLIGHT_GRACE_SECONDS` (`Lake.unreferenced_files`). Never a vacuum, which
    on an object store would also take the files of appends still in flight; the same on a
    local store and an object store.
    """
    empty = pa.table(
        {
            "record_id": pa.array([], pa.string()),
            "subject_key": pa.array([], pa.string()),
            "org": pa.array([], pa.string()),
        }
    )
    # Under the lock that checkpoints take too: a checkpoint that prunes the log between reading
    # the tombstones and reading the rewrite commits would hide the files those commits removed
    # (a store's background maintenance, or another process's, may checkpoint at any time).
    with lake.maintenance_lock(kind):
        lake.refresh(kinds=[kind])
        unreferenced = lake.unreferenced_files(kind)
        doomed = list(dict.fromkeys(unreferenced.named + unreferenced.expired))
        if not doomed:
            return empty
        return _delete_files(lake, kind, doomed, empty)


def _with_our_types(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """*table*'s columns cast to the types of *schema* (columns it does not name stay as
    they are): the files delta-rs writes (a purge's rewrite) hold ``string_view`` columns,
    which ``pc.is_in``, ``filter`` and concatenation with our own files' columns do not take."""
    fields = [schema.field(f.name) if f.name in schema.names else f for f in table.schema]
    return table if fields == list(table.schema) else table.cast(pa.schema(fields))


def _delete_files(lake: Lake, kind: str, doomed: Sequence[str], empty: pa.Table) -> pa.Table:
    from urllib.parse import unquote

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .records import SPECS

    live = None
    parts = []
    for rel in doomed:
        key = f"{kind}/{rel}"
        try:
            raw = lake.objects.read(key)
        except FileNotFoundError:
            continue
        try:
            data = _with_our_types(pq.read_table(pa.BufferReader(raw), use_threads=False), SPECS[kind].schema)
        except Exception:  # a torn file: nothing to verify in it, delete it all the same
            data = None
        if data is not None and data.num_rows:
            if live is None:
                live = lake.all_rows(kind).column("record_id").combine_chunks()
            data = data.filter(pc.invert(pc.is_in(data.column("record_id"), value_set=live)))
            org = next((unquote(p[4:]) for p in Path(rel).parts if p.startswith("org=")), None)
            if "org" not in data.column_names:
                data = data.append_column("org", pa.array([org] * data.num_rows, pa.string()))
            present = set(data.column_names)
            names = [c for c in SPECS[kind].schema.names if c in present]
            parts.append(data.select(names))
        lake.objects.delete(key)
    if not parts:
        return empty
    return pa.concat_tables(parts, promote_options="permissive")
