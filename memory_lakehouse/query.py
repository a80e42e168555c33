"""The one visibility query: what a principal may be served at a basis.

Every read path — recall, get_fact, episodes, policy resolution, replay, the evals —
calls `Visibility.rows`. It runs one DuckDB query over the warm Arrow snapshot of a
kind's table and applies, in this order:

1. **system time**: rows whose commit is known at ``known_at`` (incomplete transactions
   never appear; see `Lake.known_rows`);
2. **scope**: the principal's own scope and its ancestors', never a sibling's;
3. **forgetting**: subjects and records in the deletion ledger, at every basis;
4. **status**: retracted records and proposals are never served;
5. **supersession**: per slot (lineage) and scope, the version with the latest
   ``valid_from`` at or before ``valid_at`` (a later commit breaks ties) is the head;
   a head that has ended (``valid_to``) or expired at ``valid_at`` is not served;
   then the most specific scope's head wins the slot;
6. **the caller's narrowing** last: ``filters`` (and the subject, where a slot may
   span subjects) keep or drop the heads rules 1-5 chose. A filter narrows the visible
   set and never picks among versions: ``filters={"source": "billing_api"}`` on a slot
   whose billing_api version was superseded returns nothing, not the old version.

Rule 5 makes supersession a read-time decision, so the write path stays append-only
and "what was true on day 10" keeps working after the day-14 update.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import arrow_rule
from .errors import ValidationError
from .heads import HEAD_KEY, SCOPE_LEVELS, SLOT_COLUMNS, SUBJECT_IN_SLOT, OrgHeads, OrgHistory, scope_rule_sql
from .lake import SYSTEM_COLUMNS, Lake, dictionary_rows, distinct_positions, take_rows
from .records import SLOT_SEPARATOR, SPECS, fact_slot, subject_key
from .scope import Principal
from .snapshot_gate import ReadLock
from .time import Basis, require_aware

Tracer = Callable[[str, Mapping[str, Any]], None]


def scope_depth_sql(alias: str = "") -> str:
    a = f"{alias}." if alias else ""
    return (
        f"(CASE WHEN {a}actor IS NOT NULL THEN 4 WHEN {a}team IS NOT NULL THEN 3 "
        f"WHEN {a}division IS NOT NULL THEN 2 ELSE 1 END)"
    )


@dataclass(frozen=True)
class Forgotten:
    """What the deletion ledger hides, at every basis.

    Each tombstone ``(key, generation, forgotten_at, scope)`` hides, inside its scope's
    subtree, rows about the subject written at an older generation and rows scoped to
    an actor of that key known by ``forgotten_at``. ``record_ids`` (the subject's rows
    and everything derived from them) are hidden outright, and so is anything derived
    from them later.
    """

    tombstones: tuple[tuple[str, int, datetime, str | None, str | None, str | None], ...] = ()
    record_ids: frozenset[str] = frozenset()
    #: `forget.erasure_fingerprint` of every row a forget hid: what an undated re-run must not bring back
    fingerprints: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return not self.tombstones and not self.record_ids

    #: What `may_hide` reads of a row.
    COLUMNS = ("subject_key", "actor_key", "record_id", "derived_from")

    def may_hide(self, rows: pa.Table) -> bool:
        """Whether `forgotten_sql` could hide any of *rows* (their `COLUMNS`); False means it
        hides none of them.

        Each way the condition hides a row compares one of those columns with the ledger:
        a tombstone's key equals the row's subject or actor key, or the row is a forgotten
        record, or one is among its ``derived_from``. A row matching none of them is not
        hidden, whatever its generation, time or scope, so a caller asking the ledger about
        a few rows (the write path's reconcile, the heads advanced by a write's rows) skips
        the query when none matches (tests/test_reconcile_lookup.py checks this against the
        query).
        """
        return not self.empty and bool(len(rows)) and bool(pc.any(self.hideable(rows)).as_py())

    def hideable(self, rows: pa.Table) -> pa.Array:
        """Per row of *rows*, whether it matches the ledger as `may_hide` says (never null)."""
        keys, ids = self._key_array, self._id_array
        flagged = np.zeros(rows.num_rows, dtype=bool)
        if len(keys):
            for column in ("subject_key", "actor_key"):
                flagged |= pc.fill_null(pc.is_in(rows.column(column), value_set=keys), False).to_numpy()
        if len(ids):
            flagged |= pc.fill_null(pc.is_in(rows.column("record_id"), value_set=ids), False).to_numpy()
            derived = rows.column("derived_from")
            hits = pc.is_in(pc.list_flatten(derived), value_set=ids)
            flagged[pc.list_parent_indices(derived).filter(hits).to_numpy()] = True
        return pa.array(flagged)

    def added_since(self, old: Forgotten) -> Forgotten | None:
        """The tombstones and forgotten ids this state holds beyond *old*; None when it lacks
        any of *old*'s (a ledger only grows, so anything else is not a later state of it)."""
        if not (set(old.tombstones) <= set(self.tombstones) and old.record_ids <= self.record_ids):
            return None
        known = set(old.tombstones)
        return Forgotten(
            tombstones=tuple(t for t in self.tombstones if t not in known),
            record_ids=self.record_ids - old.record_ids,
        )

    @functools.cached_property
    def _key_array(self) -> pa.Array:
        return pa.array(sorted({t[0] for t in self.tombstones}), pa.string())

    @functools.cached_property
    def _id_array(self) -> pa.Array:
        return pa.array(sorted(self.record_ids), pa.string())

    def as_tables(self) -> tuple[pa.Table, pa.Table]:
        t = self.tombstones
        return (
            pa.table(
                {
                    "key": pa.array([x[0] for x in t], pa.string()),
                    "generation": pa.array([x[1] for x in t], pa.int64()),
                    "forgotten_at": pa.array([x[2] for x in t], pa.timestamp("us", tz="UTC")),
                    "org": pa.array([x[3] for x in t], pa.string()),
                    "division": pa.array([x[4] for x in t], pa.string()),
                    "team": pa.array([x[5] for x in t], pa.string()),
                }
            ),
            pa.table({"record_id": pa.array(sorted(self.record_ids), pa.string())}),
        )


def forgotten_sql(alias: str) -> str:
    """The ledger condition: True for rows that are *not* forgotten.

    The row's columns are always qualified by *alias*: the ledger table has columns of
    the same names (``generation``, ``org``, ``division``, ``team``), and an unqualified
    name inside the subquery binds to the ledger's own, which turned "written at an older
    generation" into ``f.generation < f.generation`` and the scope match into
    ``f.org = f.org`` (so a stale row appended after a forget stayed visible).
    """
    if not alias:
        raise ValueError("forgotten_sql needs the row's table alias (see its docstring)")
    a = f"{alias}."
    return f"""NOT EXISTS (SELECT 1 FROM forgotten_subjects f
           WHERE ((f.key = {a}subject_key AND {a}generation < f.generation)
                  OR (f.key = {a}actor_key AND {a}known_since <= f.forgotten_at))
             AND (f.org IS NULL OR f.org = {a}org)
             AND (f.division IS NULL OR f.division = {a}division)
             AND (f.team IS NULL OR f.team = {a}team))
      AND {a}record_id NOT IN (SELECT record_id FROM forgotten_records)
      AND NOT list_has_any(coalesce({a}derived_from, []), (SELECT coalesce(list(record_id), []) FROM forgotten_records))"""


def retractions_sql(rows: str, *, since_row: int = 0) -> str:
    """When each retracted row's retraction became known: ``org`` and ``supersedes`` (the
    retracted record id) and the earliest ``known_since`` of a retraction of it among
    *rows* (from ``_row`` *since_row* on). An as-of read before that still sees the row.

    A retraction acts within its own org: callers join on the org as well as the id
    (`RETRACTION_JOIN`). `retract` writes it at its target's scope; a row written by
    hand in another org retracts nothing, as every other rule of the query keeps one
    org's rows from changing what another org's readers are served (and so what each
    org's remembered reads depend on stays the org's own: `Visibility._state`)."""
    return f"""SELECT org, supersedes, min(known_since) AS known_since FROM {rows}
      WHERE _row >= {int(since_row)} AND status = 'retracted' AND supersedes IS NOT NULL AND known_since IS NOT NULL
      GROUP BY org, supersedes"""


#: How a row ``t`` meets the retractions of it (`retractions_sql` as ``x``): its id, in its own org.
RETRACTION_JOIN = "x.supersedes = t.record_id AND x.org = t.org"


def refreshed_expiry_sql(sightings: str, known_at: str, valid_at: str, alias: str = "r") -> str:
    """A row's expiry pushed out by its sightings known and begun at the basis (a restated preference).

    A duplicate statement writes a `conversation.Sighting` whose ``expires_at`` is the
    time it was seen plus the preference's TTL; the row in force then expires at the
    latest of its own expiry and those (no new version of the row: see `capture.pipeline`).
    """
    a = alias
    return f"""(CASE WHEN {a}.expires_at IS NULL THEN NULL ELSE greatest({a}.expires_at, coalesce((
        SELECT max(s.expires_at) FROM {sightings} s
        WHERE s.derived_from[1] = {a}.record_id AND s.status = 'active' AND NOT s.hidden
          AND s.known_since <= {known_at} AND s.valid_from <= {valid_at}), {a}.expires_at)) END)"""


def visibility_sql(
    source: str,
    b: Callable[[str], str],
    where: Sequence[str],
    *,
    heads_only: bool,
    expiry: str = "r.expires_at",
    carry: Sequence[str] = (),
    narrow: Sequence[str] = (),
    subject_first: bool = True,
    versions: bool = False,
    subtree: bool = False,
) -> str:
    """The rules of `Visibility.visible` as SQL; ``b(col)`` names a basis value.

    One builder for every read: a single read passes its basis as parameters, a replay
    joins a table of bases; the predicates are the same list either way.

    *where* holds the basis's own rules (ledger, status). *narrow* holds the caller's
    narrowing (filters; the subject when a slot may span subjects): predicates over the
    candidate columns, applied only after each slot's head is chosen — a filter narrows
    the visible set and never picks among versions, so it cannot bring back a superseded
    value. *carry* are the ``r.<col> AS <alias>`` expressions those predicates read.
    With *subject_first* the subject narrows the scan itself, which is exact only when
    every slot belongs to one subject (`SUBJECT_SLOTS`).

    Single reads of active memory are served from the org's slot heads (`heads`), which
    split these rules by what depends on the reader and on the basis; they are checked
    against this query.

    ``versions=True`` (history) keeps every version known at ``known_at`` whatever its
    valid time or later retraction, and returns ``retracted_since`` with each (no heads
    are chosen, so *where* may hold the caller's filters directly); ``subtree=True`` (a
    curator's review queue) reads the reader's scope and everything under it instead of
    the scope and its ancestors.
    """
    if subtree:  # rows at or below the reader: each level the reader names must match
        scope_rules = [f"({b(level)} IS NULL OR r.{level} = {b(level)})" for level in SCOPE_LEVELS]
    else:  # the reader's scope and its ancestors
        scope_rules = [scope_rule_sql(level, b(level)) for level in SCOPE_LEVELS]
    basis_rules = [f"r.org = {b('org')}", *scope_rules, f"r.known_since <= {b('known_at')}"]  # known by then
    if not versions:
        basis_rules += [
            f"(r.retracted_since IS NULL OR r.retracted_since > {b('known_at')})",  # not yet retracted then
            f"r.valid_from <= {b('valid_at')}",  # world time: begun by then
        ]
    subject_rule = f"({b('subject_key')} IS NULL OR r.subject_key = {b('subject_key')})"
    if versions:
        return f"""
SELECT {b("decision_id")} AS decision_id, r._row, {scope_depth_sql("r")} AS scope_depth,
       CASE WHEN r.retracted_since <= {b("known_at")} THEN r.retracted_since END AS retracted_since
FROM {source}
WHERE {" AND ".join(basis_rules + [subject_rule] + list(where))}
ORDER BY r.valid_from, r.known_since, r.commit_version, r._row
"""
    narrow = list(narrow)
    if subject_first:
        basis_rules.append(subject_rule)
    else:  # after the heads: the subject is one more narrowing of what is visible
        narrow.append("(basis_subject_key IS NULL OR subject_key = basis_subject_key)")
    head = (
        "QUALIFY row_number() OVER (PARTITION BY decision_id, lineage_id, scope_depth "
        "ORDER BY valid_from DESC, known_since DESC, commit_version DESC, _row DESC) = 1"
        if heads_only
        else ""
    )
    slot = (
        "QUALIFY row_number() OVER (PARTITION BY decision_id, lineage_id ORDER BY scope_depth DESC) = 1"
        if heads_only
        else ""
    )
    live = (
        "(valid_to IS NULL OR valid_to > basis_valid_at)"  # the head has not ended
        " AND (expires_at IS NULL OR expires_at > basis_valid_at)"
    )  # nor expired
    extra = "".join(f", {c}" for c in carry)
    return f"""
WITH candidates AS (
    SELECT r._row, r.lineage_id, r.valid_from, r.valid_to, {expiry} AS expires_at, r.known_since, r.commit_version,
           {scope_depth_sql("r")} AS scope_depth, {b("decision_id")} AS decision_id,
           {b("valid_at")} AS basis_valid_at, r.subject_key, {b("subject_key")} AS basis_subject_key{extra}
    FROM {source}
    WHERE {" AND ".join(list(basis_rules) + list(where))}
    {head}
), heads AS (
    SELECT * FROM candidates
    WHERE {live}
    {slot}
)
SELECT decision_id, _row, scope_depth FROM heads
{"WHERE " + " AND ".join(narrow) if narrow else ""}
ORDER BY decision_id, valid_from DESC, known_since DESC
"""


