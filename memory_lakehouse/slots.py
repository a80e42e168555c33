"""Where each slot's rows are in a kind's snapshot: a chain through the rows, per lineage id.

The write path reconciles a batch against every stored version of the batch's slots
(`query.Visibility.slot_versions`). Finding those rows by scanning the lineage column
for a few hundred ids (``pc.is_in``) cost ~1.7 ms at 100k rows and grows with the table
(a tenth of a 1,000-record batch's reconcile at 100k, more at 1M). `SlotRows` keeps, per
slot, the position of its last row, and per row the position of the row before it in the
same slot: a lookup walks each slot's versions, whatever the table's size. It is
brought up to date with each appended chunk (`extend`) and rebuilt when a rewrite starts a
new epoch (`lake.Lake.slot_rows`). tests/test_slots.py checks it against the scan.

Slots are numbered by `codes.SortedCodes` (sorted fixed-width bytes, ~37 bytes a lineage id)
with the last row of each in an array, not in a dict of str: tracemalloc, with the chain,
3.8 MB for 83,500 slots over 100k rows and 38 MB for 835,000 over 1M, against 11.8 and 129
as a dict, all of it in a writer's resident memory. A lookup is a binary search, ~1 ms
more a 1,000-record batch at 1M than the dict's.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .codes import SortedCodes

#: Slots numbered since the sorted codes were last rebuilt wait in a dict (a lookup there costs
#: no search): at most this many, or a sixteenth of the sorted ones, whichever is more. Then
#: they are sorted in, a copy of the arrays (~30 MB at 1M slots) once per that many new slots.
RECENT_SLOTS = 4096


class SlotRows:
    """Lineage id -> the positions of its rows, for rows appended in order (`extend`).

    Also which lineage ids have a row (`held`, ``in``), which the writer asks first: slots
    new to the store need no lookup at all.
    """

    def __init__(self) -> None:
        self._sorted = SortedCodes.of([])  # lineage id -> slot number, most of them
        self._recent: dict[str, int] = {}  # ... the rest: numbered since `_sorted` was built
        self._last = np.empty(0, dtype=np.int32)  # slot number -> position of its latest row
        self._previous = np.empty(0, dtype=np.int32)  # row -> the slot's row before it, -1 for its first
        self.rows = 0  # rows taken so far (the chain's first ``rows`` entries are live)

    def __contains__(self, lineage_id: object) -> bool:
        return isinstance(lineage_id, str) and bool(self.held([lineage_id]))

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def held(self, lineage_ids: Iterable[str]) -> set[str]:
        """Those of *lineage_ids* with a row: one search for them all."""
        asked = pa.array(list(set(lineage_ids)), pa.string())
        return {v for v, n in zip(asked.to_pylist(), self._numbers(asked).tolist(), strict=True) if n >= 0}

    def _numbers(self, lineage_ids: pa.Array) -> np.ndarray:
        """The slot number of each of *lineage_ids*, -1 where it has none."""
        out = self._sorted.find(lineage_ids)
        recent = self._recent
        if recent:
            missing = np.flatnonzero(out < 0)
            if len(missing):
                out[missing] = [recent.get(v, -1) for v in lineage_ids.take(pa.array(missing)).to_pylist()]
        return out

    def _number(self, names: pa.Array) -> np.ndarray:
        """The slot number of each of *names* (distinct), numbering those without one."""
        if not len(self):  # the first chunk (a whole table on open): numbered in its order, no lookup
            self._sorted = SortedCodes.of(names)
            return np.arange(len(names), dtype=np.int64)
        out = self._numbers(names)
        new = np.flatnonzero(out < 0)
        if len(new):
            after = len(self)
            out[new] = np.arange(after, after + len(new))
            self._recent.update(zip(names.take(pa.array(new)).to_pylist(), range(after, after + len(new)), strict=True))
        if len(self._recent) > max(RECENT_SLOTS, len(self._sorted) // 16):
            # numbered in the order added, as `with_added` numbers them
            self._sorted, self._recent = self._sorted.with_added(list(self._recent)), {}
        return out

    def extend(self, lineage_ids: pa.Array | pa.ChunkedArray) -> None:
        """Take the next ``len(lineage_ids)`` rows, positions ``rows``, ``rows + 1``, ...

        Vectorised over the rows: one dictionary encoding, one stable sort by lineage, and
        one lookup of the chunk's distinct lineage ids.
        """
        count = len(lineage_ids)
        if not count:
            return
        start = self.rows
        encoded = pc.dictionary_encode(lineage_ids)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.unify_dictionaries().combine_chunks()
        if encoded.indices.null_count:
            raise ValueError("a row without a lineage id")
        codes = encoded.indices.to_numpy()
        order = np.argsort(codes, kind="stable")
        ranked = codes[order]
        same = ranked[1:] == ranked[:-1]
        previous = np.full(count, -1, dtype=np.int32)
        previous[order[1:][same]] = order[:-1][same] + start
        # each lineage's first and last row here, in code order: every code of the dictionary occurs
        firsts = order[np.concatenate(([True], ~same))]
        lasts = order[np.concatenate((~same, [True]))] + start
        slots = self._number(encoded.dictionary)
        if len(self) > len(self._last):  # doubling, as the chain below
            grown = np.full(max(len(self), 2 * len(self._last)), -1, dtype=np.int32)
            grown[: len(self._last)] = self._last
            self._last = grown
        previous[firsts] = self._last[slots]  # the slot's last row before this chunk; -1 for a new slot
        self._last[slots] = lasts
        if start + count > len(self._previous):  # doubling: an append copies the chain only now and then
            grown = np.empty(max(start + count, 2 * len(self._previous)), dtype=np.int32)
            grown[:start] = self._previous[:start]
            self._previous = grown
        self._previous[start : start + count] = previous
        self.rows = start + count

    def positions(self, lineage_ids: Iterable[str]) -> np.ndarray:
        """The positions of every row of those slots, ascending (ids without rows add none)."""
        out: list[int] = []
        previous = self._previous
        numbers = self._numbers(pa.array(list(set(lineage_ids)), pa.string()))
        for slot in numbers[numbers >= 0].tolist():
            at = int(self._last[slot])
            while at >= 0:
                out.append(at)
                at = int(previous[at])
        return np.sort(np.array(out, dtype=np.int64))
