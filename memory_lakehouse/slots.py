"""Where each slot's rows are in a kind's snapshot: a chain through the rows, per lineage id.

The write path reconciles a batch against every stored version of the batch's slots
(`query.Visibility.slot_versions`). Finding those rows by scanning the lineage column
for a few hundred ids (``pc.is_in``) cost ~1.7 ms at 100k rows and grows with the table
(a tenth of a 1,000-record batch's reconcile at 100k, more at 1M). `SlotRows` keeps, per
lineage id, the position of its last row, and per row the position of the row before it
in the same slot: a lookup walks each slot's versions, whatever the table's size. It is
brought up to date with each appended chunk (`extend`) and rebuilt when a rewrite starts a
new epoch (`lake.Lake.slot_rows`). It replaces the lake's set of lineage ids and costs
about as much (tracemalloc, the 100k tenants store's 83,500 slots: 11.9 MB, the set
11.0). tests/test_slots.py checks it against the scan.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class SlotRows:
    """Lineage id -> the positions of its rows, for rows appended in order (`extend`).

    Also the set of lineage ids with a row (``in``, iteration), which the writer asks
    first: slots new to the store need no lookup at all.
    """

    def __init__(self) -> None:
        self._last: dict[str, int] = {}  # lineage id -> position of its latest row
        self._previous = np.empty(0, dtype=np.int32)  # row -> the slot's row before it, -1 for its first
        self.rows = 0  # rows taken so far (the chain's first ``rows`` entries are live)

    def __contains__(self, lineage_id: object) -> bool:
        return lineage_id in self._last

    def __iter__(self) -> Iterator[str]:
        return iter(self._last)

    def __len__(self) -> int:
        return len(self._last)

    def extend(self, lineage_ids: pa.Array | pa.ChunkedArray) -> None:
        """Take the next ``len(lineage_ids)`` rows, positions ``rows``, ``rows + 1``, ...

        Vectorised over the rows: one dictionary encoding, one stable sort by lineage, and
        a step of Python per distinct lineage id in the chunk.
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
        lasts = (order[np.concatenate((~same, [True]))] + start).tolist()
        last, names = self._last, encoded.dictionary.to_pylist()
        if last:
            for first, end, name in zip(firsts.tolist(), lasts, names, strict=True):
                before = last.get(name)
                if before is not None:
                    previous[first] = before
                last[name] = end
        else:  # the first chunk (a whole table on open): nothing before it to link to
            last.update(zip(names, lasts, strict=True))
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
        last = self._last
        for lineage_id in set(lineage_ids):
            at = last.get(lineage_id, -1)
            while at >= 0:
                out.append(at)
                at = int(previous[at])
        return np.sort(np.array(out, dtype=np.int64))
