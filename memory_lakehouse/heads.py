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

`OrgHeads` holds the first part once per org, snapshot and basis cell (a stretch of bases
with no row boundary between them, `query._Boundaries`): picked from the org's versions
(`OrgHistory`, read by one query per org and state), or advanced by the rows written
since (`OrgHeads.advanced`). `OrgHeads.visible` applies the second part with numpy masks:
~20 µs for a reader of a 5k-head org instead of a DuckDB query (several ms).
tests/test_heads.py checks both against the per-reader query on randomised stores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .codes import SortedCodes
from .lake import take_rows
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

#: The columns a (slot, scope)'s versions are ordered by to pick its head, greatest first (then
#: position), as `query.visibility_sql` orders them: ``ORDER BY valid_from DESC, known_since
#: DESC, commit_version DESC, _row DESC``.
HEAD_KEY: tuple[str, ...] = ("valid_from", "known_since", "commit_version")


def _key(rows: pa.Table) -> np.ndarray:
    """The head key of each row as an (n, 3) int64 array (timestamps in µs).

    A timestamp's integers are read through a view of each chunk: a cast to int64 costs
    ~8 µs a column (cold, ~50: a sixth of advancing the heads by one written row)."""
    key = np.empty((rows.num_rows, len(HEAD_KEY)), dtype=np.int64)
    if not rows.num_rows:
        return key
    for i, name in enumerate(HEAD_KEY):
        column = rows.column(name)
        chunks = [c.view(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in column.chunks]
        key[:, i] = np.concatenate([c.to_numpy(zero_copy_only=False) for c in chunks]).astype(np.int64)
    return key


def _rows_at(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``values[idx]`` along the first axis, by `np.take`.

    numpy's fancy indexing of a 2-D array takes a general path: 50k of an org's 60k head
    keys ((n, 3) int64) at 1M cost ~450 µs gathered so, ~85 by a take, and a take of a
    1-D array of that size is ~30% faster than its fancy index too (a `/tmp` micro-benchmark).
    Picking an org's heads at a basis of a read's own (`OrgHistory.heads_at`) gathers
    ten such arrays.
    """
    return values.take(idx, axis=0)


def _insert_rows(values: np.ndarray, at: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``np.insert(values, at, rows, axis=0)``: a 2-D array's rows are inserted as one value
    each, through a view of each row as one void value.

    Into a 2-D array at two places or more, `np.insert` writes through a boolean mask over
    the whole array: 3 head keys into 50k cost ~410 µs so, ~41 through the view.
    """
    if values.ndim == 1:
        return np.insert(values, at, rows)
    width = values.shape[1]
    row = np.dtype((np.void, values.dtype.itemsize * width))
    flat = np.insert(
        np.ascontiguousarray(values).view(row).ravel(), at, np.ascontiguousarray(rows, values.dtype).view(row).ravel()
    )
    return flat.view(values.dtype).reshape(-1, width)


def scope_rule_sql(level: str, b: str) -> str:
    """The scope rule for one level below the org, as the query spells it."""
    return f"(r.{level} IS NULL OR r.{level} = {b})"


def _dictionary(column: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Dictionary codes of a string column (null = -1) and its distinct values, code i the i-th."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    codes = np.where(encoded.is_null().to_numpy(zero_copy_only=False), -1, codes).astype(np.int32)
    return codes, encoded.dictionary


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, dict[str, int]]:
    """`_dictionary` with a value -> code map (a scope level's few distinct values)."""
    codes, values = _dictionary(column)
    return codes, {v: i for i, v in enumerate(values.to_pylist())}


@dataclass
class OrgHeads:
    """Every (slot, scope) head of one org at one basis cell, whether it is live, and how
    to pick one reader's visible rows out of them.

    Arrays are sorted by (slot, depth); ``order`` is each head's place in the output order
    (newest ``valid_from`` first, then ``known_since``, ``commit_version`` and position:
    the head key, `HEAD_KEY`). ``rows`` are positions in the kind's Arrow snapshot.
    """

    rows: np.ndarray
    lineage: np.ndarray
    lineage_codes: SortedCodes
    depth: np.ndarray
    live: np.ndarray
    key: np.ndarray  # (n, 3): valid_from, known_since, commit_version (µs, µs, version)
    levels: dict[str, tuple[np.ndarray, dict[str, int]]]
    slot_values: dict[str, pa.Array]
    nbytes: int = 0
    #: results served from this cell: readers' positions (numpy) and tables (`query.Visibility._from_heads`)
    memo: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False)
    memo_bytes: int = 0
    _by_subject: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _order: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def _assemble(cls, **parts: Any) -> OrgHeads:
        key = parts["key"]
        heads = cls(**parts)
        heads.nbytes = int(
            heads.rows.nbytes * 3
            + key.nbytes
            + heads.lineage_codes.nbytes
            + sum(v.nbytes for v in heads.slot_values.values())
            + sum(c.nbytes for c, _ in heads.levels.values())
        )
        return heads

    def _derived(self, *arrays: np.ndarray) -> None:
        """Count an index derived from these heads when first asked (order, subjects)."""
        self.nbytes += int(sum(a.nbytes for a in arrays))

    def advanced(self, new: pa.Table, kind: str) -> OrgHeads:
        """These heads with rows appended since taken in: the heads at a later basis, when
        nothing but those rows can have changed between the two (`query.Visibility._heads_at`
        checks that no other row's instant lies between the bases).

        *new* holds the appended rows that are candidates at the later basis (they pass
        its basis rules: see `query.appended_candidates`), with ``_row``, ``live``, the
        scope levels, the head key and the slot columns. A (slot, scope) head is the
        candidate with the greatest head key (`visibility_sql`'s QUALIFY), and the
        greatest key of a union is the greater of the parts' greatest: each new candidate
        replaces its (slot, scope)'s head if its key is greater, or becomes the head of a
        (slot, scope) that had none. Nothing else moves.
        """
        if not new.num_rows:
            return self
        n = len(self.rows)
        new_key = _key(new)
        new_rows = new.column("_row").to_numpy().astype(np.int64)
        new_live = new.column("live").to_numpy(zero_copy_only=False).astype(bool)
        new_levels = {level: new.column(level).to_pylist() for level in SCOPE_LEVELS}
        lineage_ids = new.column("lineage_id").to_pylist()
        # Per appended candidate, in order: the head it competes with (an old head, or an earlier
        # candidate of the same new (slot, scope)), or a new (slot, scope) of its own.
        replaced: dict[int, int] = {}  # an old head's index -> the candidate (index into *new*) now its head
        fresh: list[int] = []  # indices into *new* of (slot, scope)s that had no head, in order
        placed: dict[tuple[Any, ...], int] = {}  # (slot, scope) -> its head: an old index, or n + its place in *fresh*
        known = self.lineage_codes.get_many(lineage_ids)  # codes of the slots that have heads already
        for j, lineage_id in enumerate(lineage_ids):
            scope = tuple(new_levels[level][j] for level in SCOPE_LEVELS)
            group = (lineage_id, *scope)
            at = placed.get(group)
            if at is None:
                code = known.get(lineage_id)
                if code is not None:  # the slot's heads are one run of the (slot, depth) order
                    low, high = np.searchsorted(self.lineage, [code, code + 1]).tolist()
                    match = np.arange(low, high)
                    for level, value in zip(SCOPE_LEVELS, scope, strict=True):
                        codes, lookup = self.levels[level]
                        match = match[codes[match] == (-1 if value is None else lookup.get(value, -2))]
                    at = int(match[0]) if len(match) else None
            if at is None:  # a (slot, scope) with no head yet
                at = n + len(fresh)
                fresh.append(j)
            elif at >= n:  # a second candidate of a new (slot, scope): the greater key wins
                f = fresh[at - n]
                if (tuple(new_key[j]), new_rows[j]) > (tuple(new_key[f]), new_rows[f]):
                    fresh[at - n] = j
            else:
                r = replaced.get(at)
                held = (tuple(self.key[at]), self.rows[at]) if r is None else (tuple(new_key[r]), new_rows[r])
                if (tuple(new_key[j]), new_rows[j]) > held:
                    replaced[at] = j
            placed[group] = at
        if not fresh and not replaced:
            return self  # every candidate lost to its (slot, scope)'s head: nothing moves
        # The new arrays are the old ones with the fresh heads inserted in (slot, depth) order
        # (`np.insert`: one copy of each) and the replaced heads overwritten. Copies, not
        # gathers: a write's advance of an org's ~40k heads at 1M cost 4.0 ms gathering every
        # array by a source index (the Arrow slot values most), 2.4 ms this way (line-profiled).
        lineage_codes = self.lineage_codes
        rows, live, key, lineage, depth = self.rows, self.live, self.key, self.lineage, self.depth
        levels = dict(self.levels)
        picks = np.empty(0, dtype=np.int64)  # the fresh heads' candidates, in the order inserted
        places = np.empty(0, dtype=np.int64)  # where each is inserted among the old heads (ascending)
        moved = np.arange(n, dtype=np.int64)  # each old head's index now
        if fresh:
            unknown = [lid for lid in dict.fromkeys(lineage_ids[j] for j in fresh) if lid not in known]
            if unknown:  # the old heads share the codes: a new cell has its own
                lineage_codes = lineage_codes.with_added(unknown)
            new_codes = lineage_codes.get_many([lineage_ids[j] for j in fresh])
            fresh_lineage = np.fromiter((new_codes[lineage_ids[j]] for j in fresh), np.int32, len(fresh))
            scopes = {level: [new_levels[level][j] for j in fresh] for level in SCOPE_LEVELS}
            fresh_depth = _scope_depths(scopes)
            places, order = _insertion_places(lineage, depth, fresh_lineage, fresh_depth)
            picks = np.asarray(fresh, dtype=np.int64)[order]
            rows = np.insert(rows, places, new_rows[picks])
            live = np.insert(live, places, new_live[picks])
            key = _insert_rows(key, places, _rows_at(new_key, picks))
            lineage = np.insert(lineage, places, fresh_lineage[order])
            depth = np.insert(depth, places, fresh_depth[order])
            for level in SCOPE_LEVELS:
                codes, lookup = self.levels[level]
                more, lookup = _codes_of(lookup, scopes[level])
                levels[level] = (np.insert(codes, places, more[order]), lookup)
            shift = np.zeros(n + 1, dtype=np.int64)
            np.add.at(shift, places, 1)
            moved += np.cumsum(shift)[:n]  # after the fresh heads inserted before it
        fresh_at = places + np.arange(len(places))  # the fresh heads' indices now
        olds = np.fromiter(replaced, np.int64, len(replaced))
        replaced_at = moved[olds]
        if replaced:
            if not fresh:  # the old cell keeps its own arrays
                rows, live, key = rows.copy(), live.copy(), key.copy()
            winners = np.fromiter(replaced.values(), np.int64, len(replaced))
            rows[replaced_at], live[replaced_at], key[replaced_at] = (
                new_rows[winners],
                new_live[winners],
                new_key[winners],
            )
        # the slot values: the old ones in runs, each fresh or replacing head's from *new* between
        # (an insertion before an old head comes before that head's replacement)
        changes = sorted(
            [(int(p), 0, int(j)) for p, j in zip(places.tolist(), picks.tolist(), strict=True)]
            + [(at, 1, j) for at, j in replaced.items()],
            key=lambda change: change[:2],
        )

        def spliced(values: pa.Array, column: str) -> pa.Array:
            appended = new.column(column).combine_chunks().cast(values.type)
            pieces, cursor = [], 0
            for at, skips, j in changes:
                if at > cursor:
                    pieces.append(values.slice(cursor, at - cursor))
                pieces.append(appended.slice(j, 1))
                cursor = at + skips
            pieces.append(values.slice(cursor))
            return pa.concat_arrays(pieces)

        slot_values = {c: spliced(values, c) for c, values in self.slot_values.items()}
        heads = OrgHeads._assemble(
            rows=rows,
            lineage=lineage,
            lineage_codes=lineage_codes,
            depth=depth,
            live=live,
            key=key,
            levels=levels,
            slot_values=slot_values,
        )
        if self._by_subject is not None and kind in SUBJECT_IN_SLOT:
            # a replaced head keeps its slot, so its subject: move the old index, insert the new heads
            keys, held_at = self._by_subject
            if fresh:
                subjects = new.column("subject_key").to_pylist()
                added_keys = np.asarray([subjects[j] for j in picks.tolist()], dtype="S64")
                by_key = np.argsort(added_keys, kind="stable")
                where = np.searchsorted(keys, added_keys[by_key], "right")
                heads._by_subject = (
                    np.insert(keys, where, added_keys[by_key]),
                    np.insert(moved[held_at], where, fresh_at[by_key]),
                )
            else:
                heads._by_subject = (keys, held_at)
            heads._derived(*heads._by_subject)
        return heads

    def __len__(self) -> int:
        return len(self.rows)

    def with_slots(self, lineage_ids: Sequence[str], picked: OrgHeads) -> OrgHeads:
        """These heads with every head of the slots *lineage_ids* replaced by *picked*: the heads
        of those slots alone, picked anew at the same basis (`OrgHistory.heads_at` over their
        versions: `query.Visibility._repicked`).

        Why: a retraction can take a (slot, scope)'s head away, and the head before it comes
        back. `advanced` only adds candidates, so a cell could not follow a retraction, and
        the read after one picked every head of the org from its history again (~3-5 ms at
        100k, ~7 at 1M). The heads of the other slots do not depend on those slots' versions.
        *picked* is in its history's codes; the heads here keep theirs.
        """
        held = self.lineage_codes.get_many(list(lineage_ids))
        # each slot's heads are one run of the (slot, depth) order: the others are copied in runs
        runs = sorted(tuple(np.searchsorted(self.lineage, [code, code + 1]).tolist()) for code in held.values())
        cuts = [0, *(bound for run in runs for bound in run), len(self.rows)]
        kept = list(zip(cuts[::2], cuts[1::2], strict=True))

        def without(values: np.ndarray) -> np.ndarray:
            return np.concatenate([values[lo:hi] for lo, hi in kept]) if runs else values

        def arrow_without(values: pa.Array) -> pa.Array:
            return pa.concat_arrays([values.slice(lo, hi - lo) for lo, hi in kept]) if runs else values

        rows, live, key, lineage, depth = (
            without(a) for a in (self.rows, self.live, self.key, self.lineage, self.depth)
        )
        levels = {level: (without(codes), lookup) for level, (codes, lookup) in self.levels.items()}
        slot_values = {c: arrow_without(values) for c, values in self.slot_values.items()}
        lineage_codes = self.lineage_codes
        if len(picked.rows):  # the slots' new heads, in this cell's codes, inserted in (slot, depth) order
            m = len(rows)
            id_of = {code: lid for lid, code in picked.lineage_codes.get_many(list(lineage_ids)).items()}
            ids = [id_of[code] for code in picked.lineage.tolist()]
            unknown = [lid for lid in dict.fromkeys(ids) if lid not in held]
            if unknown:  # a slot with no head here before (its first version known only now)
                lineage_codes = lineage_codes.with_added(unknown)
            codes = lineage_codes.get_many(list(dict.fromkeys(ids)))
            lineage = np.concatenate([lineage, np.fromiter((codes[i] for i in ids), np.int32, len(ids))])
            depth = np.concatenate([depth, picked.depth])
            places, order = _insertions(lineage, depth, m)
            for level in SCOPE_LEVELS:
                picked_codes, picked_lookup = picked.levels[level]
                value_of = {code: value for value, code in picked_lookup.items()}
                values = [None if c == -1 else value_of[c] for c in picked_codes.tolist()]
                extended, lookup = _extended_codes(*levels[level], values)
                levels[level] = (_inserted(extended, m, places, order), lookup)
            rows, live, key = (
                np.concatenate([mine, theirs])
                for mine, theirs in ((rows, picked.rows), (live, picked.live), (key, picked.key))
            )
            rows, live, key, lineage, depth = (
                _inserted(a, m, places, order) for a in (rows, live, key, lineage, depth)
            )
            take = pa.array(_inserted(np.arange(m + len(picked.rows), dtype=np.int64), m, places, order), pa.int64())
            slot_values = {
                c: pa.concat_arrays([values, picked.slot_values[c].cast(values.type)]).take(take)
                for c, values in slot_values.items()
            }
        return OrgHeads._assemble(
            rows=rows,
            lineage=lineage,
            lineage_codes=lineage_codes,
            depth=depth,
            live=live,
            key=key,
            levels=levels,
            slot_values=slot_values,
        )

    @property
    def order(self) -> np.ndarray:
        """Each head's place in the output order: newest head key first, ties broken by the
        later position. Sorted when first asked (a read of one slot never asks: after a write
        the advanced cell's first read is often `get_fact`, and the sort of 5k heads was a
        sixth of it)."""
        if self._order is None:
            n = len(self.rows)
            key, rows = self.key, self.rows
            by_key = np.lexsort((-rows, -key[:, 2], -key[:, 1], -key[:, 0])) if n else np.empty(0, np.int64)
            order = np.empty(n, dtype=np.int64)
            order[by_key] = np.arange(n, dtype=np.int64)
            self._order = order
            self._derived(order)
        return self._order

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
        ordered: bool = True,
        slot: str | None = None,
    ) -> np.ndarray | None:
        """Indices (into these arrays) of what *scope*'s reader is served, in the query's order
        (with ``ordered=False``: the same set, in (slot, depth) order): per slot, the deepest
        live head among the scopes it sees; None when a filter cannot be applied after the
        head is chosen (see `_filtered`), and the query must run.

        *snapshot* is the kind's Arrow snapshot the positions point into (for subject keys).

        *slot*, when given, is the lineage id of every row of *subject_key* the read can be
        served, and every row of it is of that subject (a `get_fact`'s subject and attribute:
        `query._read_slot`): its heads are one run of the (slot, depth) order, found by a
        binary search. The subject index a cell builds on its first subject read
        (`_subject_rows`: ~1.3 ms for 5k heads at 100k, built anew for each cell picked from a
        history, as after every retraction) is then not needed. The filters still apply.
        """
        if subject_key is None and not filters:  # every head: the mask over the arrays, no gather through indices
            idx = np.flatnonzero(self._reader_mask(scope))
        else:
            if slot is not None:
                idx = self._slot_rows(slot)
            elif subject_key is not None:
                idx = self._subject_rows(subject_key, snapshot)
            else:
                idx = np.arange(len(self.rows))
            for col, value in (filters or {}).items():
                picked = self._filtered(idx, col, value)
                if picked is None:
                    return None
                idx = picked
            idx = idx[self._reader_mask(scope, idx)]
        if len(idx) > 1:  # sorted by (slot, depth): the last of each slot's run is the deepest
            lin = self.lineage[idx]
            idx = idx[np.append(lin[1:] != lin[:-1], True)]
            if ordered:
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
        if len(idx) <= SMALL_FILTER:
            return _filtered_small(idx, values.to_pylist(), value)
        return _filtered_arrow(idx, values, value)

    def _slot_rows(self, lineage_id: str) -> np.ndarray:
        """Indices of the heads of the slot *lineage_id*: a run of the (slot, depth) order."""
        code = self.lineage_codes.get(lineage_id)
        if code is None:
            return np.empty(0, dtype=np.int64)
        lo, hi = np.searchsorted(self.lineage, [code, code + 1])
        return np.arange(lo, hi, dtype=np.int64)

    def _subject_rows(self, key: str, snapshot: pa.Table) -> np.ndarray:
        if self._by_subject is None:
            column = take_rows(snapshot.select(["subject_key"]), self.rows).column(0)
            keys = np.asarray(column.to_numpy(zero_copy_only=False), dtype="S64")
            perm = np.argsort(keys, kind="stable")
            self._by_subject = (keys[perm], perm)
            self._derived(*self._by_subject)
        keys, perm = self._by_subject
        needle = np.asarray(key, dtype="S64")
        lo, hi = np.searchsorted(keys, needle, "left"), np.searchsorted(keys, needle, "right")
        return np.sort(perm[lo:hi])


