"""Forgetting: the deletion ledger, deletion generations, tombstones.

``forget(subject)`` appends a tombstone to the ledger and bumps the subject's deletion
generation; every read stops serving the subject at once, at every basis, because the
visibility query reads the ledger (`Forgotten`). The ledger is its own append-only
Delta table and may live apart from the store (``ledger_uri=``), so a store restored
from an old backup replays it before serving anything.

The ledger holds no content: subjects appear only as keys (`records.subject_key`),
records only by their random ids.
"""

from __future__ import annotations

import threading
from pathlib import Path
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Mapping, Optional, Sequence

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from .query import Forgotten
from .records import TS
from .scope import Scope

LEDGER_SCHEMA = pa.schema([
    pa.field("entry_id", pa.string(), nullable=False),
    pa.field("op", pa.string(), nullable=False),  # forget | purge
    pa.field("subject_key", pa.string()),
    pa.field("generation", pa.int64(), nullable=False),
    pa.field("record_ids", pa.list_(pa.string())),
    pa.field("at", TS, nullable=False),
    pa.field("by", pa.string(), nullable=False),
    pa.field("reason", pa.string()),
    pa.field("scope", pa.string()),  # the steward's scope: the subtree the tombstone covers
])

LEDGER_CONFIG = {
    "delta.dataSkippingStatsColumns": "at,generation",
    "delta.logRetentionDuration": "interval 36500 days",
    "delta.enableExpiredLogCleanup": "false",
    "delta.enableChangeDataFeed": "false",
}


@dataclass(frozen=True)
class Tombstone:
    """One forget: which subject key, at which generation, hiding which records."""

    entry_id: str
    subject_key: str
    generation: int
    record_ids: tuple[str, ...]
    at: datetime
    by: str
    reason: Optional[str]
    scope: Optional[str]

    @property
    def scope_parts(self) -> tuple[Optional[str], Optional[str], Optional[str]]:
        parts = (self.scope or "").split("/") if self.scope else []
        parts += [None] * (3 - len(parts))
        return parts[0], parts[1], parts[2]


class Ledger:
    """The append-only deletion ledger (a Delta table)."""

    def __init__(self, uri: str, *, storage_options: Optional[dict[str, str]] = None) -> None:
        self.uri = uri
        self.storage_options = storage_options or None
        self._lock = threading.RLock()
        try:
            self._dt = DeltaTable(uri, storage_options=self.storage_options)
        except TableNotFoundError:
            self._dt = DeltaTable.create(uri, schema=LEDGER_SCHEMA, mode="ignore",
                                         configuration=LEDGER_CONFIG, storage_options=self.storage_options)
        self._version = -1
        self._entries: list[dict] = []
        self.refresh()

    def refresh(self) -> bool:
        with self._lock:
            if self._version >= 0 and "://" not in self.uri:
                # local ledger: one stat() tells whether anything was appended
                if not (Path(self.uri) / "_delta_log" / f"{self._version + 1:020d}.json").exists():
                    return False
            try:
                self._dt.update_incremental()
            except Exception:
                self._dt = DeltaTable(self.uri, storage_options=self.storage_options)
            if self._dt.version() == self._version:
                return False
            self._entries = self._dt.to_pyarrow_dataset().to_table().sort_by("at").to_pylist()
            self._version = self._dt.version()
            return True

    @property
    def version(self) -> int:
        return self._version

    def tombstones(self) -> list[Tombstone]:
        return [
            Tombstone(e["entry_id"], e["subject_key"], e["generation"], tuple(e["record_ids"] or ()),
                      e["at"], e["by"], e["reason"], e.get("scope"))
            for e in self._entries if e["op"] == "forget"
        ]

    def entries(self) -> list[dict]:
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
        )

    def append(self, op: str, *, subject_key: Optional[str], generation: int, record_ids: Sequence[str],
               at: datetime, by: str, reason: Optional[str], scope: Optional[str],
               metadata: Mapping[str, str]) -> str:
        entry_id = "led_" + uuid.uuid4().hex
        row = {"entry_id": entry_id, "op": op, "subject_key": subject_key, "generation": generation,
               "record_ids": list(record_ids), "at": at, "by": by, "reason": reason, "scope": scope}
        write_deltalake(self.uri, pa.Table.from_pylist([row], schema=LEDGER_SCHEMA), mode="append",
                        commit_properties=CommitProperties(custom_metadata=dict(metadata)),
                        storage_options=self.storage_options)
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


def records_to_forget(lake, key: str, scope: Scope) -> list[str]:
    """The subject's rows inside *scope* (any status, any kind), rows scoped to it as an
    actor, and the closure of everything derived from them."""
    import pyarrow.compute as pc

    from .records import SPECS

    ids: set[str] = set()
    derived: list[tuple[str, list[str]]] = []
    for kind in SPECS:
        rows = lake.known_rows(kind)
        inside = _inside(rows, scope)
        about = pc.and_(inside, pc.or_(pc.equal(rows.column("subject_key"), key),
                                       pc.fill_null(pc.equal(rows.column("actor_key"), key), False)))
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


def _inside(rows, scope: Scope):
    import pyarrow.compute as pc

    mask = pc.equal(rows.column("org"), scope.org)
    for level in ("division", "team", "actor"):
        value = getattr(scope, level)
        if value is not None:
            mask = pc.and_(mask, pc.fill_null(pc.equal(rows.column(level), value), False))
    return mask