#: The basis's own rules for a single read of active memory (the ledger's verdict and the status).
HEAD_RULES: tuple[str, ...] = ("NOT r.hidden", "r.status = 'active'")


def history_sql(source: str, kind: str) -> str:
    """Every version of ``$org``'s rows that can head its (slot, scope) at some basis, for
    `heads.OrgHistory`: the rules of `visibility_sql` (with `HEAD_RULES`) that hold at every
    basis — the org, the ledger's verdict, the status, known at all — and the columns the
    others read, in no order (`OrgHistory.of` sorts them, cheaper than DuckDB)."""
    slot_columns = "".join(f", r.{c}" for c in sorted(SLOT_COLUMNS.get(kind, ())))
    return f"""
SELECT r._row, r.lineage_id, {scope_depth_sql("r")} AS scope_depth, r.division, r.team, r.actor,
       r.valid_from, r.known_since, r.commit_version, r.valid_to, r.expires_at, r.retracted_since{slot_columns}
FROM {source}
WHERE {" AND ".join(["r.org = $org", "r.known_since IS NOT NULL", *HEAD_RULES])}
"""


def appended_candidates(rows: pa.Table, basis: Basis, hidden: Collection[int]) -> pa.Table:
    """Which of an org's appended *rows* are candidates at *basis*, with their ``live`` flag:
    the rules of `visibility_sql` for one (slot, scope)'s head with `HEAD_RULES` (the
    reader's scope and the per-slot pick left to `heads.OrgHeads`), clause by clause:

    * ``r.known_since <= known_at`` (NULL while the row's transaction is incomplete: not known);
    * ``r.retracted_since IS NULL ...``: taken as holding; the slots of a retraction among
      the appended rows are picked again from their versions after (`Visibility._repicked`);
    * ``r.valid_from <= valid_at``;
    * ``NOT r.hidden``: *hidden* (positions), the ledger's verdict (`forgotten_sql`);
    * ``r.status = 'active'``;
    * ``live``: ``(valid_to IS NULL OR valid_to > valid_at) AND (expires_at IS NULL OR
      expires_at > valid_at)``.

    tests/test_heads.py checks heads advanced this way against the query after every write.
    """
    known_at = pa.scalar(basis.known_at, pa.timestamp("us", tz="UTC"))
    valid_at = pa.scalar(basis.valid_at, pa.timestamp("us", tz="UTC"))
    keep = pc.and_(
        pc.and_(
            pc.less_equal(rows.column("known_since"), known_at), pc.less_equal(rows.column("valid_from"), valid_at)
        ),
        pc.equal(rows.column("status"), "active"),
    )
    if hidden:
        keep = pc.and_(keep, pc.invert(pc.is_in(rows.column("_row"), pa.array(sorted(hidden), pa.int64()))))
    keep = pc.fill_null(keep, _FALSE_SCALAR)
    # a write's rows are usually all candidates at the read that follows: the filter (~10 µs a column) is spared
    picked = rows if pc.all(keep).as_py() else rows.filter(keep)

    def open_after(col: str) -> pa.ChunkedArray:
        return pc.fill_null(pc.greater(picked.column(col), valid_at), True)

    return picked.append_column("live", pc.and_(open_after("valid_to"), open_after("expires_at")))


def history_candidates(rows: pa.Table, hidden: Collection[int]) -> pa.Table:
    """Which of an org's appended *rows* `history_sql` selects, clause by clause:
    ``r.known_since IS NOT NULL``, `HEAD_RULES` (``NOT r.hidden``: *hidden*, positions the
    ledger hides; ``r.status = 'active'``). For `heads.OrgHistory.advanced` (an appended
    retraction is none: `OrgHistory.retracting` takes it in); tests/test_heads.py checks histories advanced this way against the
    per-reader query after every write."""
    keep = pc.and_(pc.is_valid(rows.column("known_since")), pc.equal(rows.column("status"), "active"))
    if hidden:
        keep = pc.and_(keep, pc.invert(pc.is_in(rows.column("_row"), pa.array(sorted(hidden), pa.int64()))))
    keep = pc.fill_null(keep, _FALSE_SCALAR)
    return rows if pc.all(keep).as_py() else rows.filter(keep)


_FALSE_SCALAR = pa.scalar(False, pa.bool_())


def _retraction_slots(rows: pa.Table) -> list[str]:
    """The lineage ids of the retraction rows among *rows* (known or not yet), sorted: what a
    cell's advance cannot take in by adding candidates (`Visibility._advanced`)."""
    lineage = rows.column("lineage_id").filter(pc.equal(rows.column("status"), "retracted"))
    return sorted(set(lineage.to_pylist()))


def _read_slot(kind: str, subject: str | None, filters: Mapping[str, Any]) -> str | None:
    """The lineage id of every row a read with *subject* and *filters* can be served, when they
    name one slot: a subject and attribute of a kind whose slot is those (`records.fact_slot`),
    as `Store.get_fact` reads; None otherwise. Every row of that slot has the read's subject
    (its subject and attribute, stripped and case-folded, are the read's: `records._slot`).

    Parts holding `records.SLOT_SEPARATOR` get None: rows stored before such parts had
    slots of their own carry another id, which the subject index still finds."""
    attribute = filters.get("attribute")
    if subject is None or kind not in SUBJECT_IN_SLOT or not isinstance(attribute, str):
        return None
    if SLOT_SEPARATOR in subject or SLOT_SEPARATOR in attribute:
        return None
    return fact_slot(kind, subject, attribute)


@functools.cache
def _advance_columns(kind: str, *, ledger: bool) -> list[str]:
    """The columns of appended rows that `appended_candidates` and `OrgHeads.advanced` read,
    and with a *ledger* those `Forgotten.may_hide` reads."""
    wanted = {"lineage_id", "status", "known_since", "valid_from", "valid_to", "expires_at", "subject_key"}
    wanted |= {*SCOPE_LEVELS, *HEAD_KEY, *SLOT_COLUMNS.get(kind, ())}
    if ledger:
        wanted |= set(Forgotten.COLUMNS)
    return [n for n in (*SPECS[kind].schema.names, *SYSTEM_COLUMNS) if n in wanted]


def _filter_clauses(
    kind: str, filters: Mapping[str, Any] | None, params: dict[str, Any], *, carried: bool = False
) -> tuple[list[str], list[str]]:
    """The callers' exact-match filters: ``(carry, predicates)`` (they only narrow; scope columns are refused).

    Plain (*carried* False): predicates over the row's columns, for reads that choose no
    heads (history, the review queue). *carried*: each filtered column is carried as
    ``_f<i>`` and the predicates read that, so `visibility_sql` applies them to the heads.
    """
    filterable = set(SPECS[kind].schema.names)
    carry: list[str] = []
    where: list[str] = []
    for i, (col, value) in enumerate(sorted((filters or {}).items())):
        if col not in filterable or col in ("org", "division", "team", "actor"):
            raise ValidationError(
                f"cannot filter {kind} on {col!r}; filterable: "
                f"{', '.join(sorted(filterable - {'org', 'division', 'team', 'actor'}))}",
                field="filters",
            )
        params[f"f{i}"] = _filter_value(kind, col, value)
        ref = f"_f{i}" if carried else f"r.{col}"
        if carried:
            carry.append(f"r.{col} AS {ref}")
        where.append(f"{ref} IS NOT DISTINCT FROM $f{i}" if value is None else f"{ref} = $f{i}")
    return carry, where


def bases_table(reads: Sequence[tuple[str, Principal, Basis, str | None]]) -> pa.Table:
    """The bases of many reads: (decision_id, principal, basis, subject or None)."""
    ts = pa.timestamp("us", tz="UTC")
    return pa.table(
        {
            "decision_id": pa.array([r[0] for r in reads], pa.string()),
            "known_at": pa.array([r[2].known_at for r in reads], ts),
            "valid_at": pa.array([r[2].valid_at for r in reads], ts),
            "org": pa.array([r[1].scope.org for r in reads], pa.string()),
            "division": pa.array([r[1].scope.division for r in reads], pa.string()),
            "team": pa.array([r[1].scope.team for r in reads], pa.string()),
            "actor": pa.array([r[1].scope.actor for r in reads], pa.string()),
            "subject_key": pa.array([subject_key(r[3]) if r[3] is not None else None for r in reads], pa.string()),
        }
    )