#: What a missing instant (no ``valid_to``, ``expires_at`` or ``retracted_since``) reads as in
#: `OrgHistory`: later than every basis, so "after the basis" holds, as NULL does in the query.
NEVER = np.iinfo(np.int64).max


@dataclass
class OrgHistory:
    """Every version of one org's rows of a kind that can head a (slot, scope) at some basis,
    from which the heads at any basis are picked with numpy.

    The query's rules for the heads (`query.visibility_sql` without the reader: see the
    module's docstring) split once more, by whether they depend on the basis:

    * what holds at every basis — the org, the ledger's verdict and the status
      (`query.HEAD_RULES`), and being known at all — is asked once, by the history's query
      (`query.history_sql`), per org and state (`query.Visibility._state`);
    * what the basis decides — known by then (``known_since <= known_at``), not retracted
      by then (``retracted_since`` missing or later), begun by then (``valid_from <=
      valid_at``), the greatest head key (`HEAD_KEY`, then position) of each (slot, scope)
      among those, and whether that head has ended or expired by ``valid_at`` — is
      `heads_at`: the versions are sorted by (slot, scope, head key, position), so a (slot,
      scope)'s head is its last version that passes.

    An as-of read at a basis no cell covers ran the per-scope heads query (~14 ms at 100k
    tenants) and sorted its result (~3 ms) every time; from the history it costs one pass
    over the org's versions. tests/test_heads.py checks the heads picked here against the
    per-reader query at many bases.
    """

    rows: np.ndarray  # snapshot positions
    group: np.ndarray  # each version's (slot, scope): runs, in (slot, depth) order
    lineage: np.ndarray
    lineage_codes: SortedCodes
    depth: np.ndarray
    key: np.ndarray  # (n, 3): valid_from, known_since, commit_version (µs, µs, version)
    retracted: np.ndarray  # retracted_since (µs), NEVER when no retraction is known
    ends: np.ndarray  # valid_to (µs), NEVER when open
    expires: np.ndarray  # expires_at (µs), NEVER when it does not expire
    levels: dict[str, tuple[np.ndarray, dict[str, int]]]
    slot_values: dict[str, pa.Array]
    nbytes: int = 0

    @classmethod
    def of(cls, versions: pa.Table, kind: str) -> OrgHistory:
        """From `query.history_sql`'s result, in any order (`_sorted`)."""
        lineage, lineage_values = _dictionary(versions.column("lineage_id"))
        return cls._sorted(
            rows=versions.column("_row").to_numpy().astype(np.int64),
            lineage=lineage,
            lineage_codes=SortedCodes.of(lineage_values),
            depth=versions.column("scope_depth").to_numpy().astype(np.int8),
            key=_key(versions),
            retracted=_instants_or_never(versions.column("retracted_since")),
            ends=_instants_or_never(versions.column("valid_to")),
            expires=_instants_or_never(versions.column("expires_at")),
            levels={level: _codes(versions.column(level)) for level in SCOPE_LEVELS},
            slot_values={c: versions.column(c).combine_chunks() for c in sorted(SLOT_COLUMNS.get(kind, ()))},
        )

    def advanced(self, new: pa.Table) -> OrgHistory:
        """This history with the org's versions appended since taken in: *new* holds those that
        pass the rules every basis shares (`query.history_candidates`), with ``_row``, the
        scope levels, the head key, ``valid_to``, ``expires_at`` and the slot columns. What
        the appended retractions retract is taken in after (`retracting`).

        The older versions and what they hold are as they were; a version's place is its
        (slot, scope, head key, position), so the union sorted is the history of the later
        state. An org's history read again after each write cost a query (~5 ms at 100k, ~55
        at 1M), and after a retraction ~15 ms at 100k.
        """
        if not new.num_rows:
            return self
        lineage_ids = new.column("lineage_id").to_pylist()
        lineage_codes = self.lineage_codes
        known = lineage_codes.get_many(lineage_ids)
        unknown = [lid for lid in dict.fromkeys(lineage_ids) if lid not in known]
        if unknown:
            lineage_codes = lineage_codes.with_added(unknown)
            known = lineage_codes.get_many(lineage_ids)
        values = {level: new.column(level).to_pylist() for level in SCOPE_LEVELS}
        rows = np.concatenate([self.rows, new.column("_row").to_numpy().astype(np.int64)])
        return OrgHistory._sorted(
            in_order=len(self.rows),
            rows=rows,
            lineage=np.concatenate([self.lineage, np.fromiter((known[lid] for lid in lineage_ids), np.int32)]),
            lineage_codes=lineage_codes,
            depth=np.concatenate([self.depth, _scope_depths(values)]),
            key=np.concatenate([self.key, _key(new)]),
            retracted=np.concatenate([self.retracted, np.full(new.num_rows, NEVER, dtype=np.int64)]),
            ends=np.concatenate([self.ends, _instants_or_never(new.column("valid_to"))]),
            expires=np.concatenate([self.expires, _instants_or_never(new.column("expires_at"))]),
            levels={level: _extended_codes(*self.levels[level], values[level]) for level in SCOPE_LEVELS},
            slot_values={
                c: pa.concat_arrays([held, new.column(c).combine_chunks().cast(held.type)])
                for c, held in self.slot_values.items()
            },
        )

    @classmethod
    def empty(cls, kind: str) -> OrgHistory:
        """The history of an org with no rows of *kind*: what its first rows advance (`advanced`)."""
        none = np.empty(0, dtype=np.int64)
        return cls._sorted(
            rows=none,
            lineage=np.empty(0, dtype=np.int32),
            lineage_codes=SortedCodes.of([]),
            depth=np.empty(0, dtype=np.int8),
            key=np.empty((0, len(HEAD_KEY)), dtype=np.int64),
            retracted=none,
            ends=none,
            expires=none,
            levels={level: (np.empty(0, dtype=np.int32), {}) for level in SCOPE_LEVELS},
            slot_values={c: pa.array([], pa.string()) for c in sorted(SLOT_COLUMNS.get(kind, ()))},
        )

    def retracting(self, retracted: Mapping[int, int]) -> OrgHistory:
        """This history with the versions at the positions *retracted* retracted from the
        instants given (µs: when the earliest retraction of each became known,
        `query.Visibility._retracted_by`), where those are earlier than the ones held: the
        earlier of the two, as the mirror's ``UPDATE`` (`query.retractions_sql`)."""
        return replace(self, retracted=_retracted(self.rows, self.retracted, retracted)) if retracted else self

    def slot_versions(self, lineage_ids: Sequence[str]) -> np.ndarray:
        """Indices of the versions of the slots *lineage_ids*: runs of the sort's first key."""
        codes = sorted(set(self.lineage_codes.get_many(list(lineage_ids)).values()))
        if not codes:
            return np.empty(0, dtype=np.int64)
        bounds = np.searchsorted(self.lineage, np.asarray([(c, c + 1) for c in codes]).ravel()).reshape(-1, 2)
        return np.concatenate([np.arange(lo, hi, dtype=np.int64) for lo, hi in bounds])

    def subset(self, versions: np.ndarray) -> OrgHistory:
        """The history of the versions at *versions* alone (indices, ascending, of whole slots:
        `slot_versions`), sorted as this one is: what `heads_at` picks of those slots, at a
        fraction of the org's cost."""
        take = pa.array(versions, pa.int64())
        return OrgHistory(
            rows=self.rows[versions],
            group=self.group[versions],
            lineage=self.lineage[versions],
            lineage_codes=self.lineage_codes,
            depth=self.depth[versions],
            key=_rows_at(self.key, versions),
            retracted=self.retracted[versions],
            ends=self.ends[versions],
            expires=self.expires[versions],
            levels={level: (codes[versions], lookup) for level, (codes, lookup) in self.levels.items()},
            slot_values={c: values.take(take) for c, values in self.slot_values.items()},
        )

    @classmethod
    def _sorted(
        cls,
        *,
        rows: np.ndarray,
        lineage: np.ndarray,
        lineage_codes: SortedCodes,
        depth: np.ndarray,
        key: np.ndarray,
        retracted: np.ndarray,
        ends: np.ndarray,
        expires: np.ndarray,
        levels: dict[str, tuple[np.ndarray, dict[str, int]]],
        slot_values: dict[str, pa.Array],
        in_order: int = 0,
    ) -> OrgHistory:
        """The versions (parallel arrays, in any order but that the first *in_order* are sorted
        already) sorted by (slot code, scope, head key, position), so each (slot, scope)'s
        versions are one run in (slot, depth) order, as `OrgHeads` keeps its heads. DuckDB's
        ORDER BY of the lineage ids was half of an org's history query at 1M (30 of 60 ms);
        this sort of the codes costs a few (`_version_order`)."""
        order = _version_order(
            [
                lineage,
                depth,
                *(levels[level][0] for level in SCOPE_LEVELS),
                *(key[:, i] for i in range(key.shape[1])),
                rows,
            ],
            in_order,
        )
        lineage, depth = lineage[order], depth[order]
        levels = {level: (codes[order], lookup) for level, (codes, lookup) in levels.items()}
        starts = np.zeros(len(order), dtype=bool)  # where a (slot, scope)'s run begins
        starts[:1] = True
        for codes in (lineage, depth, *(c for c, _ in levels.values())):
            starts[1:] |= codes[1:] != codes[:-1]
        take = pa.array(order, pa.int64())
        history = cls(
            rows=rows[order],
            group=np.cumsum(starts, dtype=np.int64),
            lineage=lineage,
            lineage_codes=lineage_codes,
            depth=depth,
            key=_rows_at(key, order),
            retracted=retracted[order],
            ends=ends[order],
            expires=expires[order],
            levels=levels,
            slot_values={c: values.take(take) for c, values in slot_values.items()},
        )
        history.nbytes = int(
            sum(a.nbytes for a in (history.rows, history.group, lineage, depth, history.key))
            + sum(a.nbytes for a in (history.retracted, history.ends, history.expires))
            + lineage_codes.nbytes
            + sum(c.nbytes for c, _ in levels.values())
            + sum(v.nbytes for v in history.slot_values.values())
        )
        return history

    def heads_at(self, known_at: int, valid_at: int) -> OrgHeads:
        """The (slot, scope) heads at the basis (µs since the epoch on each clock), each with
        whether it is live, as the query picks them."""
        key = self.key
        passes = (key[:, 1] <= known_at) & (self.retracted > known_at) & (key[:, 0] <= valid_at)
        idx = np.flatnonzero(passes)
        if len(idx) > 1:  # the last that passes of each (slot, scope)'s run holds its greatest key
            group = _rows_at(self.group, idx)
            idx = idx[np.append(group[1:] != group[:-1], True)]
        take = pa.array(idx, pa.int64())
        return OrgHeads._assemble(
            rows=_rows_at(self.rows, idx),
            lineage=_rows_at(self.lineage, idx),
            lineage_codes=self.lineage_codes,
            depth=_rows_at(self.depth, idx),
            live=(_rows_at(self.ends, idx) > valid_at) & (_rows_at(self.expires, idx) > valid_at),
            key=_rows_at(key, idx),
            levels={level: (_rows_at(codes, idx), lookup) for level, (codes, lookup) in self.levels.items()},
            slot_values={c: values.take(take) for c, values in self.slot_values.items()},
        )


