"""Reading what is there: one record by id, a subject's memories, a slot's history, the review queue.

Every call here reads through the one visibility query (`query.Visibility`): `listing`
through `Visibility.rows` (what recall and get_fact serve), `get`, `history` and
`pending` through `Visibility.versions` — the same scope, forgetting, system-time and
status rules without the valid-time and supersession ones, so a reader sees every
version it could have been served, and a forgotten subject has no history at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa

from .errors import ValidationError
from .lake import Lake, rows_to_pylist
from .query import Visibility
from .records import SPECS, Envelope, kind_of_record_id, record_from_row, to_dict
from .scope import Principal
from .tables import to_polars
from .time import Basis

TS = pa.timestamp("us", tz="UTC")

#: Columns of a listing's table (`Listing.to_arrow`): the envelope, a kind-independent text
#: and the record's own fields as JSON.
LISTING_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("record_id", pa.string()),
        ("lineage_id", pa.string()),
        ("subject", pa.string()),
        ("scope", pa.string()),
        ("text", pa.string()),
        ("valid_from", TS),
        ("valid_to", TS),
        ("known_since", TS),
        ("expires_at", TS),
        ("source", pa.string()),
        ("evidence", pa.string()),
        ("authority", pa.string()),
        ("status", pa.string()),
        ("supersedes", pa.string()),
        ("fields", pa.string()),
    ]
)


def record_text(record: Envelope) -> str:
    """The record's search text (what recall ranks and the context block prints)."""
    spec = SPECS[record.kind]
    cols = {**spec.to_columns(record), "subject": record.subject_name}
    return spec.search_text_of(cols)


def _row_of(record: Envelope) -> dict[str, Any]:
    import json

    start, end = record.valid_interval
    own = {k: v for k, v in to_dict(record).items() if k not in LISTING_SCHEMA.names}
    return {
        "kind": record.kind,
        "record_id": record.record_id,
        "lineage_id": record.lineage_id,
        "subject": record.subject_name,
        "scope": record.scope.path if record.scope else None,
        "text": record_text(record),
        "valid_from": start,
        "valid_to": end,
        "known_since": record.known_since,
        "expires_at": record.expires_at,
        "source": record.source,
        "evidence": record.evidence,
        "authority": record.authority,
        "status": record.status,
        "supersedes": record.supersedes,
        "fields": json.dumps(own, default=str, ensure_ascii=False),
    }


class Listing(Sequence[Envelope]):
    """Records, in order, with `to_arrow()` / `to_polars()` (one row per record)."""

    def __init__(self, records: Sequence[Envelope]) -> None:
        self._records = tuple(records)

    def __getitem__(self, i: Any) -> Any:
        return self._records[i]

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Envelope]:
        return iter(self._records)

    def __repr__(self) -> str:
        return f"Listing({len(self)} record(s))"

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_pylist([_row_of(r) for r in self._records], schema=LISTING_SCHEMA)

    def to_polars(self) -> Any:
        return to_polars(self.to_arrow())


@dataclass(frozen=True)
class SlotVersion:
    """One version of a slot as a reader may see it, with both time intervals.

    ``valid_from``/``valid_to``: world time the version holds — its own end, its
    expiry, or the start of the version that superseded it, whichever comes first
    (None: open). ``known_from``/``known_to``: system time the store held it as
    current — from its commit to its retraction or its replacement by a correction of
    the same valid time (None: still held). ``supersedes``/``superseded_by`` are the
    write path's pointers; ``reason`` is the version's own, else its commit's.
    """

    record: Envelope
    valid_from: datetime | None
    valid_to: datetime | None
    known_from: datetime | None
    known_to: datetime | None
    supersedes: str | None
    superseded_by: str | None
    reason: str | None
    retracted: bool
    retraction_reason: str | None

    @property
    def record_id(self) -> str:
        return str(self.record.record_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "record_id": self.record_id,
            "kind": self.record.kind,
            "scope": self.record.scope.path if self.record.scope else None,
            "text": record_text(self.record),
            "value": getattr(self.record, "value", None),
            "valid_from": self.valid_from,
            "valid_to": self.valid_to,
            "known_from": self.known_from,
            "known_to": self.known_to,
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
            "reason": self.reason,
            "retracted": self.retracted,
            "retraction_reason": self.retraction_reason,
            "source": self.record.source,
            "evidence": self.record.evidence,
        }


HISTORY_SCHEMA = pa.schema(
    [
        ("record_id", pa.string()),
        ("kind", pa.string()),
        ("scope", pa.string()),
        ("text", pa.string()),
        ("value", pa.string()),
        ("valid_from", TS),
        ("valid_to", TS),
        ("known_from", TS),
        ("known_to", TS),
        ("supersedes", pa.string()),
        ("superseded_by", pa.string()),
        ("reason", pa.string()),
        ("retracted", pa.bool_()),
        ("retraction_reason", pa.string()),
        ("source", pa.string()),
        ("evidence", pa.string()),
    ]
)


