"""The audit trail, read from the commit log and the deletion ledger.

It answers "who acted, on what belief, with what authority" without an export: every
event is a Delta commit (or a ledger entry) with its version, the store clock's
reading, the operation, the actor and the reason — and record ids, never content.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .forget import Ledger
from .lake import Lake
from .records import SPECS, subject_key
from .scope import Principal, Scope


@dataclass(frozen=True)
class AuditEvent:
    table: str
    version: int
    committed_at: datetime
    operation: str
    actor: str | None
    reason: str | None
    txn_id: str | None
    record_ids: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


AUDIT_SCHEMA = pa.schema(
    [
        ("table", pa.string()),
        ("version", pa.int64()),
        ("committed_at", pa.timestamp("us", tz="UTC")),
        ("operation", pa.string()),
        ("actor", pa.string()),
        ("reason", pa.string()),
        ("txn_id", pa.string()),
        ("record_ids", pa.list_(pa.string())),
    ]
)


class AuditLog(list[AuditEvent]):
    """Audit events, oldest first (a list of `AuditEvent`), with `to_arrow()` / `to_polars()`."""

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_pylist([e.to_dict() for e in self], schema=AUDIT_SCHEMA)

    def to_polars(self) -> Any:
        from .tables import to_polars

        return to_polars(self.to_arrow())


def _in_subtree(rows: pa.Table, scope: Scope) -> pa.ChunkedArray:
    """Rows whose scope is *scope* or inside it (the steward's subtree)."""
    mask = pc.equal(rows.column("org"), scope.org)
    for level in ("division", "team", "actor"):
        value = getattr(scope, level)
        if value is not None:
            mask = pc.and_kleene(mask, pc.fill_null(pc.equal(rows.column(level), value), False))
    return mask


def audit_trail(
    lake: Lake,
    ledger: Ledger,
    principal: Principal,
    *,
    subject: str | None = None,
    record_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    actor: str | None = None,
) -> AuditLog:
    """Events inside the steward's subtree, oldest first, narrowed by subject, record, window and actor.

    The window ``[since, until)`` and ``actor`` apply to each event's commit (or ledger entry).
    """

    def in_window(at: datetime, who: str | None) -> bool:
        return (since is None or at >= since) and (until is None or at < until) and (actor is None or who == actor)

    key = subject_key(subject) if subject is not None else None
    touched: dict[tuple[str, str], list[str]] = {}  # (table, txn_id) -> record ids
    for kind in SPECS:
        rows = lake.known_rows(kind)
        mask = _in_subtree(rows, principal.scope)
        if key is not None:
            mask = pc.and_kleene(mask, pc.equal(rows.column("subject_key"), key))
        if record_id is not None:
            # the row itself, or a later row acting on it (superseding, approving, retracting);
            # `supersedes` is null on most rows, and a null must read as "no", not drop the row
            by_id = pc.or_kleene(
                pc.equal(rows.column("record_id"), record_id),
                pc.fill_null(pc.equal(rows.column("supersedes"), record_id), False),
            )
            mask = pc.and_kleene(mask, by_id)
        if since is not None or until is not None or actor is not None:
            txns = [c.txn_id for c in lake.views[kind].by_txn.values() if in_window(c.committed_at, c.actor)]
            mask = pc.and_kleene(mask, pc.is_in(rows.column("txn_id"), value_set=pa.array(txns, pa.string())))
        picked = rows.filter(pc.fill_null(mask, False))
        for rid, txn in zip(picked.column("record_id").to_pylist(), picked.column("txn_id").to_pylist(), strict=True):
            touched.setdefault((kind, txn), []).append(rid)
    events = []
    for (kind, txn), ids in touched.items():
        commit = lake.views[kind].by_txn.get(txn)
        if commit is not None:
            events.append(
                AuditEvent(
                    kind,
                    commit.version,
                    commit.committed_at,
                    commit.operation,
                    commit.actor,
                    commit.reason,
                    txn,
                    tuple(sorted(ids)),
                )
            )
    seen = {(e.table, e.version) for e in events}
    for tomb in ledger.tombstones():  # the writes of forgotten (maybe purged) rows, from the log
        if key is not None and tomb.subject_key == key:
            for kind in SPECS:
                for txn in tomb.txn_ids:
                    commit = lake.views[kind].by_txn.get(txn)
                    if (
                        commit is not None
                        and (kind, commit.version) not in seen
                        and in_window(commit.committed_at, commit.actor)
                    ):
                        seen.add((kind, commit.version))
                        events.append(
                            AuditEvent(
                                kind,
                                commit.version,
                                commit.committed_at,
                                commit.operation,
                                commit.actor,
                                commit.reason,
                                txn,
                                (),
                            )
                        )
    for entry in ledger.entries():
        if key is not None or record_id is not None:
            wanted = (key is not None and entry["subject_key"] == key) or (
                record_id is not None and record_id in (entry["record_ids"] or ())
            )
        else:  # a window over everything: the entries of stewards inside this one's subtree
            wanted = (
                principal.scope.depth == 1
                if entry.get("scope") is None
                else principal.scope.contains(Scope.parse(entry["scope"]))
            )
        if wanted and in_window(entry["at"], entry["by"]):
            events.append(
                AuditEvent(
                    "ledger",
                    -1,
                    entry["at"],
                    entry["op"],
                    entry["by"],
                    entry["reason"],
                    entry["entry_id"],
                    tuple(entry["record_ids"] or ()),
                )
            )
    # equal clock readings (a simulated clock) still read in causal order: writes, forget, purge
    rank = {"forget": 1, "purge": 2}
    return AuditLog(sorted(events, key=lambda e: (e.committed_at, rank.get(e.operation, 0), e.table, e.version)))