#: Up to this many versions appended to a sorted history, `_version_order` places each by a
#: search instead of sorting them all again.
INSERTED_VERSIONS = 32


def _version_order(keys: Sequence[np.ndarray], in_order: int = 0) -> np.ndarray:
    """The permutation that sorts rows by *keys*, the most significant first (as
    ``np.lexsort(keys[::-1])``; the last key is unique), given that the first *in_order* rows
    are sorted already.

    An advance appends a few versions to a history of an org's 50k versions at 1M, and
    sorting them all again by nine keys cost ~8 ms of the read after a retraction. Up to
    `INSERTED_VERSIONS` appended, each is placed among the sorted ones instead: a binary
    search for its run of the first key, then a count of the run's rows ordered before it
    (the run is sorted, so those are its first ones). tests/test_heads.py checks this
    against the sort.
    """
    appended = len(keys[0]) - in_order
    if not in_order or appended > INSERTED_VERSIONS:
        return np.lexsort(keys[::-1])
    new = in_order + np.lexsort([k[in_order:] for k in keys[::-1]])  # the appended, in order among themselves
    first = keys[0][:in_order]
    places = np.empty(appended, dtype=np.int64)
    for i, j in enumerate(new.tolist()):
        lo, hi = int(np.searchsorted(first, keys[0][j], "left")), int(np.searchsorted(first, keys[0][j], "right"))
        before = np.zeros(hi - lo, dtype=bool)
        tied = np.ones(hi - lo, dtype=bool)
        for k in keys[1:]:
            run = k[lo:hi]
            before |= tied & (run < k[j])
            tied &= run == k[j]
        places[i] = lo + int(before.sum())
    return np.insert(np.arange(in_order, dtype=np.int64), places, new)


