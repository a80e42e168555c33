"""A recall's visible set as snapshot positions, and the org's map from positions to its
index labels and BM25 documents.

The visibility query answers in positions of each kind's Arrow snapshot (through the
org's slot heads, `heads.OrgHeads`), and the index partition and the BM25 model are
derived from the same rows. Recall used to turn every visible row into its record id (a
take from the snapshot, then a dict of every id: ~1,400 for a new actor of a 5k-row org)
and map the ids back to index labels one dict lookup at a time. `OrgRows` keeps, per
kind, the positions of the org's rows the index may hold (`indexable_mask`) with each
row's partition label and BM25 document, so `Candidates` turns a visible set into label
and document masks with a few numpy operations, and record ids are read only for the
rows that reach the ranked pool.

What may be visible is still decided by the visibility query alone: these maps only
translate its answer, and a visible row the maps cannot place (not yet indexed, newer
than the BM25 model, or of a kind the index does not hold) is handed back as "outside"
for the caller's exact paths, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .lake import Lake, take_rows

_NONE = np.empty(0, dtype=np.int64)
_NONE_CODES = np.empty(0, dtype=np.int16)


def indexable_mask(rows: pa.Table, org: str) -> pa.ChunkedArray:
    """The rows of *org* the index and BM25 hold: active and known to the store (a row of
    an incomplete transaction is not, until it completes)."""
    return pc.and_(
        pc.and_(pc.equal(rows.column("org"), org), pc.equal(rows.column("status"), "active")),
        pc.is_valid(rows.column("known_since")),
    )


class IdCodes(Protocol):
    """Record id -> code (a partition's labels, `index.Partition`; a BM25 model's documents,
    `codes.CodeTable`), asked about many ids at once."""

    def __len__(self) -> int: ...

    def find(self, values: Sequence[str] | pa.Array) -> np.ndarray:
        """The code of each of *values*, -1 where none."""
        ...


@dataclass
class _KindRows:
    """One kind's indexable rows of the org: snapshot positions (ascending) and, aligned,
    partition labels and BM25 documents (-1: not held).

    Their record ids are read from the snapshot when the labels or documents are mapped
    again (a rebuilt partition or BM25 model), not kept: a list of every row's id held
    ~85 bytes a row (8.3 MB on the 100k tenants store, by tracemalloc) beside the index's
    and the model's own."""

    epoch: int
    seen: int = 0  # rows of the snapshot looked at
    positions: np.ndarray = field(default_factory=lambda: _NONE)
    labels: np.ndarray = field(default_factory=lambda: _NONE)
    docs: np.ndarray = field(default_factory=lambda: _NONE)