def _filter_value(kind: str, col: str, value: Any) -> Any:
    """Check a filter value against its column's type, so a bad one is a ValidationError, not a SQL error."""
    if value is None:
        return None
    column_type = SPECS[kind].schema.field(col).type
    try:
        if pa.types.is_timestamp(column_type):
            return require_aware(value, f"filters[{col!r}]")
        if pa.types.is_list(column_type) and not isinstance(value, (list, tuple)):
            raise TypeError("a list column needs a list")
        pa.scalar(value, type=column_type)
    except (ValidationError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(
            f"filter {col!r} on {kind} needs a {column_type} value, got {value!r}", field="filters"
        ) from exc
    return value


class Visibility:
    """Runs the visibility query over a `Lake`'s snapshots with one DuckDB connection.

    Each kind's snapshot is mirrored into a native DuckDB table with three derived
    columns: ``_row`` (position in the Arrow snapshot, so results are taken from it
    instead of pushed through SQL), ``hidden`` (the ledger's verdict, recomputed when
    the ledger changes) and ``retracted_since`` (when a retraction of the row became
    known). The query itself then carries only the narrow columns the rules need.
    The mirrors are compressed in memory (`MIRROR_COMPRESSED`).
    """

    #: Serve single reads from the org's slot heads (`_from_heads`); False runs the per-reader
    #: query for every read (the bench's A/B, and a way to rule the heads out when diagnosing).
    use_heads: bool = True

    def __init__(self, lake: Lake, *, budget: CacheBudget | None = None) -> None:
        self.lake = lake
        #: what the read caches may hold (`READ_CACHE_BYTES` by default); a new budget applies
        #: from the next read that adds to a cache
        self.budget = budget or CacheBudget.of(READ_CACHE_BYTES)
        self.con = duckdb.connect(config={"threads": DUCKDB_THREADS})
        # DuckDB draws a progress bar on stdout for a query past two seconds (a replay at 1M
        # rows, a first mirror): it would land in the middle of `memlake ... --json` output
        self.con.execute("SET enable_progress_bar = false")
        if MIRROR_COMPRESSED:  # the mirrors live in a catalog DuckDB compresses (see the constant)
            self.con.execute("ATTACH ':memory:' AS mirror (COMPRESS)")
            self.con.execute("USE mirror")
        self._lock = ReadLock(lake.gate)  # a section under it is a read: its snapshots stay in their epoch
        self._mirrored: dict[str, tuple[int, int, int]] = {}  # kind -> (epoch, chunks applied, rows)
        self._hidden_for: dict[str, Forgotten] = {}  # kind -> the ledger state its `hidden` reflects
        self._forgotten: Forgotten = Forgotten()
        self._ledger_version = 0  # bumped whenever the ledger state changes (`set_forgotten`)
        # the ledger version each org's remembered reads depend on (`_state`): the last change that
        # could hide one of its rows, or one that could not be told apart per org (`_ledger_all`)
        self._ledger_of: dict[str, int] = {}
        self._ledger_all = 0
        self._forgotten_registered: Forgotten | None = None
        self.tracers: list[Tracer] = []
        self._cache: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], int, int, pa.Table]] = OrderedDict()
        self._cache_bytes = 0  # Arrow bytes held by the entries of _cache
        self._bounds: dict[str, _Boundaries] = {}
        self._last_reads: OrderedDict[tuple[Any, ...], tuple[Any, ...]] = (
            OrderedDict()
        )  # (kind, reader scope) -> last basis
        # (kind, org) -> slot heads per basis cell
        self._heads: dict[tuple[str, str], list[_HeadCell]] = {}
        self._heads_lru: OrderedDict[tuple[str, str], None] = OrderedDict()
        # (kind, org) -> the org's state and its history (`heads.OrgHistory`), least recently picked first
        self._histories: OrderedDict[tuple[str, str], tuple[tuple[Any, ...], OrgHistory]] = OrderedDict()
        self._history_wants = _RecentCounts()  # how often each (kind, org)'s history was wanted lately
        self._head_reads = _RecentCounts()  # ... and its heads read (`_evict_heads`)
        self._history_queries = 0  # histories read by a query since the store opened (`cache_stats`)
        self._history_picks = 0  # ... and picked from one held or in the window
        self._history_advances = 0  # ... and advanced by the rows appended since one was read
        # the last history read that did not fit beside the held ones: (kind, org), its state, it
        self._history_window: tuple[tuple[str, str], tuple[Any, ...], OrgHistory] | None = None
        self._empty: dict[tuple[Any, ...], pa.Table] = {}  # (kind, epoch, columns) -> an empty result

    # ---------------------------------------------------------------- plumbing

    def set_forgotten(self, forgotten: Forgotten) -> None:
        """Take a new ledger state. Remembered reads (heads, results) of an org stay valid when
        none of its rows can be hidden by what the new state adds (`Forgotten.hideable`):
        every rule of the query matches a row's org to the reader's, so a forget in one org
        leaves the others' heads in place (rebuilding them cost each org's first read after
        a forget ~20-30 ms at 100k)."""
        with self._lock:
            if forgotten is self._forgotten:
                return
            added = forgotten.added_since(self._forgotten)
            self._forgotten = forgotten
            self._ledger_version += 1  # what remembered reads record: see `_state`
            if added is None:
                self._ledger_all = self._ledger_version
                return
            for kind in self.lake.views:
                rows = self.lake.all_rows(kind)
                for org in pc.unique(rows.column("org").filter(added.hideable(rows))).to_pylist():
                    self._ledger_of[org] = self._ledger_version

    @property
    def forgotten(self) -> Forgotten:
        return self._forgotten

    def trace(self, message: str, params: Mapping[str, Any] | None = None) -> None:
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
        """Keep the native mirror of *kind* in step with the lake and the ledger."""
        name = f"rows_{kind}"
        now, chunks = self.lake.appended(kind)  # one reading of the view: a write may append meanwhile
        self._register_ledger()
        epoch, applied, offset = self._mirrored.get(kind, (-1, 0, 0))
        if epoch != now:
            self.con.execute(f"DROP TABLE IF EXISTS {name}")
            applied, offset = 0, 0
            self._hidden_for.pop(kind, None)
        pending = chunks[applied:]
        total, since, retractions = sum(c.num_rows for c in pending), offset, False
        with self._copy_threads(total):
            for chunk in _copy_slices(pending):  # everything appended since (reads served from the heads let it lag)
                first = offset == 0 and applied == 0
                retractions |= self._copy_in(kind, name, chunk, offset, first=first)
                if MIRROR_COMPRESSED and (first or total > MIRROR_COPY_ROWS):
                    # a first copy, and each slice of a big one, compressed before the next goes in: a
                    # big copy holds one slice plain, and the catalog's first checkpoint does not run
                    # inside some later statement (~1.8 s at 1M rows)
                    self.con.execute("CHECKPOINT mirror")
                offset += chunk.num_rows
            if retractions:  # after every slice: a snapshot read back from its files need not hold a target first
                self._mark_retractions(name, since_row=since)
        applied = len(chunks)
        if epoch != now and not chunks:
            self.con.execute(self._create_empty(kind, name))
            self.con.unregister("_mirror_src")
        self._mirrored[kind] = (now, applied, offset)
        if self._hidden_for.get(kind) is not self._forgotten:
            self.con.execute(f"UPDATE {name} AS t SET hidden = NOT ({forgotten_sql('t')})")
            self._hidden_for[kind] = self._forgotten
        return name

    def _copy_in(self, kind: str, name: str, chunk: pa.Table, offset: int, *, first: bool) -> bool:
        """Append *chunk* (the snapshot's rows from position *offset* on) to *kind*'s mirror
        *name*, created by the *first* chunk, with the ledger's verdict; return whether a
        retraction is among them (`_register` marks their targets once all are in)."""
        chunk = chunk.append_column("_row", pa.array(np.arange(offset, offset + chunk.num_rows, dtype=np.int64)))
        self.con.register("_mirror_src", chunk)
        # the ledger's verdict as the rows go in: an UPDATE after them was a second pass over the
        # whole table on a store's first read (~60 ms at 100k); an empty ledger hides nothing
        if not (first or self._hidden_for.get(kind) is self._forgotten):
            hidden = "NULL"  # `_register`'s UPDATE judges every row against the new ledger
        elif self._forgotten.empty:
            hidden = "FALSE"
        else:
            hidden = f"NOT ({forgotten_sql('s')})"
        try:
            if first:
                self.con.execute(
                    f"CREATE TABLE {name} AS SELECT s.*, {hidden}::BOOLEAN AS hidden, "
                    "NULL::TIMESTAMPTZ AS retracted_since FROM _mirror_src s"
                )
                self._hidden_for[kind] = self._forgotten
            else:
                self.con.execute(f"INSERT INTO {name} SELECT s.*, {hidden}, NULL FROM _mirror_src s")
        finally:
            self.con.unregister("_mirror_src")
        return bool(pc.any(pc.equal(chunk.column("status"), "retracted")).as_py())

    @contextmanager
    def _copy_threads(self, rows: int) -> Iterator[None]:
        """DuckDB's threads while *rows* are copied into a mirror: `COPY_THREADS` for a copy of
        `COPY_THREADS_ROWS` or more (a store's first read of a kind), `DUCKDB_THREADS` again
        after. Call under the lock (the setting is the connection's)."""
        if rows < COPY_THREADS_ROWS or COPY_THREADS <= DUCKDB_THREADS:
            yield
            return
        self.con.execute(f"SET threads = {COPY_THREADS}")
        try:
            yield
        finally:
            self.con.execute(f"SET threads = {DUCKDB_THREADS}")

    def _register_ledger(self) -> None:
        """Give DuckDB the current ledger (`forgotten_sql` reads these two tables)."""
        if self._forgotten_registered is not self._forgotten:
            subjects, records = self._forgotten.as_tables()
            self.con.register("forgotten_subjects", subjects)
            self.con.register("forgotten_records", records)
            self._forgotten_registered = self._forgotten

    def _create_empty(self, kind: str, name: str) -> str:
        self.con.register("_mirror_src", self.lake.all_rows(kind))
        return (
            f"CREATE TABLE {name} AS SELECT *, 0::BIGINT AS _row, NULL::BOOLEAN AS hidden, "
            "NULL::TIMESTAMPTZ AS retracted_since FROM _mirror_src LIMIT 0"
        )

    def _mark_retractions(self, name: str, *, since_row: int) -> None:
        """Record on each retracted row when its retraction became known (as-of reads before it still see it)."""
        self.con.execute(f"""
UPDATE {name} t SET retracted_since = x.known_since
FROM ({retractions_sql(name, since_row=since_row)}) x
WHERE {RETRACTION_JOIN} AND (t.retracted_since IS NULL OR t.retracted_since > x.known_since)""")

    def execute(self, sql: str, params: Mapping[str, Any]) -> pa.Table:
        """Run one query and consume its result (DuckDB 2 refuses a second open result)."""
        self.trace(sql, params)
        return self.con.sql(sql, params=dict(params)).to_arrow_table()

    def _take(
        self, kind: str, positions: pa.Array, columns: Sequence[str] | None = None, *, dictionary: bool = False
    ) -> pa.Table:
        """Rows from the Arrow snapshot: every stored column, or just *columns*.

        ``search_text`` (what ranking reads) is computed only when asked for by name.
        *dictionary*: each distinct row is taken (and its search text built) once, and the
        string columns come dictionary-encoded (`lake.dictionary_rows`): for positions that
        repeat, as a replay's do.
        """
        rows = self.lake.all_rows(kind)
        if columns is not None and not columns:  # positions only (recall's visible set): no take at all
            return rows.slice(0, 0).select([]) if not len(positions) else pa.table({"_row": positions}).select([])
        if columns is not None:
            wanted = [c for c in columns if c != "search_text"]
            source = list(SPECS[kind].text_columns) if "search_text" in columns else []
            rows = rows.select(list(dict.fromkeys(wanted + source)))
        index = None
        if dictionary:
            positions, index = distinct_positions(positions, rows.num_rows)
        rows = take_rows(rows, positions)
        if columns is not None and "search_text" in columns:
            rows = rows.append_column("search_text", SPECS[kind].search_text(rows))
        rows = rows if columns is None else rows.select(list(columns))
        return rows if index is None else dictionary_rows(rows, index)

    # ---------------------------------------------------------------- the query

    def rows(
        self,
        kind: str,
        principal: Principal,
        basis: Basis,
        *,
        subject: str | None = None,
        filters: Mapping[str, Any] | None = None,
        include_proposals: bool = False,
        heads_only: bool = True,
        columns: Sequence[str] | None = None,
        ordered: bool = True,
    ) -> pa.Table:
        """Rows of *kind* the principal may be served at *basis*, one per slot.

        ``filters`` are exact matches on columns of the kind's table and only narrow the
        result. ``include_proposals`` returns proposals instead of active memory (the
        review queue); ``heads_only=False`` returns every live version. ``ordered=False``
        lets the rows come in any order (recall ranks them itself): the slot heads then serve
        them in snapshot order (their positions sorted), not in the output order.
        """
        if heads_only and not include_proposals and self.use_heads:
            fast = self._from_heads(kind, principal, basis, subject, filters, columns, ordered=ordered)
            if fast is not None:
                return fast
        if subject is not None and heads_only and not include_proposals:
            narrowed = self._from_reader_set(kind, principal, basis, subject, filters, columns)
            if narrowed is not None:
                return narrowed
        bases = bases_table([("read", principal, basis, subject)])
        result = self.visible(
            kind, bases, filters=filters, include_proposals=include_proposals, heads_only=heads_only, columns=columns
        )
        self.trace(f"visible {kind}: {result.num_rows} row(s) for {principal.id} at {basis.describe()}")
        return result

    def positions(
        self,
        kind: str,
        principal: Principal,
        basis: Basis,
        *,
        subject: str | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> np.ndarray:
        """Snapshot positions (ascending) of the rows of *kind* the principal may be served at
        *basis*: `rows` with ``columns=["_row"], ordered=False``, as a numpy array.

        Recall wants only where its visible rows sit. From the slot heads that is a mask over
        numpy arrays; building an Arrow table of them and reading it back cost ~0.1 ms a read.
        Any read the heads cannot serve is the table's column.
        """
        if self.use_heads:
            fast = self._head_positions(kind, principal, basis, subject, filters, ordered=False)
            if fast is not None:
                return fast[0]
        rows = self.rows(kind, principal, basis, subject=subject, filters=filters, columns=["_row"], ordered=False)
        return np.sort(np.asarray(rows.column("_row").to_numpy(), dtype=np.int64))  # the query's order is its own

    def head_positions(
        self, kind: str, principal: Principal, basis: Basis, *, subject: str | None = None
    ) -> np.ndarray | None:
        """Snapshot positions of the rows of active memory of *kind* the principal may be served
        at *basis*, in `rows`' order, picked from the org's slot heads as a single read is;
        None when the heads cannot serve the read (then only the query can: `visible`).

        For many reads at bases of their own (`replay`): each costs a mask over the org's
        heads, where the query over all of them at once holds every (read, row) pair that
        passes the scope and time rules until it has picked heads.
        """
        if not self.use_heads:
            return None
        fast = self._head_positions(kind, principal, basis, subject, None, ordered=True)
        return None if fast is None else fast[0]

    def _head_positions(
        self,
        kind: str,
        principal: Principal,
        basis: Basis,
        subject: str | None,
        filters: Mapping[str, Any] | None,
        *,
        ordered: bool,
    ) -> tuple[np.ndarray, OrgHeads | None] | None:
        """The read's positions picked from the org's slot heads at the basis (`heads.OrgHeads`), and
        the heads (None when the org holds no rows of *kind*); None when the heads cannot serve it.

        The heads are had once per org, snapshot and basis cell (`_heads_at`); every reader
        of the org at an equivalent basis is then served by numpy masks. Only filters on a
        kind's slot columns (and a subject, for kinds whose slot holds it) can be applied
        after the heads are chosen; other reads return None and run the per-reader query.
        """
        filters = dict(filters or {})
        slot_columns = SLOT_COLUMNS.get(kind, frozenset())
        if (
            kind not in SPECS
            or (subject is not None and kind not in SUBJECT_IN_SLOT)
            or any(not isinstance(v, str) or c not in slot_columns for c, v in filters.items())
        ):
            return None
        org = principal.scope.org
        with self._lock:
            self.lake.refresh(tables_for([kind]))  # and the tables its new transactions wrote to
            if self._refreshed(kind):  # sightings move expiries: instants the cells do not track
                return None
            if not self._holds_rows(kind, org):
                if self.tracers:
                    self.trace(f"visible {kind}: 0 row(s) for {principal.id}: no rows of {org}")
                return _NO_POSITIONS_NP, None
            heads, source = self._heads_at(kind, org, basis)
            if heads is None:
                return _NO_POSITIONS_NP, None
            memo_key = (principal.scope, subject, tuple(sorted(filters.items())), ordered)
            positions = heads.memo.get(memo_key)
            if positions is None:
                idx = heads.visible(
                    principal.scope,
                    self.lake.all_rows(kind),
                    subject_key=subject_key(subject) if subject is not None else None,
                    filters=filters,
                    ordered=ordered,
                    slot=_read_slot(kind, subject, filters),
                )
                if idx is None:
                    return None
                positions = heads.rows[idx]
                if not ordered:
                    # ascending: recall's lookups of positions (`candidates.RowsView.locate`) run
                    # ~4x faster on them. numpy's sort of the served positions (14k of an org's
                    # 50k heads at 1M: 36 µs) costs less than the pass over every head in
                    # position order it replaces (85 µs) and keeps no index per cell
                    positions.sort()
                positions.flags.writeable = False  # handed to every reader of this cell
                _remember(heads, memo_key, positions, positions.nbytes)
            if self.tracers:
                self.trace(
                    f"visible {kind}: {len(positions)} row(s) for {principal.id} at {basis.describe()}, "
                    f"picked from the org's slot heads ({source})"
                )
            return positions, heads

    def _from_heads(
        self,
        kind: str,
        principal: Principal,
        basis: Basis,
        subject: str | None,
        filters: Mapping[str, Any] | None,
        columns: Sequence[str] | None,
        *,
        ordered: bool = True,
    ) -> pa.Table | None:
        """The read served from the org's slot heads (`_head_positions`), as the rows' table, or None."""
        with self._lock:
            fast = self._head_positions(kind, principal, basis, subject, filters, ordered=ordered)
            if fast is None:
                return None
            positions, heads = fast
            if heads is None or not len(positions):
                return self._nothing(kind, columns)
            memo_key = (
                "rows",
                principal.scope,
                subject,
                tuple(sorted((filters or {}).items())),
                None if columns is None else tuple(columns),
                ordered,
            )
            rows = heads.memo.get(memo_key)
            if rows is None:
                at = pa.array(positions, pa.int64())
                rows = self._take(kind, at, None if columns is None else [c for c in columns if c != "_row"])
                if columns is not None and "_row" in columns:
                    rows = rows.append_column("_row", at)
                # the same read again returns this very table (callers memoise on it)
                _remember(heads, memo_key, rows, _table_bytes(rows))
            return rows

    @staticmethod
    def check_filters(kind: str, filters: Mapping[str, Any] | None) -> None:
        """Raise what a read of *kind* raises for a filter it cannot apply (a scope column, a
        column the kind lacks, a value of the wrong type), without reading."""
        _filter_clauses(kind, filters, {})

    def holds_rows(self, kinds: Sequence[str], org: str) -> list[str]:
        """Those of *kinds* of which any append brought *org* rows, at the snapshot a read sees now.

        Without, no reader of *org* is served a row of a kind at any basis: every rule of
        the query matches the row's org to the reader's. Recall asks it before reading
        (most orgs hold two or three of the seven kinds it searches), of all kinds at once:
        one refresh, not one a kind (~20 µs each).
        """
        with self._lock:
            self.lake.refresh(tables_for(kinds))
            return [kind for kind in kinds if self._holds_rows(kind, org)]

    def _holds_rows(self, kind: str, org: str) -> bool:
        return bool(self._boundaries(kind).appends.get(org, 0))

    def _nothing(self, kind: str, columns: Sequence[str] | None) -> pa.Table:
        """An empty result of *kind* with *columns* (recall asks every kind; most orgs hold a few)."""
        key = (kind, self.lake.views[kind].epoch, None if columns is None else tuple(columns))
        empty = self._empty.get(key)
        if empty is None:
            empty = self._take(kind, _NO_POSITIONS, None if columns is None else [c for c in columns if c != "_row"])
            if columns is not None and "_row" in columns:
                empty = empty.append_column("_row", _NO_POSITIONS)
            self._empty[key] = empty
        return empty

    def _heads_at(self, kind: str, org: str, basis: Basis) -> tuple[OrgHeads | None, str]:
        """*org*'s slot heads at a basis equivalent to *basis*: remembered, advanced, or picked
        from the org's history.

        None when no append brought *org* rows of *kind* (every rule matches the row's org
        to the reader's: nothing can be visible). A cell is reused while the org's rows,
        the snapshot and the ledger are unchanged and no row boundary lies between its
        basis and *basis* (`_Boundaries.crosses`), as for remembered results. After a
        write to the org, a cell whose own rows have no boundary between the bases is
        advanced by the appended rows (`OrgHeads.advanced`). Otherwise they are picked from the
        org's history (`_history`: one query per org and state), so reads as of many past
        bases cost one pass over the org's versions each, not a query.
        """
        if not self._holds_rows(kind, org):
            return None, "no rows"
        self._head_reads.add((kind, org))
        state = self._state(kind, org)
        held = self._held_cell(kind, org, basis, state)
        if held is not None:
            return held, "from cache: no row boundary between the bases"
        cells = self._heads.setdefault((kind, org), [])
        advanced = self._advanced(kind, org, basis, cells, state)
        if advanced is not None:
            heads, source = advanced
        else:
            history, source = self._history(kind, org, state)
            heads = history.heads_at(_micros(basis.known_at), _micros(basis.valid_at))
        self._keep_cell(kind, org, basis, state, heads)
        return heads, source

    def catch_up(self, kind: str, org: str, basis: Basis) -> str | None:
        """Advance *org*'s cell of *kind* to *basis* after a write (`catch_up.after_write`), as
        the next read there would (`_heads_at`), when the org has a cell the appended rows
        can advance; never a history query. Returns how the cell at *basis* was had, or None
        when there was nothing to advance (no cell yet, a retraction with no history of the
        org held, too many rows: the next read does what it always does)."""
        with self._lock:
            self.lake.refresh(tables_for([kind]))
            if self._refreshed(kind) or not self._holds_rows(kind, org) or not self.has_cells(kind, org):
                return None
            state = self._state(kind, org)
            if self._held_cell(kind, org, basis, state) is not None:
                return "from cache: no row boundary between the bases"
            advanced = self._advanced(kind, org, basis, self._heads[(kind, org)], state)
            if advanced is None:
                return None
            heads, how = advanced
            self._keep_cell(kind, org, basis, state, heads)
            if self.tracers:
                self.trace(f"heads of {kind} in {org} at {basis.describe()}: {how}, by the write")
            return how

    def has_cells(self, kind: str, org: str) -> bool:
        """Whether a read built *org*'s heads of *kind* (at any basis): what `catch_up` can advance."""
        return bool(self._heads.get((kind, org)))

    def _held_cell(self, kind: str, org: str, basis: Basis, state: tuple[Any, ...]) -> OrgHeads | None:
        """A cell of *org* at *state* with no row boundary between its basis and *basis*, or None."""
        bounds = self._boundaries(kind)
        k, v = _micros(basis.known_at), _micros(basis.valid_at)
        for cell in self._heads.get((kind, org), ()):
            if cell.state == state and not bounds.crosses(org, (cell.known_at, k), (cell.valid_at, v)):
                self._heads_lru.move_to_end((kind, org))
                return cell.heads
        return None

    def _keep_cell(self, kind: str, org: str, basis: Basis, state: tuple[Any, ...], heads: OrgHeads) -> None:
        """Hold *heads* as *org*'s cell at *basis* and *state*: cells of older states go, and past
        cells beyond `HEAD_CELLS`, then whatever `_evict_heads` pushes out."""
        bounds = self._boundaries(kind)
        k, v = _micros(basis.known_at), _micros(basis.valid_at)
        cells = self._heads.setdefault((kind, org), [])
        cell = _HeadCell(state, k, v, heads, *bounds.instants(org))
        cells[:] = [c for c in cells if c.state == state] + [cell]
        while len(cells) > HEAD_CELLS:
            cells.remove(_oldest_past_cell(cells))
        self._heads_lru[(kind, org)] = None
        self._heads_lru.move_to_end((kind, org))
        self._evict_heads()

    def _evict_heads(self) -> None:
        """Bring the cells within `CacheBudget.heads`: the cells at past bases first, of the least
        recently read org first, then whole orgs, the one read least often lately first (of
        those read as often, the one read last).

        A read at now is the common case, and its cell is what a write advances; a past
        cell is one pick from its org's history to get back. Evicting whole orgs in LRU
        order missed on every read once a round of readers over the orgs asked for more
        than fits: each read evicted the org the round asked next (at 1M, 20 orgs' cells
        at now and their past bases exceed the bytes). Counted reads (`_RecentCounts`) keep
        the held orgs instead, and an org read more often than a held one takes its place.
        """
        total, budget = sum(_cell_bytes(c) for cs in self._heads.values() for c in cs), self.budget.heads
        for key in list(self._heads_lru):
            if total <= budget:
                return
            cells = self._heads.get(key, [])
            while len(cells) > 1 and total > budget:
                past = _oldest_past_cell(cells)
                cells.remove(past)
                total -= _cell_bytes(past)
        while total > budget and len(self._heads_lru) > 1:
            order = {k: i for i, k in enumerate(self._heads_lru)}
            old = min(order, key=lambda k: (self._head_reads.count(k), -order[k]))
            del self._heads_lru[old]
            total -= sum(_cell_bytes(c) for c in self._heads.pop(old, []))

    def _history(self, kind: str, org: str, state: tuple[Any, ...]) -> tuple[OrgHistory, str]:
        """*org*'s versions of *kind* that can head a (slot, scope) (`heads.OrgHistory`), as of
        its *state*: kept until the state moves on (a write to the org, a rewrite, a ledger
        change that can hide its rows), with how it was had.

        The histories held are bounded by `CacheBudget.histories`. One read that does not fit
        waits beside them (the window) until the next is read: a read at a past basis and
        one at now of the same org pick from it. When the next pushes it out, it is kept
        only if its org is wanted more often than each held one it would push out
        (`_admit_history`).
        """
        key = (kind, org)
        self._history_wants.add(key)
        held = self._histories.get(key)
        if held is not None and held[0] == state:
            self._histories.move_to_end(key)
            self._history_picks += 1
            return held[1], "picked from the org's history"
        window = self._history_window
        if window is not None and window[0] == key and window[1] == state:
            self._history_picks += 1
            return window[2], "picked from the org's history (the last one read)"
        older = self._held_history(key)
        advanced = self._history_advanced(kind, org, older, state) if older is not None else None
        seeded = advanced is None and self._few_rows(kind, org)
        if seeded:  # the history before the org's first row, advanced by all of them
            epoch, _, ledger = state
            advanced = self._history_advanced(kind, org, ((epoch, 0, ledger), OrgHistory.empty(kind)), state)
        if advanced is not None:
            self._history_advances += 1
            history, retracting = advanced
            how = "picked from the org's history, advanced by the rows written since" + (
                " (a retraction among them)" if retracting else ""
            )
            if seeded:
                how = "picked from the org's few rows, its history built from them without a query"
        else:
            self._history_queries += 1
            history = OrgHistory.of(self._history_rows(kind, org), kind)
            how = "picked from the org's history, read by one query"
        self._histories.pop(key, None)  # one of an older state
        if self._history_fits(history.nbytes):
            self._keep_history(key, state, history)
        else:
            if window is not None and window[0] != key and self._admit_history(window[0], window[2].nbytes):
                self._keep_history(*window)
            self._history_window = (key, state, history)
        return history, how

    def _held_history(self, key: tuple[str, str]) -> tuple[tuple[Any, ...], OrgHistory] | None:
        """The org's history held, or waiting in the window, with the state it is of; None when neither."""
        held = self._histories.get(key)
        window = self._history_window
        return held if held is not None else window[1:] if window is not None and window[0] == key else None

    def _few_rows(self, kind: str, org: str) -> bool:
        """Whether every row *org* has of *kind* lies in snapshot chunks of at most
        `HISTORY_FROM_ROWS` rows in all: then its history is the empty one advanced by them
        (`_history`), instead of a query of its rows (~5 ms at 100k). So an org's first rows
        of a kind written while the process serves (a capture's first preference), or a small
        store's, are read without DuckDB."""
        named = self._boundaries(kind).chunks.get(org, ())
        if len(named) > HISTORY_FROM_ROWS:  # each brought the org a row at least
            return False
        chunks, rows = self.lake.appended(kind)[1], 0
        for index, _ in named:
            rows += int(chunks[index].num_rows)
            if rows > HISTORY_FROM_ROWS:
                return False
        return True

    def _history_rows(self, kind: str, org: str) -> pa.Table:
        """`history_sql` for *org*, asked of the org's rows (`_org_relation`), not of the mirror."""
        with self._org_relation(kind, org) as relation:
            return self.execute(history_sql(relation, kind), {"org": org})

    @contextmanager
    def _org_relation(self, kind: str, org: str, columns: Collection[str] = ()) -> Iterator[str]:
        """*org*'s rows of *kind* as the mirror holds them, as a relation ``r`` for one query.

        Why: the mirror holds every org's rows, and a process's first read of a kind copied
        them all into DuckDB to ask for one org's (~300 ms at 100k, 2.6 s at 1M: the first
        request after a restart; a copy made later, ~600 MB of transient memory at 1M).
        Every rule matches a row's org to the reader's, and the rule reads the row, the
        ledger (``hidden``: `forgotten_sql`) and the row's retractions (``retracted_since``:
        `retractions_sql`, which act within their org); so the relation is the org's rows
        (the columns those read, `history_sql` and *columns*), each with its snapshot
        position as ``_row``, and the mirror's two derived columns computed over them
        (`_derived_columns`, as for the reconcile lookup). Call with the lock held. tests/test_heads.py
        checks the heads and histories against the per-reader query, and the query over
        many bases (the mirror) against single reads.
        """
        rows = self.lake.all_rows(kind)
        positions = np.flatnonzero(pc.equal(rows.column("org"), org).to_numpy(zero_copy_only=False))
        wanted = list(dict.fromkeys([*_org_relation_inputs(kind), *columns]))
        source = take_rows(rows.select(wanted), positions).append_column("_row", pa.array(positions, pa.int64()))
        with self._derived_columns("_org_rows", source) as relation:
            yield f"{relation} r"

    @contextmanager
    def _derived_columns(self, name: str, rows: pa.Table) -> Iterator[str]:
        """*rows* (with their ``_row``) registered as *name*, as a subquery that adds the mirror's
        two derived columns by the mirror's definitions: ``hidden`` (`forgotten_sql`) and
        ``retracted_since`` (`retractions_sql`, joined by `RETRACTION_JOIN`), over *rows*
        alone: the caller passes every row a verdict depends on (a row's retractions are rows
        of its org and its slot). As the mirror does (`_register`), an empty ledger hides
        nothing and rows with no retraction among them have none to join. Call with the lock held.
        """
        hidden = "FALSE"
        if not self._forgotten.empty:
            self._register_ledger()
            hidden = f"NOT ({forgotten_sql('t')})"
        retracted, joined = "NULL::TIMESTAMPTZ", ""
        if pc.any(pc.equal(rows.column("status"), "retracted")).as_py():
            retracted = "x.known_since"
            joined = f"LEFT JOIN ({retractions_sql(name)}) x ON {RETRACTION_JOIN}"
        self.con.register(name, rows)
        try:
            yield f"(SELECT t.*, {hidden} AS hidden, {retracted} AS retracted_since FROM {name} t {joined})"
        finally:
            self.con.unregister(name)

    def _history_advanced(
        self, kind: str, org: str, older: tuple[tuple[Any, ...], OrgHistory], state: tuple[Any, ...]
    ) -> tuple[OrgHistory, bool] | None:
        """*older* (a state and the org's history then) advanced by the org's rows appended
        since, and whether a retraction was among them; when the state differs by those
        appends only (same snapshot epoch, same ledger state) and they can advance it
        (`_appended_to_advance`, `_retracted_by`); otherwise None (the query runs)."""
        (o_epoch, o_appends, o_ledger), history = older
        epoch, appends, ledger = state
        if o_epoch != epoch or o_ledger != ledger or o_appends >= appends:
            return None
        appended = self._appended_to_advance(kind, org, o_appends)
        if appended is None:
            return None
        advanced = history.advanced(history_candidates(*appended))
        retracted, _ = self._retracted_by(kind, appended[0], advanced)
        return advanced.retracting(retracted), bool(retracted)

    def _retracted_by(self, kind: str, rows: pa.Table, history: OrgHistory) -> tuple[dict[int, int], set[str]]:
        """The positions of *history*'s versions that the retractions among *rows* retract, each
        with when the earliest of those became known (µs): what `retractions_sql` gives the
        mirror's ``retracted_since`` (a retraction counts once known, hidden or not), over the
        rows appended since a history was read, which held the older retractions' instants;
        and the ids of the targets not among the versions (not candidates, or of another org).

        Only the history's versions are looked at: no other row's ``retracted_since`` is read
        there, and they are of its org, where a retraction acts (`RETRACTION_JOIN`). First
        the versions of the retractions' own slots, where `retract` writes a retraction (a
        handful); a target not among them (a row written by hand) is looked for among all.
        A scan of the snapshot's ids cost ~1.8 ms at 100k, most of a read after a retraction.
        """
        retraction = pc.and_(pc.equal(rows.column("status"), "retracted"), pc.is_valid(rows.column("known_since")))
        picked = rows.filter(pc.fill_null(retraction, _FALSE_SCALAR))
        if not picked.num_rows:
            return {}, set()
        snapshot = self.lake.all_rows(kind)
        targets = take_rows(snapshot.select(["supersedes"]), picked.column("_row")).column(0).to_pylist()
        known = picked.column("known_since").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
        earliest: dict[str, int] = {}
        for target, at in zip(targets, known, strict=True):
            if target is not None:
                earliest[target] = min(earliest.get(target, at), at)
        out: dict[int, int] = {}
        for versions in (history.slot_versions(picked.column("lineage_id").to_pylist()), None):
            positions = history.rows if versions is None else history.rows[versions]
            ids = take_rows(snapshot.select(["record_id"]), positions).column(0)
            hit = pc.fill_null(pc.is_in(ids, value_set=pa.array(list(earliest), pa.string())), _FALSE_SCALAR)
            found = ids.filter(hit).to_pylist()
            at = positions[hit.to_numpy(zero_copy_only=False).astype(bool)].tolist()
            out.update(zip(at, [earliest[i] for i in found], strict=True))
            if len(set(found)) == len(earliest):
                return out, set()
        return out, set(earliest) - set(found)

    def _keep_history(self, key: tuple[str, str], state: tuple[Any, ...], history: OrgHistory) -> None:
        """Hold *history*, pushing out the least recently picked ones past the bytes."""
        self._histories[key] = (state, history)
        self._histories.move_to_end(key)
        total = sum(h.nbytes for _, h in self._histories.values())
        while total > self.budget.histories and len(self._histories) > 1:  # least recently picked first
            _, (_, gone) = self._histories.popitem(last=False)
            total -= gone.nbytes

    def _history_fits(self, size: int) -> bool:
        """Whether a history of *size* bytes fits beside those held (one always does: the read
        under way's)."""
        return not self._histories or sum(h.nbytes for _, h in self._histories.values()) + size <= self.budget.histories

    def _admit_history(self, key: tuple[str, str], size: int) -> bool:
        """Whether a history leaving the window is held: when it fits beside those held, or when
        its org is wanted more often than each held one it would push out (least recently
        picked first).

        Why not LRU alone: readers going round more orgs than the histories hold then miss on
        every read, each read pushing out the org the round asks next, at a query of an org's
        rows each (~55 ms at 1M records). Counting how often each org's history is wanted
        (`_RecentCounts`) keeps the held ones instead: the round hits as often as the bytes
        allow. An org that becomes busy is admitted once it is wanted more than the idle
        ones, whose counts halve as reads go by.
        """
        if self._history_fits(size):
            return True
        room = self.budget.histories - sum(h.nbytes for _, h in self._histories.values())
        wanted = self._history_wants.count(key)
        for victim, (_, held) in self._histories.items():
            if wanted <= self._history_wants.count(victim):
                return False
            room += held.nbytes
            if room >= size:
                return True
        return True

    def _advanced(
        self, kind: str, org: str, basis: Basis, cells: Sequence[_HeadCell], state: tuple[Any, ...]
    ) -> tuple[OrgHeads, str] | None:
        """The newest cell of the same snapshot and ledger advanced by the org's rows appended
        since it was built, with how; or None (the query runs).

        Exact when none of the cell's own rows has an instant between its basis and
        *basis* (checked on the instants it was built with): then the old rows' candidacy,
        heads and liveness are what they were, and only the appended rows are new
        candidates. An appended retraction changes another row's ``retracted_since``, and so
        which version heads its (slot, scope): the slots the retractions are in are picked
        again from their versions (`_repicked`), or the query runs when that cannot be done.
        Falls back to the query too when the appended rows are too many to be worth it.
        """
        k, v = _micros(basis.known_at), _micros(basis.valid_at)
        epoch, appends, ledger = state
        for cell in reversed(cells):
            c_epoch, c_appends, c_ledger = cell.state
            if c_epoch != epoch or c_ledger != ledger or c_appends >= appends:
                continue
            if _between(cell.known_bounds, cell.known_at, k) or _between(cell.valid_bounds, cell.valid_at, v):
                continue
            appended = self._appended_to_advance(kind, org, c_appends)
            if appended is None:
                return None
            rows, hidden = appended
            heads = cell.heads.advanced(appended_candidates(rows, basis, hidden), kind)
            if not _retraction_slots(rows):
                return heads, "advanced by the rows written since"
            repicked = self._repicked(kind, org, basis, state, c_appends, heads)
            if repicked is None:
                return None
            return (
                repicked,
                "advanced by the rows written since, a retraction's slots picked again from the org's history",
            )
        return None

    def _repicked(
        self, kind: str, org: str, basis: Basis, state: tuple[Any, ...], since: int, heads: OrgHeads
    ) -> OrgHeads | None:
        """*heads* (a cell of the org's first *since* appends, advanced by the rows appended
        after, a retraction among them) with the heads of every slot a retraction appended
        since the org's history was read is in picked again from the versions of those slots;
        or None (the caller queries) when no history of the org is held at the same snapshot
        and ledger and at most *since* appends (it then holds no retraction the cell does
        not), the rows since are too many, or a retraction's target is not among its own
        slot's versions (a retraction row written by hand in another slot: then which slot it
        changes is a search of the org).

        The slot's versions: the held history's (`OrgHistory.slot_versions`, the retracted
        instants it knew) with the slot's rows appended since (`history_candidates`), and the
        retractions since taken in (`_retracted_by`, `OrgHistory.retracting`): the history
        `_history_advanced` would build, restricted to those slots. Their heads at the basis
        (`OrgHistory.heads_at`) replace the cell's (`OrgHeads.with_slots`). The whole org's
        history advanced and its heads picked cost a read after a retraction 3-5 ms at 100k.
        """
        older = self._held_history((kind, org))
        if older is None:
            return None
        (o_epoch, o_appends, o_ledger), history = older
        epoch, appends, ledger = state
        if o_epoch != epoch or o_ledger != ledger or o_appends > since:
            return None
        appended = self._appended_to_advance(kind, org, o_appends)
        if appended is None:
            return None
        rows, hidden = appended
        slots = _retraction_slots(rows)
        rows = rows.filter(pc.is_in(rows.column("lineage_id"), value_set=pa.array(slots, pa.string())))
        versions = history.subset(history.slot_versions(slots)).advanced(history_candidates(rows, hidden))
        retracted, missing = self._retracted_by(kind, rows, versions)  # every retraction since is among *rows*
        if missing:
            return None
        self._history_picks += 1
        picked = versions.retracting(retracted).heads_at(_micros(basis.known_at), _micros(basis.valid_at))
        return heads.with_slots(slots, picked)

    def _appended_to_advance(self, kind: str, org: str, since: int) -> tuple[pa.Table, set[int]] | None:
        """*org*'s rows of *kind* appended after its first *since* appends, with ``_row`` (the
        columns the advances read: `_advance_columns`), and the positions of those the ledger
        hides; None when they are too many to be worth advancing what was built before them
        (more than `ADVANCE_ROWS`). Retractions among them are the caller's to take in (a
        cell: `_repicked`; a history: `_retracted_by`)."""
        ledger = self._forgotten
        names = _advance_columns(kind, ledger=not ledger.empty)
        named = self._boundaries(kind).chunks[org][since:]
        chunks = self.lake.appended(kind)[1]  # read after the boundaries: it holds every chunk they name
        # only the columns the advance reads (a filter or take costs ~15 µs a column), the chunks
        # together and filtered once: one by one, 25 one-row chunks cost ~2.3 ms
        picked = [chunks[index] for index, _ in named]
        appended = pa.concat_tables([c.select(names) for c in picked])
        if len(picked) > 1:  # in one chunk: a kernel over a column of dozens of one-row chunks cost ~0.35 ms
            appended = appended.combine_chunks()
        firsts = [np.arange(first, first + c.num_rows) for (_, first), c in zip(named, picked, strict=True)]
        appended = appended.append_column("_row", pa.array(np.concatenate(firsts), pa.int64()))
        ours = pc.equal(pa.chunked_array([c.column("org") for c in picked]).combine_chunks(), org)
        if not pc.all(ours).as_py():
            appended = appended.filter(ours)
        if appended.num_rows > ADVANCE_ROWS:
            return None
        # the mirror's verdict only when the ledger could hide one of these rows: bringing the
        # mirror up to date for it cost a read after a write ~13 ms at 100k
        hidden = self._hidden_positions(kind, appended) if ledger.may_hide(appended) else set()
        return appended, hidden

    def _hidden_positions(self, kind: str, rows: pa.Table) -> set[int]:
        """Which of *rows* (by ``_row``) the ledger hides: the mirror's ``hidden``, computed by `forgotten_sql`."""
        name = self._register(kind)
        lo = pc.min(rows.column("_row")).as_py()
        hidden = self.execute(f"SELECT _row FROM {name} WHERE _row >= $lo AND hidden", {"lo": lo})
        return set(hidden.column("_row").to_pylist())

    def _from_reader_set(
        self,
        kind: str,
        principal: Principal,
        basis: Basis,
        subject: str,
        filters: Mapping[str, Any] | None,
        columns: Sequence[str] | None,
    ) -> pa.Table | None:
        """One subject's rows picked out of the reader's whole visible set, or None.

        A reader that reads again at an equivalent basis (same snapshot, no row boundary
        between the bases: an agent reading "now" turn after turn) gets its whole visible
        set from the query once, remembered like any result; later reads of any subject
        select from it instead of paying DuckDB's ~5 ms of planning per query. Visibility
        is decided per slot, and a slot belongs to one subject, so selecting after the
        query returns exactly what the subject-narrowed query would. Other reads (a new
        basis each time, filters that are not plain text) return None: the narrowed query.
        """
        filters = dict(filters or {})
        schema = SPECS[kind].schema

        def plain_text(col: str, value: Any) -> bool:  # a filter Arrow can apply exactly as the SQL does
            return (
                isinstance(value, str)
                and col in schema.names
                and col not in ("org", "division", "team", "actor")
                and schema.field(col).type == pa.string()
            )

        if kind not in SUBJECT_SLOTS or not all(plain_text(c, v) for c, v in filters.items()) or self._refreshed(kind):
            return None
        wanted = ("_row", "subject_key", *sorted(filters))
        whole = bases_table([("read", principal, basis, None)])
        narrow = bases_table([("read", principal, basis, subject)])
        with self._lock:
            self.lake.refresh(tables_for([kind]))
            narrow_key = self._cache_key(kind, narrow, filters, False, True, columns)
            if self._cached(kind, narrow_key, narrow, quiet=True) is not None:
                return None  # this very read is remembered: `visible` serves it as it is
            key = self._cache_key(kind, whole, None, False, True, wanted)
            reader_set = self._cached(kind, key, whole, quiet=True)
            source = "remembered"
            if reader_set is None:
                source = "new"
                if not self._repeats(kind, principal, basis):
                    return None
                reader_set = self.visible(kind, whole, columns=wanted)  # remembered under *key*
            mask = pc.equal(reader_set.column("subject_key"), subject_key(subject))
            for col, value in filters.items():
                mask = pc.and_(mask, pc.equal(reader_set.column(col), value))
            picked = reader_set.filter(mask)
            rows = self._take(
                kind, picked.column("_row"), None if columns is None else [c for c in columns if c != "_row"]
            )
            if columns is not None and "_row" in columns:
                rows = rows.append_column("_row", picked.column("_row"))
            if narrow_key is not None:  # the same read again returns this very table (callers memoise on it)
                self._remember(kind, narrow_key, narrow, rows)
        self.trace(
            f"visible {kind}: {rows.num_rows} row(s) for {principal.id} at {basis.describe()}, "
            f"picked from the reader's {source} visible set ({reader_set.num_rows} rows)"
        )
        return rows

    def _repeats(self, kind: str, principal: Principal, basis: Basis) -> bool:
        """Whether this reader's previous read of *kind* was at an equivalent basis."""
        reader = (kind, principal.scope)
        org = principal.scope.org
        now = (self._state(kind, org), _micros(basis.known_at), _micros(basis.valid_at))
        last = self._last_reads.pop(reader, None)
        self._last_reads[reader] = now
        while len(self._last_reads) > CACHE_ENTRIES:
            self._last_reads.popitem(last=False)
        if last is None or last[0] != now[0]:
            return False
        return not self._boundaries(kind).crosses(org, (last[1], now[1]), (last[2], now[2]))

    def visible(
        self,
        kind: str,
        bases: pa.Table,
        *,
        filters: Mapping[str, Any] | None = None,
        include_proposals: bool = False,
        heads_only: bool = True,
        columns: Sequence[str] | None = None,
        dictionary: bool = False,
    ) -> pa.Table:
        """The visibility query for many bases at once (one row per read or replayed decision).

        *bases* has columns ``decision_id, known_at, valid_at, org, division, team,
        actor, subject_key`` (see `bases_table`). The result holds the visible rows with
        the ``decision_id`` each is visible to and its ``scope_depth``.
        A single read is a one-row *bases*. *columns* narrows what is taken from the
        snapshot (recall needs only ids to build its filter mask). *dictionary*: string
        columns dictionary-encoded, ``decision_id`` too (`_take`): a replay's rows repeat
        once per decision that sees them. Such a result is not remembered for later reads.
        """
        if kind not in SPECS:
            raise ValidationError(f"unknown kind {kind!r}", field="kind")
        with self._lock:
            self.lake.refresh(tables_for([kind]))
            refreshed = self._refreshed(kind)
            # a sighting moves a row's expiry: an instant the result cache does not track
            key = (
                None
                if refreshed or dictionary
                else self._cache_key(kind, bases, filters, include_proposals, heads_only, columns)
            )
            cached = self._cached(kind, key, bases) if key is not None else None
            if cached is not None:  # before the mirror takes in new rows: they are another org's
                return cached
            params: dict[str, Any] = {}
            where = ["NOT r.hidden"]
            subject_first = kind in SUBJECT_SLOTS
            keys = pc.unique(bases.column("subject_key")).to_pylist()
            if subject_first and len(keys) == 1 and keys[0] is not None:
                # every basis names the same subject: filter the scan itself, not only the join
                params["subject_key"] = keys[0]
                where.append("r.subject_key = $subject_key")
            # filters narrow the visible set: carried to the heads and applied there (visibility_sql)
            carry, narrow = _filter_clauses(kind, filters, params, carried=True)
            status = "proposed" if include_proposals else "active"
            b: Callable[[str], str]  # names a basis value in the SQL
            relation: AbstractContextManager[str]
            if bases.num_rows == 1:
                # one read: the basis travels as parameters (same rules, a plan DuckDB builds faster),
                # over the reader's org's rows alone (`_org_relation`: no mirror of every org)
                basis = bases.to_pylist()[0]
                params.update({f"basis_{c}": v for c, v in basis.items()})
                relation, b = (
                    self._org_relation(kind, basis["org"], columns=sorted(filters or {})),
                    (lambda c: f"$basis_{c}"),
                )
            else:
                self.con.register("bases", bases)
                relation, b = (
                    nullcontext(f"{self._register(kind)} r JOIN bases b ON r.org = b.org"),
                    (lambda c: f"b.{c}"),
                )
            expiry = (
                refreshed_expiry_sql(self._register("sighting"), b("known_at"), b("valid_at"))
                if refreshed
                else "r.expires_at"
            )
            if self.lake.views[kind].num_rows:
                with relation as source:
                    sql = visibility_sql(
                        source,
                        b,
                        where + [f"r.status = '{status}'"],
                        heads_only=heads_only,
                        expiry=expiry,
                        carry=carry,
                        narrow=narrow,
                        subject_first=subject_first,
                    )
                    hits = self.execute(sql, params)
            else:  # an empty table shows nothing: no need to pay DuckDB's milliseconds (recall reads every kind)
                hits = _NO_HITS
            wanted = None if columns is None else [c for c in columns if c != "_row"]
            rows = self._take(kind, hits.column("_row"), wanted, dictionary=dictionary)
            if columns is not None and "_row" in columns:  # positions in the snapshot, for a later take
                rows = rows.append_column("_row", hits.column("_row"))
            if key is not None:
                self._remember(kind, key, bases, rows)
            decision_ids = hits.column("decision_id")
            rows = rows.append_column(
                "decision_id", decision_ids.combine_chunks().dictionary_encode() if dictionary else decision_ids
            )
            return rows.append_column("scope_depth", hits.column("scope_depth"))

    def versions(
        self,
        kind: str,
        principal: Principal,
        basis: Basis,
        *,
        subject: str | None = None,
        filters: Mapping[str, Any] | None = None,
        statuses: Sequence[str] = ("active",),
        subtree: bool = False,
        unapproved: bool = False,
    ) -> pa.Table:
        """Every version of *kind* the principal may see as known at ``basis.known_at``.

        The same rules as `visible` for scope, forgetting, system time and status, none
        for valid time or supersession: history and lookups by id read this. Each row
        comes with ``retracted_since`` (when a retraction became known, if by then) and
        ``scope_depth``. ``subtree=True`` reads the principal's subtree instead (the
        review queue); ``unapproved=True`` keeps proposals no approval known by then
        points at.
        """
        if kind not in SPECS:
            raise ValidationError(f"unknown kind {kind!r}", field="kind")
        with self._lock:
            self.lake.refresh(tables_for([kind]))
            table = self._register(kind)
            params: dict[str, Any] = {
                f"basis_{c}": v for c, v in bases_table([("read", principal, basis, subject)]).to_pylist()[0].items()
            }
            where = ["NOT r.hidden", "r.status IN (SELECT unnest($statuses))"] + _filter_clauses(kind, filters, params)[
                1
            ]
            params["statuses"] = list(statuses)
            if unapproved:
                where.append(
                    f"NOT EXISTS (SELECT 1 FROM {table} a WHERE a.supersedes = r.record_id "
                    "AND a.status = 'active' AND a.known_since <= $basis_known_at)"
                )
            sql = visibility_sql(
                f"{table} r", lambda c: f"$basis_{c}", where, heads_only=False, versions=True, subtree=subtree
            )
            hits = self.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})  # valid_at is unused
            rows = self._take(kind, hits.column("_row"))
            rows = rows.append_column("retracted_since", hits.column("retracted_since"))
            return rows.append_column("scope_depth", hits.column("scope_depth"))

    def _refreshed(self, kind: str) -> bool:
        """Whether rows of *kind* may have their expiry moved by sightings (preferences, once any exist)."""
        if kind not in REFRESHED_KINDS:
            return False
        return self.lake.views["sighting"].num_rows > 0

    # ---------------------------------------------------------------- result cache

    def _state(self, kind: str, org: str) -> tuple[Any, ...]:
        """What a remembered read of *org*'s rows depends on: the snapshot's epoch, the
        appends that brought *org* rows, and the last ledger change that could hide one of
        them (`set_forgotten`). Every rule of the query matches ``r.org`` to the reader's
        org, so a write (or a forget) in another org changes nothing here."""
        view = self.lake.views[kind]
        # a counter, not id(self._forgotten): a replaced ledger state may be freed and its id reused
        ledger = max(self._ledger_all, self._ledger_of.get(org, 0))
        return (view.epoch, self._boundaries(kind).appends.get(org, 0), ledger)

    def _cache_key(
        self,
        kind: str,
        bases: pa.Table,
        filters: Mapping[str, Any] | None,
        include_proposals: bool,
        heads_only: bool,
        columns: Sequence[str] | None,
    ) -> tuple[Any, ...] | None:
        if bases.num_rows != 1:
            return None  # bulk replay: each decision has its own basis
        b = bases.slice(0, 1).to_pylist()[0]
        key = (
            kind,
            b["org"],
            b["division"],
            b["team"],
            b["actor"],
            b["subject_key"],
            tuple(sorted((filters or {}).items(), key=lambda kv: kv[0])),
            bool(include_proposals),
            bool(heads_only),
            tuple(columns) if columns is not None else None,
        )
        try:
            hash(key)
        except TypeError:  # an unhashable filter value: just don't cache
            return None
        return key

    def _cached(
        self, kind: str, key: tuple[Any, ...] | None, bases: pa.Table, *, quiet: bool = False
    ) -> pa.Table | None:
        """A remembered result for the same reader, valid if no row boundary lies between the bases.

        The visible set is piecewise constant in time: it changes only when known_at
        crosses some row's known_since (or a retraction's), or valid_at crosses some
        valid_from / valid_to / expires_at — of the reader's org: every rule matches the
        row's org to the reader's. A write to that org, or any ledger change, drops the entry.
        """
        entry = self._cache.get(key) if key is not None else None
        if key is None or entry is None:
            return None
        b = bases.slice(0, 1).to_pylist()[0]
        if entry[0] != self._state(kind, b["org"]):
            return None
        _, known, valid, rows = entry
        now_k, now_v = _micros(b["known_at"]), _micros(b["valid_at"])
        if self._boundaries(kind).crosses(b["org"], (known, now_k), (valid, now_v)):
            return None
        self._cache.move_to_end(key)
        if not quiet:
            self.trace(f"visible {kind}: {rows.num_rows} row(s) from cache (no row boundary between the bases)")
        return rows

    def _remember(self, kind: str, key: tuple[Any, ...], bases: pa.Table, rows: pa.Table) -> None:
        b = bases.slice(0, 1).to_pylist()[0]
        old = self._cache.pop(key, None)
        self._cache_bytes += _table_bytes(rows) - (_table_bytes(old[3]) if old is not None else 0)
        self._cache[key] = (self._state(kind, b["org"]), _micros(b["known_at"]), _micros(b["valid_at"]), rows)
        while len(self._cache) > 1 and (len(self._cache) > CACHE_ENTRIES or self._cache_bytes > self.budget.results):
            self._cache_bytes -= _table_bytes(self._cache.popitem(last=False)[1][3])

    def _boundaries(self, kind: str) -> _Boundaries:
        epoch, chunks = self.lake.appended(kind)  # one reading of the view: a write may append meanwhile
        bounds = self._bounds.get(kind)
        if bounds is None or bounds.epoch != epoch:
            bounds = self._bounds[kind] = _Boundaries(epoch)
        if len(chunks) > bounds.applied:
            bounds.add(chunks[bounds.applied :])
        return bounds

    def cache_stats(self) -> ReadCacheStats:
        """What the read caches hold now against their bounds, and how often a read needed an
        org's history and found it held or queried it (`MemoryStore.read_cache_stats`)."""
        with self._lock:
            return ReadCacheStats(
                budget=self.budget,
                heads_bytes=sum(_cell_bytes(c) for cs in self._heads.values() for c in cs),
                head_orgs=len({org for (_, org), cells in self._heads.items() if cells}),
                histories_bytes=sum(h.nbytes for _, h in self._histories.values()),
                history_orgs=len({org for _, org in self._histories}),
                results_bytes=self._cache_bytes,
                history_picks=self._history_picks,
                history_queries=self._history_queries,
                history_advances=self._history_advances,
            )

    def clear_cache(self) -> None:
        with self._lock:
            self._heads.clear()
            self._heads_lru.clear()
            self._histories.clear()
            self._history_wants = _RecentCounts()
            self._history_window = None
            self._head_reads = _RecentCounts()
            self._cache.clear()
            self._cache_bytes = 0

    def slot_versions(self, kind: str, lineage_ids: Sequence[str]) -> pa.Table:
        """Every active, unretracted, unforgotten version of the given slots, at every scope.

        The write path reconciles against these (it picks the predecessor at each new
        row's ``valid_from`` and scope itself); reads never call this. A batch asks for a
        few hundred slots of a 100k-row table, and DuckDB answers by scanning every row
        (~10-15 ms at 100k, no index helps): the slots' rows are found by position in
        the Arrow snapshot instead (`slots.SlotRows`: a chain through each slot's rows),
        and `SLOT_VERSION_RULES` is asked of those rows alone (`_turned_away`), not of the
        mirror: bringing the mirror up to date with a batch's rows cost the next batch ~13
        ms at 100k, a seventh of its write. Kinds whose expiry sightings move keep the one
        query. tests/test_reconcile_lookup.py checks both ways agree.
        """
        with self._lock:
            self.lake.refresh()
            if self._refreshed(kind):
                return self._slot_versions_sql(kind, self._register(kind), lineage_ids)
            rows = self.lake.all_rows(kind)
            positions = self.lake.slot_positions(kind, lineage_ids)
            found = take_rows(rows.select(_SLOT_VERSION_INPUTS), positions)
            found = found.append_column("_row", pa.array(positions, pa.int64()))
            turned_away = self._turned_away(found)
            if turned_away.num_rows:
                found = found.filter(pc.invert(pc.is_in(found.column("_row"), value_set=turned_away.column("_row"))))
            found = found.sort_by([(c, "ascending") for c in ("valid_from", "known_since", "commit_version", "_row")])
            ts = found.schema.field("valid_to").type
            ends_at = pc.min_element_wise(  # SQL's least(): the earlier one, a missing one ignored
                *(found.column(c).cast(pa.int64()) for c in ("valid_to", "expires_at")), skip_nulls=True
            ).cast(ts)
            return found.select(_SLOT_VERSION_COLUMNS[:8]).append_column("ends_at", ends_at)

    def _turned_away(self, slot_rows: pa.Table) -> pa.Table:
        """The ``_row`` of each of *slot_rows* that `SLOT_VERSION_RULES` turns away.

        The rule reads the row, the ledger (``hidden``: `forgotten_sql`) and retractions of
        the row (``retracted_since``: `retractions_sql`), and a retraction is a row of its
        target's slot: so every row a verdict on *slot_rows* depends on is among them
        (every row of their slots), and the mirror's two derived columns are computed over
        these rows only (`_derived_columns`; each costs DuckDB ~4-8 ms, the query ~1.5). With
        neither (or a ledger that cannot hide any of these rows: `Forgotten.may_hide`), the
        two columns are constants and the rule is asked in Arrow (`arrow_rule`: its SQL
        text read term by term; DuckDB costs ~3 ms here whatever the size, a third of a
        1,000-record batch's lookup at 100k).
        """
        retraction = pc.any(pc.equal(slot_rows.column("status"), "retracted")).as_py()
        if not retraction and not self._forgotten.may_hide(slot_rows):  # an empty ledger hides none
            constants = slot_rows.append_column("hidden", pa.repeat(False, slot_rows.num_rows)).append_column(
                "retracted_since", pa.nulls(slot_rows.num_rows, slot_rows.schema.field("known_since").type)
            )
            verdict = arrow_rule.evaluate(SLOT_VERSION_RULES, constants)
            if verdict is not None:  # SQL's WHERE (rule) IS NOT TRUE
                return slot_rows.select(["_row"]).filter(pc.invert(pc.fill_null(verdict, False)))
        with self._derived_columns("_slot_rows", slot_rows) as relation:
            return self.execute(f"SELECT _row FROM {relation} WHERE ({SLOT_VERSION_RULES}) IS NOT TRUE", {})

    def _slot_versions_sql(self, kind: str, table: str, lineage_ids: Sequence[str]) -> pa.Table:
        """`slot_versions` as one DuckDB query over the mirror (the rule as written)."""
        # every sighting stored so far counts: reconcile compares against what is known now
        expiry = (
            refreshed_expiry_sql(self._register("sighting"), "s.known_since", "s.valid_from", alias=table)
            if self._refreshed(kind)
            else "expires_at"
        )
        sql = f"""
SELECT record_id, lineage_id, org, division, team, actor, valid_from, content_hash,
       least(valid_to, {expiry}) AS ends_at FROM {table}
WHERE lineage_id IN (SELECT unnest($lineages)) AND {SLOT_VERSION_RULES}
ORDER BY valid_from, known_since, commit_version, _row
"""
        return self.execute(sql, {"lineages": list(lineage_ids)})

    def by_ids(self, kind: str, record_ids: Sequence[str]) -> pa.Table:
        """Raw rows by id, whatever their status (approve, retract and extraction look their
        records up here): known (``known_since`` set) and not hidden by the ledger, in
        snapshot order (`_id_positions`)."""
        with self._lock:
            self.lake.refresh()
            rows = self._take(kind, pa.array(self._id_positions(kind, record_ids), pa.int64()))
            return rows.append_column("search_text", SPECS[kind].search_text(rows))

    def _id_positions(self, kind: str, record_ids: Sequence[str]) -> np.ndarray:
        """Where `by_ids`'s rows are: found through a hash of each row's id, checked against
        the ids (`lake.Lake.id_positions`), the ledger asked through the mirror only when it could
        hide one of them (`Forgotten.may_hide`). The query over the mirror
        (`_id_positions_sql`, the rule as written) first brings the mirror up to date with
        every row appended since it was last read: a retraction on the 100k tenants store
        took 18-20 ms with it, 5-6 without. tests/test_reconcile_lookup.py checks both
        ways agree."""
        at = self.lake.id_positions(kind, record_ids)
        stored = take_rows(self.lake.all_rows(kind).select(["known_since", *Forgotten.COLUMNS]), at)
        known = np.asarray(pc.is_valid(stored.column("known_since")).to_numpy(zero_copy_only=False), dtype=bool)
        if self._forgotten.may_hide(stored.filter(pa.array(known))):
            return self._id_positions_sql(kind, record_ids)
        return np.asarray(at[known])

    def _id_positions_sql(self, kind: str, record_ids: Sequence[str]) -> np.ndarray:
        """`_id_positions` as one query over the mirror."""
        table = self._register(kind)
        hits = self.execute(
            f"SELECT _row FROM {table} WHERE record_id IN (SELECT unnest($ids)) AND known_since IS NOT NULL"
            " AND NOT hidden ORDER BY _row",
            {"ids": list(record_ids)},
        )
        return np.asarray(hits.column("_row").to_numpy(), dtype=np.int64)


