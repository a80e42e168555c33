"""Where each slot's rows are in a kind's snapshot (a chain through the rows, per lineage id),
and where each record id's are (`IdRows`, a hash of each row's id).

The write path reconciles a batch against every stored version of the batch's slots
(`query.Visibility.slot_versions`). Finding those rows by scanning the lineage column
for a few hundred ids (``pc.is_in``) cost ~1.7 ms at 100k rows and grows with the table
(a tenth of a 1,000-record batch's reconcile at 100k, more at 1M). `SlotRows` keeps, per
slot, the position of its last row, and per row the position of the row before it in the
same slot: a lookup walks each slot's versions, whatever the table's size. It is
brought up to date with each appended chunk (`extend`) and rebuilt when a rewrite starts a
new epoch (`lake.Lake.slot_rows`). tests/test_slots.py checks it against the scan.

Slots are numbered by a `codes.CodeTable` (each lineage id's bytes once, in a hash table
of numpy arrays) with the last row of each in an array, not in a dict of str: tracemalloc,
with the chain, ~4.5 MB for 83,500 slots over 100k rows and ~44 MB for 835,000 over 1M,
against 11.8 and 129 as a dict, all of it in a writer's resident memory. A batch's lookups
cost about what the dict's did at 100k, ~1.6 ms more a 1,000-record batch at 1M (the
table's random reads miss the cache more).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .codes import CodeTable, hashes


class SlotRows:
    """Lineage id -> the positions of its rows, for rows appended in order (`extend`).

    Also which lineage ids have a row (`held`, ``in``), which the writer asks first: slots
    new to the store need no lookup at all.
    """

    def __init__(self) -> None:
        self._numbered = CodeTable()  # lineage id -> slot number
        self._last = np.empty(0, dtype=np.int32)  # slot number -> position of its latest row
        self._previous = np.empty(0, dtype=np.int32)  # row -> the slot's row before it, -1 for its first
        self.rows = 0  # rows taken so far (the chain's first ``rows`` entries are live)

    def __contains__(self, lineage_id: object) -> bool:
        return isinstance(lineage_id, str) and bool(self.held([lineage_id]))

    def __len__(self) -> int:
        return len(self._numbered)

    def held(self, lineage_ids: Iterable[str]) -> set[str]:
        """Those of *lineage_ids* with a row: one search for them all."""
        asked = list(set(lineage_ids))
        return {v for v, n in zip(asked, self._numbered.find(asked).tolist(), strict=True) if n >= 0}

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
        slots = self._numbered.number(encoded.dictionary)
        self._last = _with_room(self._last, len(self), fill=-1)
        previous[firsts] = self._last[slots]  # the slot's last row before this chunk; -1 for a new slot
        self._last[slots] = lasts
        self._previous = _with_room(self._previous, start + count)
        self._previous[start : start + count] = previous
        self.rows = start + count

    def positions(self, lineage_ids: Iterable[str]) -> np.ndarray:
        """The positions of every row of those slots, ascending (ids without rows add none)."""
        out: list[int] = []
        previous = self._previous
        numbers = self._numbered.find(list(set(lineage_ids)))
        for slot in numbers[numbers >= 0].tolist():
            at = int(self._last[slot])
            while at >= 0:
                out.append(at)
                at = int(previous[at])
        return np.sort(np.array(out, dtype=np.int64))


class IdRows:
    """Where each record id's rows may be in a kind's snapshot: a 64-bit hash of every row's
    record id (`codes.hashes`), in row order.

    Approve, retract and extraction look a record up by its id (`query.Visibility.by_ids`).
    Scanning the id column for it (``pc.is_in``) cost ~19 ms at 1M rows (a 1M-row approve
    took ~40 ms, half of it that scan). Comparing one integer a row, a look-up is ~0.7 ms
    there; the rows whose hash matches are only candidates: the caller checks their ids
    (`lake.Lake.id_positions`). 8 bytes a row (8 MB at 1M), built only in a
    process that looks records up by id, brought up to date with each appended chunk
    (`extend`) and rebuilt when a rewrite starts a new epoch, as `SlotRows` is.
    tests/test_slots.py checks it against the scan.
    """

    def __init__(self) -> None:
        self._hashes = np.empty(0, dtype=np.uint64)
        self.rows = 0  # rows taken so far (the first ``rows`` hashes are live)

    def extend(self, record_ids: pa.Array | pa.ChunkedArray) -> None:
        """Take the next ``len(record_ids)`` rows, positions ``rows``, ``rows + 1``, ..."""
        if isinstance(record_ids, pa.ChunkedArray):
            record_ids = record_ids.combine_chunks()
        count = len(record_ids)
        if not count:
            return
        if record_ids.null_count:
            raise ValueError("a row without a record id")
        start = self.rows
        self._hashes = _with_room(self._hashes, start + count)
        for first in range(0, count, HASHED_AT_ONCE):  # a slice at a time: a 1M-row epoch's ids as
            # fixed-width bytes (`codes._fixed_width`) and words would take ~80 MB at once
            part = record_ids.slice(first, HASHED_AT_ONCE)
            self._hashes[start + first : start + first + len(part)] = hashes(part)
        self.rows = start + count

    def candidates(self, record_ids: Iterable[str]) -> np.ndarray:
        """The positions, ascending, of every row whose record id may be one of *record_ids*:
        each row with one of them, and now and then another whose id's hash is the same."""
        wanted = np.unique(hashes(pa.array(list(set(record_ids)), pa.string())))
        held = self._hashes[: self.rows]
        if len(wanted) == 1:
            return np.flatnonzero(held == wanted[0])
        return np.flatnonzero(np.isin(held, wanted))


def _with_room(values: np.ndarray, size: int, *, fill: int | None = None) -> np.ndarray:
    """*values*, or a copy of them with room for *size* (new room *fill*, or left unset):
    doubling, so an append copies an array only now and then."""
    if size <= len(values):
        return values
    grown = np.empty(max(size, 2 * len(values)), dtype=values.dtype)
    if fill is not None:
        grown[len(values) :] = fill
    grown[: len(values)] = values
    return grown


#: Ids `IdRows.extend` hashes at once (~40 bytes each while hashed).
HASHED_AT_ONCE = 65_536