def _scope_depths(levels: Mapping[str, Sequence[str | None]]) -> np.ndarray:
    """Each row's scope depth from its scope levels below the org (`SCOPE_LEVELS`, null =
    None), as `query.scope_depth_sql` computes it: 4 with an actor, 3 with a team, 2 with a
    division, 1 at the org's scope."""
    return np.fromiter(
        (
            4 if actor is not None else 3 if team is not None else 2 if division is not None else 1
            for division, team, actor in zip(levels["division"], levels["team"], levels["actor"], strict=True)
        ),
        np.int8,
    )


def _extended_codes(
    codes: np.ndarray, lookup: dict[str, int], values: list[str | None]
) -> tuple[np.ndarray, dict[str, int]]:
    """A scope level's *codes* with those of *values* appended (null = -1), and its value ->
    code map with the values it did not hold added as ``len(lookup)``, ``len(lookup) + 1``, ...
    (a copy: the older cell or history keeps its own).

    The codes are numbered from the map's size before any is added. Numbered while the map
    grew, two new values took n and n + 2, and the next new value n + 2 again: two scopes
    with one code, so a reader of one saw the other's rows.
    """
    more, lookup = _codes_of(lookup, values)
    return np.concatenate([codes, more]), lookup


def _codes_of(lookup: dict[str, int], values: Sequence[str | None]) -> tuple[np.ndarray, dict[str, int]]:
    """The codes of *values* (null = -1), and *lookup* with those it did not hold added as
    `_extended_codes` numbers them (a copy when it adds any)."""
    missing = [v for v in dict.fromkeys(values) if v is not None and v not in lookup]
    if missing:
        start = len(lookup)
        lookup = {**lookup, **{v: start + m for m, v in enumerate(missing)}}
    more = np.fromiter((-1 if v is None else lookup[v] for v in values), np.int32, len(values))
    return more, lookup