#: Which stored versions the write path reconciles against (`Visibility.slot_versions`): known,
#: active, unretracted, not hidden by the ledger.
SLOT_VERSION_RULES = "known_since IS NOT NULL AND NOT hidden AND status = 'active' AND retracted_since IS NULL"
#: What `Visibility.slot_versions` reads of a slot's rows (the first eight and ``ends_at`` are what it returns) ...
_SLOT_VERSION_COLUMNS = [
    "record_id",
    "lineage_id",
    "org",
    "division",
    "team",
    "actor",
    "valid_from",
    "content_hash",
    "valid_to",
    "expires_at",
    "known_since",
    "commit_version",
]
#: ... and what `Visibility._turned_away` reads besides: the columns of the rule, of the ledger's
#: condition (`forgotten_sql`) and of retractions (`retractions_sql`).
_SLOT_VERSION_INPUTS = [
    *_SLOT_VERSION_COLUMNS,
    "status",
    "supersedes",
    "subject_key",
    "actor_key",
    "generation",
    "derived_from",
]


def _copy_slices(chunks: Sequence[pa.Table]) -> Iterator[pa.Table]:
    """*chunks* (a view's appended tables, in order) as slices of at most `MIRROR_COPY_ROWS`
    rows, each one Arrow chunk: DuckDB's scan of an Arrow table costs per chunk (a mirror
    that lagged behind a thousand one-row appends took 145 ms to catch up as a thousand
    chunks, 50 as one), and combining a slice copies only that slice. Chunks of no rows give
    one empty slice: it still creates the mirror."""
    if not chunks:
        return
    rows = chunks[0] if len(chunks) == 1 else pa.concat_tables(chunks)  # zero-copy: the chunks side by side
    for start in range(0, max(rows.num_rows, 1), MIRROR_COPY_ROWS):  # chunks of no rows: one slice of none
        piece = rows.slice(start, MIRROR_COPY_ROWS)
        yield piece if piece.column(0).num_chunks <= 1 else piece.combine_chunks()


