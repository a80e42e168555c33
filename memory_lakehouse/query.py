"""The one visibility query: what a principal may be served at a basis.

Every read path — recall, get_fact, episodes, policy resolution, replay, the evals —
calls `Visibility.rows`. It runs one DuckDB query over the warm Arrow snapshot of a
kind's table and applies, in this order:

1. **system time**: rows whose commit is known at ``known_at`` (incomplete transactions
   never appear; see `Lake.known_rows`);
2. **scope**: the principal's own scope and its ancestors', never a sibling's, and the
   caller's filters can only narrow that;
3. **forgetting**: subjects and records in the deletion ledger, at every basis;
4. **status**: retracted records and proposals are never served;
5. **supersession**: per slot (lineage) and scope, the version with the latest
   ``valid_from`` at or before ``valid_at`` (a later commit breaks ties) is the head;
   a head that has ended (``valid_to``) or expired at ``valid_at`` is not served;
   then the most specific scope's head wins the slot.

Rule 5 makes supersession a read-time decision, so the write path stays append-only
and "what was true on day 10" keeps working after the day-14 update.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import duckdb
import pyarrow as pa

from .errors import ValidationError
from .lake import Lake
from .records import SPECS, subject_key
from .scope import Principal
from .time import Basis

Tracer = Callable[[str, Mapping[str, Any]], None]

def scope_depth_sql(alias: str = "") -> str:
    a = f"{alias}." if alias else ""
    return (f"(CASE WHEN {a}actor IS NOT NULL THEN 4 WHEN {a}team IS NOT NULL THEN 3 "
            f"WHEN {a}division IS NOT NULL THEN 2 ELSE 1 END)")


@dataclass(frozen=True)
class Forgotten:
    """What the deletion ledger hides, at every basis.

    Each tombstone ``(key, generation, forgotten_at, scope)`` hides, inside its scope's
    subtree, rows about the subject written at an older generation and rows scoped to
    an actor of that key known by ``forgotten_at``. ``record_ids`` (the subject's rows
    and everything derived from them) are hidden outright, and so is anything derived
    from them later.
    """

    tombstones: tuple[tuple[str, int, datetime, Optional[str], Optional[str], Optional[str]], ...] = ()
    record_ids: frozenset[str] = frozenset()

    def as_tables(self) -> tuple[pa.Table, pa.Table]:
        t = self.tombstones
        return (
            pa.table({
                "key": pa.array([x[0] for x in t], pa.string()),
                "generation": pa.array([x[1] for x in t], pa.int64()),
                "forgotten_at": pa.array([x[2] for x in t], pa.timestamp("us", tz="UTC")),
                "org": pa.array([x[3] for x in t], pa.string()),
                "division": pa.array([x[4] for x in t], pa.string()),
                "team": pa.array([x[5] for x in t], pa.string()),
            }),
            pa.table({"record_id": pa.array(sorted(self.record_ids), pa.string())}),
        )


def forgotten_sql(alias: str = "") -> str:
    """The ledger condition: True for rows that are *not* forgotten."""
    a = f"{alias}." if alias else ""
    return f"""NOT EXISTS (SELECT 1 FROM forgotten_subjects f
           WHERE ((f.key = {a}subject_key AND {a}generation < f.generation)
                  OR (f.key = {a}actor_key AND {a}known_since <= f.forgotten_at))
             AND (f.org IS NULL OR f.org = {a}org)
             AND (f.division IS NULL OR f.division = {a}division)
             AND (f.team IS NULL OR f.team = {a}team))
      AND {a}record_id NOT IN (SELECT record_id FROM forgotten_records)
      AND NOT list_has_any(coalesce({a}derived_from, []), (SELECT coalesce(list(record_id), []) FROM forgotten_records))"""


def bases_table(reads: Sequence[tuple[str, Principal, Basis, Optional[str]]]) -> pa.Table:
    """The bases of many reads: (decision_id, principal, basis, subject or None)."""
    ts = pa.timestamp("us", tz="UTC")
    return pa.table({
        "decision_id": pa.array([r[0] for r in reads], pa.string()),
        "known_at": pa.array([r[2].known_at for r in reads], ts),
        "valid_at": pa.array([r[2].valid_at for r in reads], ts),
        "org": pa.array([r[1].scope.org for r in reads], pa.string()),
        "division": pa.array([r[1].scope.division for r in reads], pa.string()),
        "team": pa.array([r[1].scope.team for r in reads], pa.string()),
        "actor": pa.array([r[1].scope.actor for r in reads], pa.string()),
        "subject_key": pa.array([subject_key(r[3]) if r[3] is not None else None for r in reads], pa.string()),
    })


class Visibility:
    """Runs the visibility query over a `Lake`'s snapshots with one DuckDB connection."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.con = duckdb.connect()
        self._lock = threading.RLock()
        self._registered: dict[str, int] = {}
        self._forgotten: Forgotten = Forgotten()
        self._forgotten_registered: Optional[Forgotten] = None
        self.tracers: list[Tracer] = []

    # ---------------------------------------------------------------- plumbing

    def set_forgotten(self, forgotten: Forgotten) -> None:
        with self._lock:
            self._forgotten = forgotten

    @property
    def forgotten(self) -> Forgotten:
        return self._forgotten

    def trace(self, message: str, params: Optional[Mapping[str, Any]] = None) -> None:
        for tracer in list(self.tracers):
            tracer(message, dict(params or {}))

    @contextmanager
    def tracing(self, callback: Tracer) -> Iterator[None]:
        self.tracers.append(callback)
        try:
            yield
        finally:
            self.tracers.remove(callback)

    def _register(self, kind: str) -> str:
        name = f"rows_{kind}"
        gen = self.lake.generation
        if self._registered.get(kind) != gen:
            self.con.register(name, self.lake.known_rows(kind))
            self._registered[kind] = gen
        if self._forgotten_registered is not self._forgotten:
            subjects, records = self._forgotten.as_tables()
            self.con.register("forgotten_subjects", subjects)
            self.con.register("forgotten_records", records)
            self._forgotten_registered = self._forgotten
        return name

    def execute(self, sql: str, params: Mapping[str, Any]) -> pa.Table:
        """Run one query and consume its result (DuckDB 2 refuses a second open result)."""
        self.trace(sql, params)
        return self.con.sql(sql, params=dict(params)).to_arrow_table()

    # ---------------------------------------------------------------- the query

    def rows(
        self,
        kind: str,
        principal: Principal,
        basis: Basis,
        *,
        subject: Optional[str] = None,
        filters: Optional[Mapping[str, Any]] = None,
        include_proposals: bool = False,
        heads_only: bool = True,
    ) -> pa.Table:
        """Rows of *kind* the principal may be served at *basis*, one per slot.

        ``filters`` are exact matches on columns of the kind's table and only narrow the
        result. ``include_proposals`` returns proposals instead of active memory (the
        review queue); ``heads_only=False`` returns every live version.
        """
        bases = bases_table([("read", principal, basis, subject)])
        result = self.visible(kind, bases, filters=filters, include_proposals=include_proposals,
                              heads_only=heads_only)
        self.trace(f"visible {kind}: {result.num_rows} row(s) for {principal.id} at {basis.describe()}")
        return result

    def visible(
        self,
        kind: str,
        bases: pa.Table,
        *,
        filters: Optional[Mapping[str, Any]] = None,
        include_proposals: bool = False,
        heads_only: bool = True,
    ) -> pa.Table:
        """The visibility query for many bases at once (one row per read or replayed decision).

        *bases* has columns ``decision_id, known_at, valid_at, org, division, team,
        actor, subject_key`` (see `bases_table`); each output row carries the
        ``decision_id`` it is visible to. A single read is a one-row *bases*.
        """
        if kind not in SPECS:
            raise ValidationError(f"unknown kind {kind!r}", field="kind")
        spec = SPECS[kind]
        columns = set(spec.schema.names)
        with self._lock:
            self.lake.refresh()
            table = self._register(kind)
            self.con.register("bases", bases)
            params: dict[str, Any] = {}
            where = [forgotten_sql("r")]
            for i, (col, value) in enumerate(sorted((filters or {}).items())):
                if col not in columns or col in ("org", "division", "team", "actor", "known_since"):
                    raise ValidationError(
                        f"cannot filter {kind} on {col!r}; filterable: "
                        f"{', '.join(sorted(columns - {'org', 'division', 'team', 'actor'}))}",
                        field="filters",
                    )
                params[f"f{i}"] = value
                where.append(f"r.{col} IS NOT DISTINCT FROM $f{i}" if value is None else f"r.{col} = $f{i}")
            status = "proposed" if include_proposals else "active"
            head = ("QUALIFY row_number() OVER (PARTITION BY decision_id, lineage_id, scope_depth "
                    "ORDER BY valid_from DESC, known_since DESC, commit_version DESC, record_id DESC) = 1"
                    if heads_only else "")
            slot = ("QUALIFY row_number() OVER (PARTITION BY decision_id, lineage_id ORDER BY scope_depth DESC) = 1"
                    if heads_only else "")
            sql = f"""
WITH known AS (
    SELECT r.*, b.decision_id, b.valid_at AS basis_valid_at,
           {scope_depth_sql("r")} AS scope_depth,
           {spec.text_sql} AS search_text
    FROM {table} r JOIN bases b
      ON r.org = b.org
     AND (r.division IS NULL OR r.division = b.division)
     AND (r.team IS NULL OR r.team = b.team)
     AND (r.actor IS NULL OR r.actor = b.actor)
     AND r.known_since <= b.known_at
     AND (b.subject_key IS NULL OR r.subject_key = b.subject_key)
    WHERE {' AND '.join(where)}
),
retracted AS (
    SELECT DISTINCT decision_id, supersedes AS target FROM known
    WHERE status = 'retracted' AND supersedes IS NOT NULL
),
candidates AS (
    SELECT k.* FROM known k ANTI JOIN retracted x ON k.decision_id = x.decision_id AND k.record_id = x.target
    WHERE k.status = '{status}' AND k.valid_from <= k.basis_valid_at
),
heads AS (
    SELECT * FROM candidates
    {head}
)
SELECT * EXCLUDE (basis_valid_at) FROM heads
WHERE (valid_to IS NULL OR valid_to > basis_valid_at)
  AND (expires_at IS NULL OR expires_at > basis_valid_at)
{slot}
ORDER BY decision_id, valid_from DESC, known_since DESC
"""
            return self.execute(sql, params)

    def slot_versions(self, kind: str, lineage_ids: Sequence[str]) -> pa.Table:
        """Every active, unretracted, unforgotten version of the given slots, at every scope.

        The write path reconciles against these (it picks the predecessor at each new
        row's ``valid_from`` and scope itself); reads never call this.
        """
        with self._lock:
            self.lake.refresh()
            table = self._register(kind)
            sql = f"""
WITH known AS (
    SELECT * FROM {table}
    WHERE lineage_id IN (SELECT unnest($lineages)) AND {forgotten_sql()}
)
SELECT record_id, lineage_id, org, division, team, actor, valid_from, content_hash FROM known
WHERE status = 'active'
  AND record_id NOT IN (SELECT supersedes FROM known WHERE status = 'retracted' AND supersedes IS NOT NULL)
ORDER BY valid_from, known_since, commit_version
"""
            return self.execute(sql, {"lineages": list(lineage_ids)})

    def by_ids(self, kind: str, record_ids: Sequence[str]) -> pa.Table:
        """Raw rows by id, whatever their status (approve/retract look their target up here)."""
        with self._lock:
            self.lake.refresh()
            table = self._register(kind)
            return self.execute(
                f"SELECT * FROM {table} WHERE record_id IN (SELECT unnest($ids)) AND {forgotten_sql()}",
                {"ids": list(record_ids)},
            )