def _retracted(rows: np.ndarray, since: np.ndarray, retracted: Mapping[int, int] | None) -> np.ndarray:
    """Each version's ``retracted_since`` (*since*, aligned with the positions *rows*) with
    the *retracted* positions' new instants taken in: the earlier of the two (a copy)."""
    if not retracted:
        return since
    targets = np.fromiter(retracted, np.int64, len(retracted))
    at = np.fromiter(retracted.values(), np.int64, len(retracted))
    order = np.argsort(targets)
    targets, at = targets[order], at[order]
    hit = np.flatnonzero(np.isin(rows, targets))
    out = since.copy()
    out[hit] = np.minimum(out[hit], at[np.searchsorted(targets, rows[hit])])
    return out


def _instants_or_never(column: pa.ChunkedArray) -> np.ndarray:
    """A timestamp column as µs since the epoch, `NEVER` where it is missing."""
    micros = pc.fill_null(column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()), NEVER)
    return np.asarray(micros.to_numpy(), dtype=np.int64)


def _with_inserted(lineage: np.ndarray, depth: np.ndarray, n: int) -> np.ndarray:
    """``np.lexsort((depth, lineage))`` when the first *n* heads are sorted already and the
    rest are a few appended: each goes after the equal keys before it, as the stable sort
    puts it, without sorting the 5k heads again after every write."""
    return _inserted(np.arange(len(lineage), dtype=np.int64), n, *_insertions(lineage, depth, n))