@functools.cache
def _org_relation_inputs(kind: str) -> list[str]:
    """What `Visibility._org_relation` reads of a kind's rows: the columns of `history_sql` and
    `visibility_sql`, of the ledger's condition (`forgotten_sql`) and of retractions (`retractions_sql`)."""
    names = [*_SLOT_VERSION_INPUTS, *sorted(SLOT_COLUMNS.get(kind, ()))]
    return list(dict.fromkeys(names))


#: What the visibility query returns when nothing is visible.
_NO_HITS = pa.table(
    {
        "decision_id": pa.array([], pa.string()),
        "_row": pa.array([], pa.int64()),
        "scope_depth": pa.array([], pa.int32()),
    }
)

#: Kinds whose TTL a restatement refreshes (a `conversation.Sighting` of the row in force).
REFRESHED_KINDS = frozenset({"preference"})


def tables_for(kinds: Iterable[str]) -> list[str]:
    """The tables a read of *kinds* depends on: each kind's own, and sightings where they move expiries.

    A read refreshes just these (`lake.Lake.refresh` brings in the other tables a new
    transaction wrote to, so its rows are known once its last part is).
    """
    out = list(dict.fromkeys(kinds))
    if any(k in REFRESHED_KINDS for k in out) and "sighting" not in out:
        out.append("sighting")
    return out