class PositionHints:
    """Snapshot position -> where an org's `_KindRows` arrays hold that row, per kind: one
    array for every org (a position is one org's row), 4 bytes a row of the kind's snapshot.

    `RowsView.locate` finds a visible row in its org's arrays here, not by a binary search
    of each position: at 1M (50,000 rows an org) the search of a new actor's 12-14,000 visible
    positions cost ~0.17 ms a recall (the whole locate stage 0.27 -> 0.16 ms with the hints). Only a hint: an entry counts where the org's arrays
    hold that position at that index, and every other position is searched as before, so
    an entry left by another org, another epoch or a dropped map never changes an answer.
    Written under the retriever's lock (`OrgRows.catch_up`); a reader may hold an older
    array, or see an entry being written: either is checked before it counts.
    """

    def __init__(self) -> None:
        self._arrays: dict[str, tuple[int, np.ndarray]] = {}  # kind -> (epoch, hints)

    def note(self, kind: str, epoch: int, positions: np.ndarray, indices: np.ndarray, rows: int) -> None:
        """Rows at *positions* of *kind*'s snapshot (epoch *epoch*, *rows* rows) sit at *indices* of their org's arrays."""
        held = self._arrays.get(kind)
        if held is None or held[0] < epoch:
            held = (epoch, np.full(rows + rows // 8, -1, dtype=np.int32))
        elif held[0] > epoch:
            return  # a map behind the newest epoch: its rows are found by search until it catches up
        hints = held[1]
        if rows > len(hints):  # a new array: a reader may hold the old one
            grown = np.full(rows + rows // 8, -1, dtype=np.int32)
            grown[: len(hints)] = hints
            hints = grown
        hints[positions] = indices
        self._arrays[kind] = (epoch, hints)

    def of(self, kind: str) -> np.ndarray | None:
        held = self._arrays.get(kind)
        return None if held is None else held[1]


class OrgRows:
    """Positions of an org's indexable rows, with their partition labels and BM25 documents.

    Kept in step by `catch_up`: a snapshot that grew adds its tail's rows (positions do
    not move within an epoch); a new epoch (compaction, purge) reads the kind again; a
    replaced partition or BM25 model maps every row again; a partition that grew maps the
    rows it did not hold. ``by_label`` / ``by_doc`` go back from a label or a document
    to (kind, position).
    """

    def __init__(self, kinds: Sequence[str], hints: PositionHints | None = None) -> None:
        self.kinds = tuple(kinds)
        self._hints = hints if hints is not None else PositionHints()
        self._rows: dict[str, _KindRows] = {}
        self._partition: object | None = None
        self._partition_size = -1
        self._bm25: object | None = None
        self.by_label: tuple[np.ndarray, np.ndarray] = (_NONE, _NONE)  # label -> (kind code, position)
        self.by_doc: tuple[np.ndarray, np.ndarray] = (_NONE, _NONE)  # document -> (kind code, position)

    def catch_up(
        self,
        lake: Lake,
        appended: Callable[[str, int, tuple[int, pa.Table]], pa.Table],
        partition: object | None,
        labels_of: IdCodes,
        bm25: object | None,
        docs_of: IdCodes,
    ) -> None:
        """Bring the map in step with the snapshots, *partition* (its id -> label map is
        *labels_of*) and the BM25 model *bm25* (*docs_of*: id -> document).

        *appended(kind, start, snapshot)* gives the org's indexable rows (`indexable_mask`) of
        *kind* from position *start* of *snapshot* (epoch, rows: `Lake.snapshot`) on: their
        positions (``_row``) and ``record_id``."""
        remap_labels = partition is not self._partition
        remap_docs = bm25 is not self._bm25
        grown = not remap_labels and len(labels_of) != self._partition_size
        # what changed, per kind code: the indices (into its arrays) of rows appended or newly
        # labelled; None once anything forces the reverse maps to be built whole
        touched: dict[int, list[np.ndarray]] | None = {} if not (remap_labels or remap_docs) else None
        for code, kind in enumerate(self.kinds):
            epoch, snapshot = lake.snapshot(kind)  # together: a write in another thread may append meanwhile
            rows = self._rows.get(kind)
            if rows is None or rows.epoch != epoch:
                if rows is not None:
                    touched = None  # rows may have left (a rewrite): entries of the old epoch must go
                rows = self._rows[kind] = _KindRows(epoch)
            held = len(rows.positions)  # rows mapped before this call: the ones a new map must map again
            if snapshot.num_rows > rows.seen:
                tail = appended(kind, rows.seen, (epoch, snapshot))
                picked = tail.column("_row").to_numpy()
                ids = tail.column("record_id").combine_chunks()
                rows.positions = np.concatenate([rows.positions, picked.astype(np.int64)])
                rows.labels = np.concatenate([rows.labels, labels_of.find(ids)])
                rows.docs = np.concatenate([rows.docs, docs_of.find(ids)])
                rows.seen = snapshot.num_rows
                self._hints.note(kind, epoch, picked, np.arange(held, len(rows.positions)), snapshot.num_rows)
                if touched is not None:
                    touched.setdefault(code, []).append(np.arange(held, len(rows.positions)))
            older = _ids_at(snapshot, rows.positions[:held]) if remap_labels or remap_docs else _NO_IDS
            if remap_labels:
                rows.labels = np.concatenate([labels_of.find(older), rows.labels[held:]])
            elif grown:
                missing = np.flatnonzero(rows.labels < 0)
                if len(missing):
                    rows.labels[missing] = labels_of.find(_ids_at(snapshot, rows.positions[missing]))
                    if touched is not None:
                        touched.setdefault(code, []).append(missing)
            if remap_docs:
                rows.docs = np.concatenate([docs_of.find(older), rows.docs[held:]])
        self._partition, self._partition_size, self._bm25 = partition, len(labels_of), bm25
        if touched is None:
            self.by_label = self._reverse(len(labels_of), "labels")
            self.by_doc = self._reverse(len(docs_of), "docs")
        elif touched:
            # only rows appended or newly labelled: the reverse maps take those entries (building
            # both whole made every org's first recall after any write pay ~0.13 ms at 100k, and
            # more as the org grows: catch_up 0.44 -> 0.31 ms)
            self.by_label = self._reversed_into(self.by_label, len(labels_of), "labels", touched)
            self.by_doc = self._reversed_into(self.by_doc, len(docs_of), "docs", touched)

    def _reverse(self, size: int, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Label (or document) -> (kind code, position), built from every kind's rows."""
        return self._reversed_into(
            (_NONE_CODES, _NONE),
            size,
            name,
            {
                code: [np.arange(len(self._rows[kind].positions))]
                for code, kind in enumerate(self.kinds)
                if kind in self._rows
            },
        )

    def _reversed_into(
        self, maps: tuple[np.ndarray, np.ndarray], size: int, name: str, touched: Mapping[int, list[np.ndarray]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """*maps* grown to *size* (new entries -1), with the entries of the *touched* rows (per
        kind code, indices into its arrays) set. New arrays: a reader may hold the old ones."""
        kind_of = np.full(size, -1, dtype=np.int16)
        position_of = np.full(size, -1, dtype=np.int64)
        kept = min(size, len(maps[0]))
        kind_of[:kept], position_of[:kept] = maps[0][:kept], maps[1][:kept]
        for code, parts in touched.items():
            rows = self._rows[self.kinds[code]]
            at = np.concatenate(parts)
            targets: np.ndarray = getattr(rows, name)[at]
            held = targets >= 0
            kind_of[targets[held]] = code
            position_of[targets[held]] = rows.positions[at][held]
        return kind_of, position_of

    def view(self) -> RowsView:
        """The map as it stands: what one recall reads, while a write's catch-up in another
        thread may move this one on (a new BM25 model numbers its documents afresh)."""
        hints = {kind: self._hints.of(kind) for kind in self._rows}
        return RowsView(
            self.kinds,
            {kind: (rows.positions, rows.labels, rows.docs) for kind, rows in self._rows.items()},
            self.by_label,
            self.by_doc,
            {kind: at for kind, at in hints.items() if at is not None},
        )

    def locate(self, kind: str, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Partition labels and BM25 documents of *kind*'s rows at *positions* (-1 where not held)."""
        return self.view().locate(kind, positions)


@dataclass(frozen=True)
class RowsView:
    """`OrgRows` at one moment (`OrgRows.view`)."""

    kinds: tuple[str, ...]
    rows: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # kind -> positions, labels, documents
    by_label: tuple[np.ndarray, np.ndarray]  # label -> (kind code, position)
    by_doc: tuple[np.ndarray, np.ndarray]  # document -> (kind code, position)
    hints: Mapping[str, np.ndarray] = field(default_factory=dict)  # kind -> `PositionHints` array

    def locate(self, kind: str, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Partition labels and BM25 documents of *kind*'s rows at *positions* (-1 where not held).

        The rule: a row is held where the org's positions (ascending) hold its position, and
        its label and document are at that index. The `PositionHints` entry of a position is
        taken where the positions hold it there; the others are searched for.
        """
        held, labels, docs = self.rows.get(kind, (_NONE, _NONE, _NONE))
        if not len(held) or not len(positions):
            missing = np.full(len(positions), -1, dtype=np.int64)
            return missing, missing.copy()
        last = len(held) - 1
        hints = self.hints.get(kind)
        if hints is not None and len(hints):
            at = np.minimum(hints.take(positions, mode="clip").astype(np.int64), last)
            found = (positions < len(hints)) & (at >= 0) & (held[at] == positions)
            unsure = np.flatnonzero(~found)
            if len(unsure):
                near = np.minimum(np.searchsorted(held, positions[unsure]), last)
                at[unsure] = near
                found[unsure] = held[near] == positions[unsure]
        else:
            at = np.minimum(np.searchsorted(held, positions), last)
            found = held[at] == positions
        return np.where(found, labels[at], -1), np.where(found, docs[at], -1)

    def at_labels(self, labels: np.ndarray) -> list[tuple[str, int]]:
        """(kind, position) of the rows at partition *labels* (each one mapped): `by_label` as
        Python values, converted once for them all (per label, numpy's scalar indexing cost a
        recall's vector list ~1 µs a row)."""
        return self._at(self.by_label, labels)

    def at_docs(self, docs: np.ndarray) -> list[tuple[str, int]]:
        """(kind, position) of the rows at BM25 documents *docs* (each one mapped), as `at_labels`."""
        return self._at(self.by_doc, docs)

    def _at(self, back: tuple[np.ndarray, np.ndarray], at: np.ndarray) -> list[tuple[str, int]]:
        kind_of, position_of = back
        kinds, codes, positions = self.kinds, kind_of[at].tolist(), position_of[at].tolist()
        return [(kinds[code], position) for code, position in zip(codes, positions, strict=True)]

    def locate_each(self, placed: Sequence[tuple[str, int] | None]) -> tuple[np.ndarray, np.ndarray]:
        """`locate` of rows given one by one as (kind, position) (None: not visible), in their
        order: a recall's pool, whose rows came from several lists and kinds."""
        labels = np.full(len(placed), -1, dtype=np.int64)
        docs = labels.copy()
        by_kind: dict[str, tuple[list[int], list[int]]] = {}  # kind -> (indices into placed, positions)
        for i, where in enumerate(placed):
            if where is not None:
                at, positions = by_kind.setdefault(where[0], ([], []))
                at.append(i)
                positions.append(where[1])
        for kind, (at, positions) in by_kind.items():
            labels[at], docs[at] = self.locate(kind, np.array(positions, dtype=np.int64))
        return labels, docs


class Candidates(Mapping[str, tuple[str, int]]):
    """The visible rows of one recall, per kind as snapshot positions: a mapping record id ->
    (kind, position) whose ids are read only where asked.

    Ranking registers the rows that reach its pool (`place`); looking up any other id,
    iterating or testing membership reads every visible row's id from the snapshot once
    (the rare paths: fewer than k rows ranked, rows no map places).
    """

    def __init__(self, lake: Lake, positions: Mapping[str, np.ndarray]) -> None:
        self._lake = lake
        self.positions = {kind: np.asarray(p, dtype=np.int64) for kind, p in positions.items() if len(p)}
        self._size = sum(len(p) for p in self.positions.values())
        self._placed: dict[str, tuple[str, int]] = {}
        self._all: dict[str, tuple[str, int]] | None = None

    def place(self, record_id: str, kind: str, position: int) -> None:
        self._placed[record_id] = (kind, int(position))

    def place_each(self, record_ids: Sequence[str], where: Sequence[tuple[str, int]]) -> None:
        """`place` of each of *record_ids* at its (kind, position) in *where*."""
        self._placed.update(zip(record_ids, where, strict=True))

    def ids(self, kind: str, positions: np.ndarray) -> list[str]:
        """Record ids of *kind*'s rows at *positions*, taken from the snapshot (and placed)."""
        if not len(positions):
            return []
        taken = take_rows(self._lake.all_rows(kind).select(["record_id"]), positions).column(0).to_pylist()
        for rid, pos in zip(taken, positions.tolist(), strict=True):
            self._placed[rid] = (kind, pos)
        return list(taken)

    def _every(self) -> dict[str, tuple[str, int]]:
        if self._all is None:
            every: dict[str, tuple[str, int]] = {}
            for kind, positions in self.positions.items():
                for rid, pos in zip(self.ids(kind, positions), positions.tolist(), strict=True):
                    every[rid] = (kind, pos)
            self._all = every
        return self._all

    def where(self, record_ids: Sequence[str]) -> list[tuple[str, int] | None]:
        """(kind, position) of each of *record_ids*, None where not visible: a recall's pool,
        whose rows are placed, without a lookup through the mapping's methods for each."""
        placed = self._placed
        out = [placed.get(rid) for rid in record_ids]
        if any(w is None for w in out):
            every = self._every()
            out = [every.get(rid) if w is None else w for rid, w in zip(record_ids, out, strict=True)]
        return out

    def __getitem__(self, record_id: str) -> tuple[str, int]:
        placed = self._placed.get(record_id)
        return placed if placed is not None else self._every()[record_id]

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._placed or record_id in self._every()

    def __iter__(self) -> Iterator[str]:
        return iter(self._every())

    def __len__(self) -> int:
        return self._size


_NO_IDS = pa.array([], pa.string())


def _ids_at(snapshot: pa.Table, positions: np.ndarray) -> pa.Array:
    """Record ids of the snapshot's rows at *positions*."""
    if not len(positions):
        return _NO_IDS
    return take_rows(snapshot.select(["record_id"]), positions).column(0).combine_chunks()
