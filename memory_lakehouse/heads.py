"""Slot heads of one org at one basis, materialised once and shared by every reader.

The visibility query (`query.visibility_sql`) decides, per slot (lineage) and scope
depth, which version is the head at a basis, then serves each slot's deepest live head.
Its rules split cleanly in two:

* what depends on the basis and the rows — system time, retraction, valid time, the
  ledger, status, the head of each (slot, scope) and whether that head has ended or
  expired: the same for every reader of the org, since a scope has no gaps (its
  levels are set top-down, see `scope.Scope`), so a reader sees at most one scope per
  depth and "the head per (slot, depth) among the reader's rows" is "the head per
  (slot, scope)" restricted to the reader's scopes;
* what depends on the reader — which scopes it sees (`scope_matches`, the same rule
  the SQL spells as ``r.level IS NULL OR r.level = b.level``) and, per slot, the deepest
  live head among them.

`OrgHeads` holds the first part, computed by *the* query (`visibility_sql(...,
per_scope=True)`), once per org, snapshot and basis cell (a stretch of bases with no row
boundary between them, `query._Boundaries`). `OrgHeads.visible` applies the second part
with numpy masks: ~20 µs for a reader of a 5k-head org instead of a DuckDB query (several
ms). tests/test_heads.py checks it against the per-reader query on randomised stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .scope import Scope

#: The levels a reader's scope is matched on below the org (the org always matches exactly).
SCOPE_LEVELS: tuple[str, ...] = ("division", "team", "actor")

#: Filter columns that are the same on every version of a slot, per kind (a slot is a hash of
#: them, `records._slot`): filtering on them before or after choosing the head is the same,
#: so `OrgHeads` can apply them after. Other filters go through the per-reader query.
SLOT_COLUMNS: dict[str, frozenset[str]] = {
    "fact": frozenset({"attribute"}),
    "preference": frozenset({"attribute"}),
    "note": frozenset({"session_id", "key"}),
    "policy": frozenset({"policy_id"}),
    "reference": frozenset({"uri"}),
}

#: Kinds whose slot includes the subject (every version of a slot has the same subject_key).
SUBJECT_IN_SLOT = frozenset({"fact", "preference"})


_FALSE = pa.scalar(False, pa.bool_())


def scope_rule_sql(level: str, b: str) -> str:
    """The scope rule for one level below the org, as the query spells it."""
    return f"(r.{level} IS NULL OR r.{level} = {b})"


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, dict[str, int]]:
    """Dictionary codes of a string column (null = -1) and the value -> code map."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    values = encoded.dictionary.to_pylist()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    codes = np.where(encoded.is_null().to_numpy(zero_copy_only=False), -1, codes).astype(np.int32)
    return codes, {v: i for i, v in enumerate(values)}