#: Kinds whose slot (lineage) is derived from the subject, so no slot spans two subjects and a
#: subject can be picked out of a reader's visible set after the query (`_from_reader_set`).
SUBJECT_SLOTS = frozenset({"fact", "preference"})

#: DuckDB worker threads. The mirror of a 100k-row store is one row group, scanned by one
#: thread anyway, and each extra thread kept ~90 MB of allocator caches (RSS 476 vs 386 MB).
DUCKDB_THREADS = 1
#: ... except while a mirror copies this many rows or more (`Visibility._copy_threads`): the
#: first read of a kind after a restart copies the whole snapshot. Reopening the 1M tenants
#: store, its first `get_fact` took 1,429-1,431 ms with one thread and 991-1,068 with two
#: (Δ peak RSS +5-7 MB); at 100k two threads cost it ~100 ms more (175-181 -> 281-287).
COPY_THREADS_ROWS = 500_000
COPY_THREADS = 2
#: The most rows a mirror takes in one statement (`_copy_slices`), each slice compressed by a
#: checkpoint before the next. A first copy in one statement held every row of the kind
#: twice beside the snapshot, combined into one Arrow chunk and plain in DuckDB until the
#: checkpoint: copying the 1M tenants store's facts raised the peak RSS 614 MB above where
#: it began (a `/tmp` script, one run each), 481 MB in slices of 262,144 rows, in the same
#: 2.6-2.7 s; slices of 131,072 rows gave 410 MB but took 5.5 s (each checkpoint costs more
#: as the table grows).
MIRROR_COPY_ROWS = 262_144
#: Keep the mirrors in an in-memory catalog DuckDB compresses (``ATTACH ':memory:' (COMPRESS)``,
#: DuckDB 1.4+): a mirror holds every row of a kind beside the Arrow snapshot, the largest
#: single thing a warm store holds (513 MB of the 1M tenants run's 2.7 GB). Measured on the
#: tenants stores: the 100k facts' mirror 53 -> 8 MB, and a scan of it by org and status
#: 1.9 -> 0.9 ms; the tenants bench's Δ peak RSS at 100k 492 -> 450-459 MB. The price is
#: the copy: a store's first read at 100k 280 -> 510 ms; reopened at 1M, the first
#: `get_fact` 1.6 -> 3.0 s (a second org's first recall 0.9 -> 0.55 s: its queries scan
#: compressed rows). Rows the mirror takes in later stay plain until DuckDB checkpoints the
#: catalog, every ~16 MiB of them (~48k facts): ~0.1 s inside the statement that crosses it.
MIRROR_COMPRESSED = True