def _insertions(lineage: np.ndarray, depth: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Where `_with_inserted` puts the appended heads: their places among the first *n*, and
    the appended heads in that order (indices from *n*)."""
    return _insertion_places(lineage[:n], depth[:n], lineage[n:], depth[n:])


def _insertion_places(
    lineage: np.ndarray, depth: np.ndarray, more_lineage: np.ndarray, more_depth: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Where heads (*more_lineage*, *more_depth*) go among heads in (lineage, depth) order, each
    after the equal keys (a stable sort's place): their places, ascending, and the order of
    *more* they are inserted in.

    Searched in each one's slot run of *lineage* (sorted), then by depth in it: the old
    heads' keys are never all computed (an org's 40k heads at 1M, on every write).
    """
    key = more_lineage.astype(np.int64) * 256 + more_depth  # depth < 256: (lineage, depth) order
    order = np.argsort(key, kind="stable")
    codes, depths = more_lineage[order], more_depth[order]
    low = np.searchsorted(lineage, codes, side="left")
    high = np.searchsorted(lineage, codes, side="right")
    places = [
        lo + int(np.searchsorted(depth[lo:hi], d, side="right"))
        for lo, hi, d in zip(low.tolist(), high.tolist(), depths.tolist(), strict=True)
    ]
    return np.asarray(places, dtype=np.int64), order


def _inserted(values: np.ndarray, n: int, at: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``values[_with_inserted(...)]``: the first *n* rows with the appended ones inserted at
    *at*. Copies runs instead of gathering every row (an advance's seven arrays of 50k heads
    at 1M: the (n, 3) head key alone cost ~0.6 ms gathered, ~0.04 inserted)."""
    return _insert_rows(values[:n], at, _rows_at(values[n:], new))


#: Up to this many heads, `OrgHeads._filtered` compares in Python: a subject's heads (a
#: `get_fact`) are a handful, and the vectorised form costs ten Arrow kernels (~0.15 ms).
SMALL_FILTER = 64


def _filtered_small(idx: np.ndarray, values: list[str | None], value: str) -> np.ndarray | None:
    """`OrgHeads._filtered` over a few values: the same answer (tests/test_heads.py checks)."""
    folded = value.casefold()
    hit = []
    for i, v in zip(idx.tolist(), values, strict=True):
        if v == value:
            hit.append(i)
        elif v is not None and v.casefold() == folded:
            return None  # spelled otherwise but the same slot: the query decides
    return np.asarray(hit, dtype=idx.dtype)


def _filtered_arrow(idx: np.ndarray, values: pa.Array, value: str) -> np.ndarray | None:
    """`OrgHeads._filtered` over many values, in Arrow kernels."""
    # typed scalars: with a bare str pyarrow infers a type, and tries to import dateutil, every call
    hit = pc.fill_null(pc.equal(values, pa.scalar(value, pa.string())), _FALSE)
    hit = hit.to_numpy(zero_copy_only=False).astype(bool)
    folded = value.casefold()
    if value.isascii():  # an ASCII value folds to what a value folds to only if it lower-cases to it or is not ASCII
        suspects = pc.or_(
            pc.invert(pc.string_is_ascii(values)),
            pc.equal(pc.utf8_lower(values), pa.scalar(value.lower(), pa.string())),
        )
        suspects = pc.fill_null(suspects, _FALSE).to_numpy(zero_copy_only=False).astype(bool) & ~hit
    else:  # "straße" folds to "strasse": any other value may fold to it
        suspects = ~hit
    if suspects.any() and any(
        v is not None and v.casefold() == folded for v in values.filter(pa.array(suspects)).to_pylist()
    ):
        return None
    return np.asarray(idx[hit])