@dataclass
class OrgHeads:
    """Every (slot, scope) head of one org at one basis cell, whether it is live, and how
    to pick one reader's visible rows out of them.

    Arrays are sorted by (slot, depth); ``order`` is each head's place in the query's
    output order (newest ``valid_from`` first). ``rows`` are positions in the kind's
    Arrow snapshot.
    """

    rows: np.ndarray
    lineage: np.ndarray
    live: np.ndarray
    order: np.ndarray
    levels: dict[str, tuple[np.ndarray, dict[str, int]]]
    slot_values: dict[str, pa.Array]
    nbytes: int = 0
    memo: dict[tuple[Any, ...], pa.Table] = field(default_factory=dict, repr=False)  # results served from this cell
    memo_bytes: int = 0
    _by_subject: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, hits: pa.Table, snapshot: pa.Table, kind: str) -> OrgHeads:
        """From the per-scope query's result (``_row, lineage_id, scope_depth, division,
        team, actor, live``) and the snapshot the positions point into."""
        # the query returns heads in its output order (newest valid_from first): remember each
        # one's place there, then sort by (slot, depth) for the per-reader pick
        hits = hits.append_column("_out", pa.array(np.arange(hits.num_rows, dtype=np.int64)))
        if hits.num_rows:
            hits = hits.take(pc.sort_indices(hits, [("lineage_id", "ascending"), ("scope_depth", "ascending")]))
        rows = hits.column("_row").to_numpy().astype(np.int64)
        lineage, _ = _codes(hits.column("lineage_id"))
        live = hits.column("live").to_numpy(zero_copy_only=False).astype(bool)
        levels = {level: _codes(hits.column(level)) for level in SCOPE_LEVELS}
        taken = snapshot.select(sorted(SLOT_COLUMNS.get(kind, ()))).take(pa.array(rows, pa.int64()))
        heads = cls(
            rows=rows,
            lineage=lineage,
            live=live,
            order=hits.column("_out").to_numpy().astype(np.int64),
            levels=levels,
            slot_values={c: taken.column(c).combine_chunks() for c in taken.column_names},
        )
        heads.nbytes = int(rows.nbytes * 4 + taken.nbytes + sum(c.nbytes for c, _ in levels.values()))
        return heads

    def __len__(self) -> int:
        return len(self.rows)

    def _reader_mask(self, scope: Scope, idx: np.ndarray | None = None) -> np.ndarray:
        """Live heads at scopes the reader sees (its own and its ancestors'), over *idx* or all."""
        mask = self.live if idx is None else self.live[idx]
        for level in SCOPE_LEVELS:
            codes, lookup = self.levels[level]
            if idx is not None:
                codes = codes[idx]
            value = getattr(scope, level)
            # the query: r.level IS NULL OR r.level = reader.level (a NULL reader level matches only NULL)
            code = -2 if value is None else lookup.get(value, -2)
            mask = mask & ((codes == -1) | (codes == code))
        return mask

    def visible(
        self,
        scope: Scope,
        snapshot: pa.Table,
        *,
        subject_key: str | None = None,
        filters: Mapping[str, str] | None = None,
    ) -> np.ndarray | None:
        """Indices (into these arrays) of what *scope*'s reader is served, in the query's order:
        per slot, the deepest live head among the scopes it sees; None when a filter cannot
        be applied after the head is chosen (see `_filtered`), and the query must run.

        *snapshot* is the kind's Arrow snapshot the positions point into (for subject keys).
        """
        idx = self._subject_rows(subject_key, snapshot) if subject_key is not None else np.arange(len(self.rows))
        for col, value in (filters or {}).items():
            picked = self._filtered(idx, col, value)
            if picked is None:
                return None
            idx = picked
        idx = idx[self._reader_mask(scope, idx)]
        if len(idx) > 1:  # sorted by (slot, depth): the last of each slot's run is the deepest
            lin = self.lineage[idx]
            idx = idx[np.append(lin[1:] != lin[:-1], True)]
            idx = idx[np.argsort(self.order[idx], kind="stable")]
        return np.asarray(idx)

    def _filtered(self, idx: np.ndarray, col: str, value: str) -> np.ndarray | None:
        """The heads among *idx* whose *col* equals *value*, or None if that may differ from
        filtering first.

        A slot hashes its columns case-folded (`records._slot`), so versions of one slot
        may spell a column differently ("P1" and "p1"). The query filters before choosing
        heads: if a head is spelled otherwise than *value* but folds to it, an older version
        spelled *value* could be the query's head, so the caller runs the query.
        """
        if not len(idx):
            return idx
        values = self.slot_values[col].take(pa.array(idx, pa.int64()))
        # typed scalars: with a bare str pyarrow infers a type, and tries to import dateutil, every call
        hit = pc.fill_null(pc.equal(values, pa.scalar(value, pa.string())), _FALSE)
        hit = hit.to_numpy(zero_copy_only=False).astype(bool)
        folded = value.casefold()
        suspects = pc.or_(
            pc.invert(pc.string_is_ascii(values)),
            pc.equal(pc.utf8_lower(values), pa.scalar(value.lower(), pa.string())),
        )
        suspects = pc.fill_null(suspects, _FALSE).to_numpy(zero_copy_only=False).astype(bool) & ~hit
        if suspects.any() and any(
            v is not None and v.casefold() == folded for v in values.filter(pa.array(suspects)).to_pylist()
        ):
            return None
        return np.asarray(idx[hit])

    def _subject_rows(self, key: str, snapshot: pa.Table) -> np.ndarray:
        if self._by_subject is None:
            column = snapshot.column("subject_key").take(pa.array(self.rows, pa.int64()))
            keys = np.asarray(column.to_numpy(zero_copy_only=False), dtype="S64")
            perm = np.argsort(keys, kind="stable")
            self._by_subject = (keys[perm], perm)
        keys, perm = self._by_subject
        needle = np.asarray(key, dtype="S64")
        lo, hi = np.searchsorted(keys, needle, "left"), np.searchsorted(keys, needle, "right")
        return np.sort(perm[lo:hi])