#: Basis cells of slot heads kept per (kind, org) (now, and a few past bases); the bytes all of
#: them may hold are `CacheBudget.heads`.
HEAD_CELLS = 4
#: Heads are advanced by at most this many appended rows of the org; more run the query.
ADVANCE_ROWS = 512
#: An org whose rows of a kind lie in snapshot chunks of at most this many rows in all has its
#: history built from them, not queried (`Visibility._few_rows`); within `ADVANCE_ROWS`.
HISTORY_FROM_ROWS = ADVANCE_ROWS
#: The bytes a store's read caches may hold unless `open(read_cache_bytes=)` says otherwise:
#: at 1M records (20 orgs) the cells at now and the histories take ~260 MB (heads ~136 bytes
#: and histories ~115 bytes a version), so every org stays held; `CacheBudget` shares them out.
READ_CACHE_BYTES = 512 * 2**20


@dataclass(frozen=True)
class CacheBudget:
    """The bytes each of `Visibility`'s read caches may hold, shared out of one total.

    Why three: their worth differs. A cell (an org's heads at a basis) costs one pick from
    its history to have again; a history costs its org's query (~10 ms at 100k, ~55 ms at
    1M); a remembered result, one reader's visible set, the heads pass again. Counted
    together, the 1M store's histories pushed the cells at now out (`Visibility._evict_heads`).
    """

    heads: int
    histories: int
    results: int

    @classmethod
    def of(cls, total: object) -> CacheBudget:
        """*total* bytes shared 4 : 3 : 1 (256, 192 and 64 MB of the default 512 MB); or
        ValidationError. 0 keeps what the read under way needs (one org's cells, one history
        held and the last one read in the window: `Visibility._history`)."""
        if isinstance(total, bool) or not isinstance(total, int) or total < 0:
            raise ValidationError(f"read_cache_bytes must be an int >= 0, got {total!r}", field="read_cache_bytes")
        heads, histories = total // 2, total * 3 // 8
        return cls(heads, histories, total - heads - histories)