class History(Sequence[SlotVersion]):
    """A slot's versions, oldest valid time first, with `to_arrow()` / `to_polars()`."""

    def __init__(self, versions: Sequence[SlotVersion]) -> None:
        self._versions = tuple(versions)

    def __getitem__(self, i: Any) -> Any:
        return self._versions[i]

    def __len__(self) -> int:
        return len(self._versions)

    def __iter__(self) -> Iterator[SlotVersion]:
        return iter(self._versions)

    def __repr__(self) -> str:
        return f"History({len(self)} version(s))"

    def to_arrow(self) -> pa.Table:
        import json

        rows = []
        for v in self._versions:
            row = v.to_dict()
            row["value"] = None if row["value"] is None else json.dumps(row["value"], default=str, ensure_ascii=False)
            rows.append(row)
        return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)

    def to_polars(self) -> Any:
        return to_polars(self.to_arrow())


# --------------------------------------------------------------------------- the calls


def get(vis: Visibility, record_id: str, principal: Principal, basis: Basis) -> Envelope | None:
    """The record with this id if the principal may see it (any version, superseded or not)."""
    kind = kind_of_record_id(record_id)
    rows = vis.versions(kind, principal, basis, filters={"record_id": str(record_id)})
    return record_from_row(kind, rows_to_pylist(rows)[0]) if rows.num_rows else None


def listing(
    vis: Visibility,
    subject: str | None,
    principal: Principal,
    basis: Basis,
    kinds: Sequence[str],
    *,
    filters: Mapping[str, Any] | None = None,
) -> Listing:
    """A subject's memories as the principal would be served them at *basis*, per kind, newest first.

    A filter naming a column a kind lacks excludes that kind (as in recall).
    """
    out: list[Envelope] = []
    for kind in kinds:
        if filters and not set(filters) <= set(SPECS[kind].schema.names):
            continue
        rows = vis.rows(kind, principal, basis, subject=subject, filters=filters)
        out += [record_from_row(kind, r) for r in rows_to_pylist(rows)]
    return Listing(out)


def history(
    vis: Visibility,
    lake: Lake,
    principal: Principal,
    basis: Basis,
    *,
    kind: str,
    subject: str | None = None,
    attribute: str | None = None,
    lineage_id: str | None = None,
) -> History:
    """Every version of one slot the principal may see, as known at ``basis.known_at``."""
    if kind not in SPECS:
        raise ValidationError(f"unknown kind {kind!r}", field="kind")
    filters: dict[str, Any] = {}
    if lineage_id is not None:
        filters["lineage_id"] = str(lineage_id)
    elif subject is not None and attribute is not None and "attribute" in SPECS[kind].schema.names:
        filters["attribute"] = str(attribute).strip().lower()
    else:
        raise ValidationError(
            "history needs subject and attribute (facts, preferences), or lineage=", field="attribute"
        )
    rows = rows_to_pylist(
        vis.versions(kind, principal, basis, subject=subject, filters=filters, statuses=("active", "retracted"))
    )
    actives = [r for r in rows if r["status"] == "active"]
    retractions = {r["supersedes"]: r for r in rows if r["status"] == "retracted" and r["supersedes"]}
    successor = {r["supersedes"]: r for r in actives if r["supersedes"]}
    versions = []
    for row in actives:
        record = record_from_row(kind, row)
        start, end = record.valid_interval
        nxt = successor.get(row["record_id"])
        ends = [t for t in (end, row["expires_at"]) if t is not None]
        known_to = row["retracted_since"]
        if nxt is not None:
            if start is not None and nxt["valid_from"] > start:
                ends.append(nxt["valid_from"])
            else:  # a correction of the same valid time replaces it in the store's belief
                known_to = min(t for t in (known_to, nxt["known_since"]) if t is not None)
        retraction = retractions.get(row["record_id"])
        versions.append(
            SlotVersion(
                record=record,
                valid_from=start,
                valid_to=min(ends) if ends else None,
                known_from=row["known_since"],
                known_to=known_to,
                supersedes=row["supersedes"],
                superseded_by=nxt["record_id"] if nxt else None,
                reason=row["reason"] or _commit_reason(lake, kind, row["txn_id"]),
                retracted=row["retracted_since"] is not None,
                retraction_reason=_commit_reason(lake, kind, retraction["txn_id"])
                if retraction and row["retracted_since"] is not None
                else None,
            )
        )
    return History(versions)


def pending(vis: Visibility, principal: Principal, basis: Basis, kinds: Sequence[str]) -> Listing:
    """Proposals in the curator's subtree that no approval points at yet, oldest first."""
    principal.check_curate(principal.scope, "review proposals")
    out: list[Envelope] = []
    for kind in kinds:
        rows = vis.versions(kind, principal, basis, statuses=("proposed",), subtree=True, unapproved=True)
        out += [record_from_row(kind, r) for r in rows_to_pylist(rows)]
    return Listing(sorted(out, key=lambda r: r.known_since or basis.known_at))


def _commit_reason(lake: Lake, kind: str, txn_id: str | None) -> str | None:
    commit = lake.views[kind].by_txn.get(txn_id) if txn_id else None
    return commit.reason if commit is not None else None


def proposer_of(lake: Lake, record: Envelope) -> str | None:
    """Who proposed a record (the actor of its commit)."""
    commit = lake.views[record.kind].by_txn.get(record.txn_id) if record.txn_id else None
    return commit.actor if commit is not None else None
