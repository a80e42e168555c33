"""Bulk point-in-time replay: what each past decision could have known, and nothing more.

`replay` evaluates the one visibility query for every decision at once (one basis row
per decision), so an eval harness sees exactly what production saw. It reports the
leakage rate — the share of decisions that saw a row not yet known (committed after
the decision) or not yet valid — which is zero by construction here and is measured,
not assumed; ``naive=True`` runs the query most memory stores run (everything about
the subject, now) for comparison. Freshness lag is ``known_since - valid_from``: how
long the store took to learn what happened.

The result names a row once per decision that saw it, so its string columns are
dictionary-encoded (Arrow's ``dictionary<values=string>``; polars reads them as
categoricals): each distinct text is stored once. Values, comparisons and
``to_pylist()`` are those of plain strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import ValidationError
from .query import SUBJECT_SLOTS, Visibility, bases_table, forgotten_sql
from .records import MEMORY_KINDS, subject_key
from .scope import Principal
from .time import Basis, require_aware

VISIBLE_COLUMNS = [
    "decision_id",
    "record_id",
    "lineage_id",
    "kind",
    "subject",
    "search_text",
    "known_since",
    "valid_from",
    "valid_to",
    "source",
    "authority",
    "decided_at",
]

#: What a result row takes from the visible row itself (the rest names its decision).
ROW_COLUMNS = [c for c in VISIBLE_COLUMNS if c not in ("decision_id", "kind", "decided_at")]


@dataclass(frozen=True)
class Decision:
    """A past decision to replay: who decided, about what, when."""

    decision_id: str
    principal: Principal
    query: str
    subject: str | None
    decided_at: datetime


@dataclass(frozen=True)
class ReplayResult:
    visible: pa.Table  # one row per (decision, visible record)
    decisions: int
    leaked_decisions: int
    naive: bool
    decided: pa.Table | None = None  # decision_id, decided_at: every replayed decision

    def to_arrow(self) -> pa.Table:
        """The visible rows: one per (decision, record) — the same table as ``visible``."""
        return self.visible

    def to_polars(self) -> Any:
        from .tables import to_polars

        return to_polars(self.visible)

    def per_decision(self) -> pa.Table:
        """One row per decision: ``decision_id, decided_at, visible_rows, leaked`` (a row it saw was
        not known or not valid at ``decided_at``), in the order the decisions were given."""
        decided = (
            self.decided
            if self.decided is not None
            else pa.table(
                {"decision_id": pa.array([], pa.string()), "decided_at": pa.array([], pa.timestamp("us", tz="UTC"))}
            )
        )
        v = self.visible
        late = (
            pc.or_(
                pc.greater(v.column("known_since"), v.column("decided_at")),
                pc.greater(v.column("valid_from"), v.column("decided_at")),
            )
            if v.num_rows
            else pa.array([], pa.bool_())
        )
        counts: dict[str, int] = {}
        leaked: set[str] = set()
        for did, bad in zip(v.column("decision_id").to_pylist(), late.to_pylist(), strict=True):
            counts[did] = counts.get(did, 0) + 1
            if bad:
                leaked.add(did)
        ids = decided.column("decision_id").to_pylist()
        return pa.table(
            {
                "decision_id": pa.array(ids, pa.string()),
                "decided_at": decided.column("decided_at"),
                "visible_rows": pa.array([counts.get(d, 0) for d in ids], pa.int64()),
                "leaked": pa.array([d in leaked for d in ids], pa.bool_()),
            }
        )

    @property
    def leakage_rate(self) -> float:
        return self.leaked_decisions / self.decisions if self.decisions else 0.0

    @property
    def freshness_lag_seconds(self) -> dict[str, float]:
        """p50/p90/max of known_since − valid_from over the rows the decisions saw."""
        if self.visible.num_rows == 0:
            return {"p50": 0.0, "p90": 0.0, "max": 0.0}
        lag = pc.divide(
            pc.cast(pc.subtract(self.visible.column("known_since"), self.visible.column("valid_from")), pa.int64()),
            1_000_000,
        )
        qs = pc.quantile(lag, q=[0.5, 0.9]).to_pylist()
        return {"p50": float(qs[0]), "p90": float(qs[1]), "max": float(pc.max(lag).as_py())}


def as_decisions(rows: Iterable[Any]) -> list[Decision]:
    """Accept Decision objects, tuples ``(id, principal, query, subject, decided_at)`` or mappings."""
    out = []
    for row in rows:
        if isinstance(row, Decision):
            d = row
        elif isinstance(row, Mapping):
            d = Decision(
                str(row["decision_id"]),
                row["principal"],
                str(row.get("query", "")),
                row.get("subject"),
                row["decided_at"],
            )
        else:
            decision_id, principal, query, subject, decided_at = row
            d = Decision(str(decision_id), principal, str(query), subject, decided_at)
        if not isinstance(d.principal, Principal):
            raise ValidationError(f"decision {d.decision_id}: principal must be a Principal", field="principal")
        out.append(
            Decision(
                d.decision_id,
                d.principal,
                d.query,
                d.subject,
                require_aware(d.decided_at, f"decision {d.decision_id}: decided_at"),
            )
        )
    seen: set[str] = set()
    for d in out:  # a result row names its decision by id: two decisions of one id would be one
        if d.decision_id in seen:
            raise ValidationError(
                f"decision id {d.decision_id!r} appears more than once; give each decision an id of its own",
                field="decision_id",
            )
        seen.add(d.decision_id)
    return out


def _leaks(visible: pa.Table) -> int:
    if visible.num_rows == 0:
        return 0
    late = pc.or_(
        pc.greater(visible.column("known_since"), visible.column("decided_at")),
        pc.greater(visible.column("valid_from"), visible.column("decided_at")),
    )
    return len(pc.unique(visible.filter(late).column("decision_id")))


def replay(
    vis: Visibility, decisions: Sequence[Decision], *, kinds: Sequence[str] = MEMORY_KINDS, naive: bool = False
) -> ReplayResult:
    decided = pa.table(
        {
            "decision_id": [d.decision_id for d in decisions],
            "decided_at": pa.array([d.decided_at for d in decisions], pa.timestamp("us", tz="UTC")),
        }
    )
    parts = []
    for kind in kinds:
        for rows in [_naive(vis, kind, decisions)] if naive else _visible(vis, kind, decisions):
            kind_column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows.num_rows, np.int32)), pa.array([kind]))
            rows = rows.append_column("kind", kind_column)
            # each row's decided_at taken by its decision's position: a join copied every column
            # (154k rows with their search text at 100k, 200 decisions) and built a hash table beside them
            at = pc.index_in(rows.column("decision_id"), value_set=decided.column("decision_id"))
            rows = rows.append_column("decided_at", decided.column("decided_at").take(at))
            parts.append(rows.select(VISIBLE_COLUMNS))
    visible = pa.concat_tables(parts) if parts else pa.table({c: [] for c in VISIBLE_COLUMNS})
    return ReplayResult(visible, len(decisions), _leaks(visible), naive, decided)


def _visible(vis: Visibility, kind: str, decisions: Sequence[Decision]) -> list[pa.Table]:
    """What each of *decisions* could see of *kind*, in order of decision id, as one table
    or a few (`ROW_COLUMNS` and ``decision_id``).

    A decision that weighs in the query what its org holds (`_about_one_subject`: no
    subject, or a kind whose slots span subjects) is served from the org's slot heads
    where they can serve it, as a single read at its time is (`Visibility.head_positions`):
    a mask over the heads each. The others (about one subject, or a kind whose expiries
    sightings move) run the one visibility query over many decisions at once, in runs
    (`_chunks`), which reads only their subjects' rows. Measured at 100k in `/tmp` scripts:
    200 decisions without a subject, the query 217-292 ms (its peak +30 MB in DuckDB), the
    heads' positions 78-82 ms (+7 MB); 10,000 about a subject (`scripts/bench_replay.py`),
    the query 0.55 s, the heads 7.0 s (a heads cell computed per basis). tests/test_replay.py
    checks the two give the same rows in the same order; the model-based test checks both
    against the model.
    """
    ordered = sorted(decisions, key=lambda d: d.decision_id)
    served: list[Decision] = []
    picked: list[np.ndarray] = []
    queried: list[Decision] = []
    with vis._lock:  # every decision's positions in one snapshot's epoch, and the take from it
        for d in ordered:
            basis = Basis(d.decided_at, d.decided_at)
            at = (
                None if _about_one_subject(d, kind) else vis.head_positions(kind, d.principal, basis, subject=d.subject)
            )
            if at is None:
                queried.append(d)
            else:
                served.append(d)
                picked.append(at)
        parts = []
        if served:
            positions = pa.array(np.concatenate(picked), pa.int64())
            rows = vis._take(kind, positions, ROW_COLUMNS, dictionary=True)
            index = np.repeat(np.arange(len(served), dtype=np.int32), [len(p) for p in picked])
            ids = pa.array([d.decision_id for d in served], pa.string())
            decision_ids = pa.DictionaryArray.from_arrays(pa.array(index, pa.int32()), ids)
            parts.append(rows.append_column("decision_id", decision_ids))
        for run in _chunks(vis, kind, queried) if queried else []:
            bases = bases_table(
                [(d.decision_id, d.principal, Basis(d.decided_at, d.decided_at), d.subject) for d in run]
            )
            rows = vis.visible(kind, bases, columns=ROW_COLUMNS, dictionary=True)
            parts.append(rows.select([*ROW_COLUMNS, "decision_id"]))
    if len(parts) < 2 or not queried or not served:
        return parts
    # both ways: the rows again in order of decision id (each part is already; a stable sort keeps the rest)
    rows = pa.concat_tables(parts)
    rank = pc.index_in(rows.column("decision_id"), value_set=pa.array([d.decision_id for d in ordered], pa.string()))
    return [rows.take(pa.array(np.argsort(rank.to_numpy(), kind="stable"), pa.int64()))]


#: How many (decision, row) pairs one visibility query over many decisions may weigh
#: (`_chunks`). DuckDB holds every pair that passes the scope and time rules until it has
#: picked each decision's heads, and its allocator keeps that memory afterwards. 200
#: decisions with no subject, replayed once in a process (a `/tmp` script on the tenants
#: stores; RSS above the start, peak / time): at 100k (~1M pairs, a 33 MB result) +96 MB /
#: 209-248 ms in one query, +70 / 223-291 at 500k pairs a query, +54 / 258-305 at 250k;
#: at 1M (~10M pairs, a 343 MB result) +694 / 2.8-4.0 s, +404 / 3.5-4.2, +396 / 4.4-5.1.
#: (Measured while the result held plain strings; dictionary-encoded, 33 -> 18 MB at 100k.)
REPLAY_PAIRS = 500_000


def _chunks(vis: Visibility, kind: str, decisions: Sequence[Decision]) -> list[Sequence[Decision]]:
    """*decisions* in order of their ids, in runs of at least two, each weighing at most
    `REPLAY_PAIRS` unless its first two already do (a run of one is only ever a lone
    decision: a single read is answered by another path).

    The query orders its rows by decision id, so runs in that order give the rows of one
    query over all of them, in the same order. A decision weighs its org's rows of *kind*;
    one about a subject weighs one where the rules keep only that subject's rows before
    picking heads (`query.SUBJECT_SLOTS`), so 10,000 decisions about subjects are still
    one query of facts (`scripts/bench_replay.py`).
    """
    if len(decisions) < 2:
        return [decisions]
    ordered = sorted(decisions, key=lambda d: d.decision_id)
    counts = pc.value_counts(vis.lake.all_rows(kind).column("org")).to_pylist()
    org_rows = {c["values"]: c["counts"] for c in counts}
    starts, weight = [0], 0
    for i, d in enumerate(ordered):
        w = 1 if _about_one_subject(d, kind) else org_rows.get(d.principal.scope.org, 0)
        if i - starts[-1] >= 2 and weight + w > REPLAY_PAIRS:
            starts.append(i)
            weight = 0
        weight += w
    if len(ordered) - starts[-1] < 2:  # a last run of one joins the run before it
        starts.pop()
    return [ordered[a:b] for a, b in zip(starts, [*starts[1:], len(ordered)], strict=True)]


def _about_one_subject(decision: Decision, kind: str) -> bool:
    """Whether the visibility query reads only the subject's rows for *decision*: it names
    one, and no slot of *kind* spans two subjects (`query.SUBJECT_SLOTS`). Such a decision
    weighs one row in a run (`_chunks`); any other, every row of its org."""
    return decision.subject is not None and kind in SUBJECT_SLOTS


def _naive(vis: Visibility, kind: str, decisions: Sequence[Decision]) -> pa.Table:
    """The baseline most vector-store memory runs: every row about the subject, as of now.

    Scope is still respected (a leak across tenants is a different bug); time,
    supersession and status are not. This is a comparison, never a serving path.
    """
    with vis._lock:
        vis.lake.refresh()
        table = vis._register(kind)
        vis.con.register(
            "naive_decisions",
            pa.table(
                {
                    "decision_id": [d.decision_id for d in decisions],
                    "org": [d.principal.scope.org for d in decisions],
                    "subject_key": pa.array(
                        [subject_key(d.subject) if d.subject else None for d in decisions], pa.string()
                    ),
                }
            ),
        )
        hits = vis.execute(
            f"""
SELECT r._row, b.decision_id FROM {table} r JOIN naive_decisions b
  ON r.org = b.org AND (b.subject_key IS NULL OR r.subject_key = b.subject_key)
WHERE {forgotten_sql("r")}
""",
            {},
        )
        rows = vis._take(kind, hits.column("_row"), ROW_COLUMNS, dictionary=True)
        return rows.append_column("decision_id", hits.column("decision_id").combine_chunks().dictionary_encode())