#: Results a cell remembers for readers who read again (a recall's ids: ~50 KB per 1k visible rows).
HEAD_MEMO_BYTES = 16 * 2**20

#: Remembered single-read results (the visible set of one reader, shape and filter); their
#: bytes are `CacheBudget.results` (a reader's whole visible set grows with the store).
CACHE_ENTRIES = 256


def _remember(heads: OrgHeads, key: tuple[Any, ...], result: Any, size: int) -> None:
    """Keep a read's result on the cell that served it, within `CACHE_ENTRIES` and `HEAD_MEMO_BYTES`."""
    if len(heads.memo) >= CACHE_ENTRIES or heads.memo_bytes + size > HEAD_MEMO_BYTES:
        heads.memo.clear()
        heads.memo_bytes = 0
    heads.memo[key] = result
    heads.memo_bytes += size


def _table_bytes(table: pa.Table) -> int:
    """What a remembered result holds: its buffers' sizes. ``Table.nbytes`` walks every value's
    offsets (~0.1 ms for one taken row of 27 columns, twice per read); a read's result is a
    take, whose buffers are its own, so their sizes are what it keeps alive. An empty result
    may be a slice of the snapshot: it holds nothing of its own."""
    return table.get_total_buffer_size() if table.num_rows else 0


_NO_POSITIONS = pa.array([], pa.int64())
_NO_POSITIONS_NP = np.zeros(0, dtype=np.int64)
_NO_POSITIONS_NP.flags.writeable = False

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


@dataclass
class _HeadCell:
    """An org's slot heads at one basis, with what they were built from: the org's state
    and the instants of its rows then (`_Boundaries`), which `Visibility._advanced` checks."""

    state: tuple[Any, ...]
    known_at: int
    valid_at: int
    heads: OrgHeads
    known_bounds: np.ndarray
    valid_bounds: np.ndarray


@dataclass(frozen=True)
class ReadCacheStats:
    """`Visibility.cache_stats`: bytes held per cache against `budget`, and the reads that needed
    an org's history since the store opened, picked from one held or read by a query. Queries
    that keep pace with reads mean the readers go round more orgs than the bound holds: a
    bigger ``read_cache_bytes`` (or fewer orgs per process) saves one query per miss."""

    budget: CacheBudget
    heads_bytes: int
    head_orgs: int
    histories_bytes: int
    history_orgs: int
    results_bytes: int
    history_picks: int
    history_queries: int
    #: reads that advanced a history read earlier by the org's rows appended since, or built an
    #: org's from its few rows (`Visibility._few_rows`): no query
    history_advances: int = 0


class _RecentCounts:
    """How often each (kind, org) was asked for lately: counts that halve every
    `RECENT_COUNTS_HALVED_EVERY` asks, so an org busy long ago does not hold its place for
    good (the frequency sketch of TinyLFU, exact: there are a few dozen orgs, not millions
    of keys)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}
        self._since_halved = 0

    def add(self, key: tuple[str, str]) -> None:
        self._counts[key] = self._counts.get(key, 0) + 1
        self._since_halved += 1
        if self._since_halved >= RECENT_COUNTS_HALVED_EVERY:
            self._counts = {k: c // 2 for k, c in self._counts.items() if c > 1}
            self._since_halved = 0

    def count(self, key: tuple[str, str]) -> int:
        return self._counts.get(key, 0)


#: Asks after which `_RecentCounts` halves its counts.
RECENT_COUNTS_HALVED_EVERY = 512


def _cell_bytes(cell: _HeadCell) -> int:
    return cell.heads.nbytes + cell.heads.memo_bytes


def _oldest_past_cell(cells: Sequence[_HeadCell]) -> _HeadCell:
    """Of an org's cells (at least two), the oldest but the one known latest: the cell at now,
    which reads at now and writes' advances use, stays."""
    latest = max(cells, key=lambda c: (c.known_at, c.valid_at))
    return next(c for c in cells if c is not latest)


def _micros(value: datetime) -> int:
    return ((value if value.tzinfo else value.replace(tzinfo=UTC)) - _EPOCH) // _MICRO


class _Boundaries:
    """Per org: how many appends brought it rows (and which chunks of the snapshot they are),
    and the sorted instants at which one of its rows' visibility can flip, per clock
    (known_since; valid_from, valid_to, expires_at). Taking rows in replaces an org's arrays
    with new ones, so a holder of the old arrays keeps the instants as they were then.

    An org's instants from a big add (`LAZY_INSTANTS_ROWS` rows or more: a process's first
    read of a kind takes in the whole snapshot) are taken when first asked for
    (`instants`): taking every org's cost the first request after a restart ~25 ms at
    100k, ten times that at 1M, for the one org it reads. Smaller adds (a write's rows)
    are taken at once, so what waits holds only those few big adds. The instants are a
    set: the order they are merged in does not matter.
    """

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.applied = 0
        self.rows = 0  # rows of the chunks added: the next chunk's first position
        self.appends: dict[str, int] = {}
        self.chunks: dict[str, list[tuple[int, int]]] = {}  # org -> (chunk index, its first position)
        self._known: dict[str, np.ndarray] = {}
        self._valid: dict[str, np.ndarray] = {}
        # org -> the rows added since its instants were last taken: (rows, each row's org code, the org's)
        self._waiting: dict[str, list[tuple[pa.Table, np.ndarray, int]]] = {}

    def add(self, chunks: Sequence[pa.Table]) -> None:
        """Take in the snapshot's next *chunks* (appends), in order.

        All at once, per org rather than per chunk: a read after hundreds of one-row writes
        (a replay after the tenants bench's writer threads: 500 chunks) spent ~0.11 ms a
        chunk here, ~57 ms in all. tests/test_heads.py checks chunks taken in together and
        one by one give the same boundaries."""
        if not chunks:
            return
        sizes = np.array([c.num_rows for c in chunks], dtype=np.int64)
        firsts = self.rows + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        rows = pa.concat_tables([c.select(_BOUNDARY_COLUMNS) for c in chunks])
        which = np.repeat(np.arange(len(chunks), dtype=np.int64), sizes)  # each row's chunk
        orgs = rows.column("org")
        encoded = pc.dictionary_encode(orgs).combine_chunks()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        for code, org in enumerate(encoded.dictionary.to_pylist()):
            mine = codes == code
            its = np.unique(which[mine])  # the chunks that brought it rows, in order
            self.appends[org] = self.appends.get(org, 0) + len(its)
            self.chunks.setdefault(org, []).extend(
                zip((self.applied + its).tolist(), firsts[its].tolist(), strict=True)
            )
            if rows.num_rows >= LAZY_INSTANTS_ROWS:
                self._waiting.setdefault(org, []).append((rows, codes, code))
            else:
                self._take_instants(org, [(rows, codes, code)])
        self.applied += len(chunks)
        self.rows += int(sizes.sum())

    def instants(self, org: str) -> tuple[np.ndarray, np.ndarray]:
        """*org*'s sorted instants of each clock: known (known_since), valid (valid_from,
        valid_to, expires_at); taken from the rows added since they were last asked for."""
        waiting = self._waiting.pop(org, None)
        if waiting:
            self._take_instants(org, waiting)
        return self._known.get(org, _NONE), self._valid.get(org, _NONE)

    def _take_instants(self, org: str, added: Sequence[tuple[pa.Table, np.ndarray, int]]) -> None:
        """Merge *org*'s instants of *added* (rows, each row's org code, the org's) into its arrays (new ones)."""
        known, valid = self._known.get(org, _NONE), self._valid.get(org, _NONE)
        for rows, codes, code in added:
            mine = codes == code
            ours = rows if mine.all() else rows.filter(pa.array(mine))
            known = _merged(known, _instants(ours, ("known_since",)))
            valid = _merged(valid, _instants(ours, ("valid_from", "valid_to", "expires_at")))
        self._known[org], self._valid[org] = known, valid

    def crosses(self, org: str, known: tuple[int, int], valid: tuple[int, int]) -> bool:
        """Whether an instant of *org* lies between two readings of either clock."""
        known_at, valid_at = self.instants(org)
        return _between(known_at, *known) or _between(valid_at, *valid)


_NONE = np.empty(0, dtype=np.int64)
#: An add of this many rows or more leaves each org's instants until they are asked for (`_Boundaries`).
LAZY_INSTANTS_ROWS = 10_000
#: What `_Boundaries.add` reads of an appended chunk.
_BOUNDARY_COLUMNS = ["org", "known_since", "valid_from", "valid_to", "expires_at"]


def _merged(instants: np.ndarray, more: np.ndarray) -> np.ndarray:
    """``np.union1d`` of a sorted unique array and a few more (also sorted and unique):
    inserted where they belong rather than everything sorted again (a write adds a few).
    Membership by binary search: ``np.isin`` sorts both arrays (~0.2 ms for 10k instants)."""
    if not len(instants) or not len(more):
        return more if not len(instants) else instants
    at = np.searchsorted(instants, more)
    held = instants[np.minimum(at, len(instants) - 1)] == more
    fresh = more[~held]
    return np.insert(instants, at[~held], fresh) if len(fresh) else instants


def _between(instants: np.ndarray, a: int, b: int) -> bool:
    lo, hi = (a, b) if a <= b else (b, a)
    return bool(np.searchsorted(instants, hi, "right") - np.searchsorted(instants, lo, "right"))


def _instants(chunk: pa.Table, names: Sequence[str]) -> np.ndarray:
    parts = []
    for name in names:
        col = chunk.column(name).drop_null()
        if len(col):
            parts.append(pc.cast(col, pa.int64()).to_numpy())
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)
