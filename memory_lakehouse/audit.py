"""The audit trail, read from the commit log and the deletion ledger.

It answers "who acted, on what belief, with what authority" without an export: every
event is a Delta commit (or a ledger entry) with its version, the store clock's
reading, the operation, the actor and the reason — and record ids, never content.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Optional

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
    actor: Optional[str]
    reason: Optional[str]
    txn_id: Optional[str]
    record_ids: tuple[str, ...]


def audit_trail(lake: Lake, ledger: Ledger, principal: Principal, *, subject: Optional[str] = None,
                record_id: Optional[str] = None) -> list[AuditEvent]:
    """Events touching *subject* and/or *record_id* inside the steward's subtree, oldest first."""
    key = subject_key(subject) if subject is not None else None
    touched: dict[tuple[str, str], list[str]] = {}  # (table, txn_id) -> record ids
    for kind in SPECS:
        rows = lake.known_rows(kind)
        mask = None
        if key is not None:
            mask = pc.equal(rows.column("subject_key"), key)
        if record_id is not None:
            # the row itself, or a later row acting on it (superseding, approving, retracting);
            # `supersedes` is null on most rows, and a null must read as "no", not drop the row
            by_id = pc.or_kleene(pc.equal(rows.column("record_id"), record_id),
                                 pc.fill_null(pc.equal(rows.column("supersedes"), record_id), False))
            mask = by_id if mask is None else pc.and_kleene(mask, by_id)
        picked = rows.filter(pc.fill_null(mask, False)) if mask is not None else rows
        for row in picked.select(["record_id", "txn_id", "org", "division", "team", "actor"]).to_pylist():
            scope = Scope(row["org"], row["division"], row["team"], row["actor"])
            if principal.scope.contains(scope):
                touched.setdefault((kind, row["txn_id"]), []).append(row["record_id"])
    events = []
    for (kind, txn), ids in touched.items():
        commit = lake.views[kind].by_txn.get(txn)
        if commit is not None:
            events.append(AuditEvent(kind, commit.version, commit.committed_at, commit.operation, commit.actor,
                                     commit.reason, txn, tuple(sorted(ids))))
    seen = {(e.table, e.version) for e in events}
    for tomb in ledger.tombstones():  # the writes of forgotten (maybe purged) rows, from the log
        if key is not None and tomb.subject_key == key:
            for kind in SPECS:
                for txn in tomb.txn_ids:
                    commit = lake.views[kind].by_txn.get(txn)
                    if commit is not None and (kind, commit.version) not in seen:
                        seen.add((kind, commit.version))
                        events.append(AuditEvent(kind, commit.version, commit.committed_at, commit.operation,
                                                 commit.actor, commit.reason, txn, ()))
    for entry in ledger.entries():
        if (key is not None and entry["subject_key"] == key) or (
                record_id is not None and record_id in (entry["record_ids"] or ())):
            events.append(AuditEvent("ledger", -1, entry["at"], entry["op"], entry["by"], entry["reason"],
                                     entry["entry_id"], tuple(entry["record_ids"] or ())))
    # equal clock readings (a simulated clock) still read in causal order: writes, forget, purge
    rank = {"forget": 1, "purge": 2}
    return sorted(events, key=lambda e: (e.committed_at, rank.get(e.operation, 0), e.table, e.version))
