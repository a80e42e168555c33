"""Compact codes for many distinct strings (lineage ids): fixed-width bytes in numpy arrays, not a dict.

A dict of str holds ~135-155 bytes an id (the str object, an int, the table's entry): at
1M rows the ids of every slot cost ~130 MB that way. Here each id is kept once as its
UTF-8 bytes and a terminator (`_fixed_width`), ~37 bytes a 32-character id. Two shapes,
for two ways of being used:

* `SortedCodes`, immutable and sorted, looked up by binary search: the heads' lineage
  codes (`heads.OrgHeads`). A basis cell advanced by a write shares the old cell's arrays
  and adds a few values beside them.
* `CodeTable`, a hash table that grows in place: the writer's slot index
  (`slots.SlotRows`), which adds and asks about a whole batch's ids at once, and the
  record ids of an org's index partition (`index.Partition`, code = label) and BM25
  model (`retrieve`, code = document), which also give a code's value back.

tests/test_codes.py checks both against a dict. `hashes` gives each string a 64-bit hash,
`CodeTable`'s mixing over the value's own words, whatever the width of the values beside
it: the record-id index (`slots.IdRows`) keeps only those.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class SortedCodes:
    """Codes of distinct strings, looked up by binary search over their sorted UTF-8 bytes.

    Each `OrgHeads` cell keeps a code per distinct lineage id of its heads (so `advanced` can
    find a written row's (slot, scope) head). As a dict of str it held ~135 bytes an id
    (the str object and the table's entry; tracemalloc on the 100k tenants store: 10.8 MB
    for 84k ids over the cells), which the heads' byte bound (`query.HEADS_BYTES`) did not
    count; as two arrays it is 37 bytes a 32-character id (33 of bytes, 4 of code),
    counted. Each value carries a one-byte terminator, so a value ending in NUL is not cut
    by numpy's fixed-width bytes.
    """

    values: np.ndarray  # sorted bytes (each value's UTF-8 and the terminator)
    codes: np.ndarray  # int32: the code of each value, aligned with *values*
    #: values added since the arrays were sorted (`with_added`), with their codes: at most `ADDED_CODES`
    added: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, values: pa.Array | list[str]) -> SortedCodes:
        """Codes 0..n-1 for *values* (distinct), in their order."""
        encoded = _fixed_width(values if isinstance(values, pa.Array) else pa.array(values, pa.string()))
        order = np.argsort(encoded, kind="stable")
        return cls(encoded[order], order.astype(np.int32))

    def __len__(self) -> int:
        return len(self.values) + len(self.added)

    def get(self, value: str) -> int | None:
        return self.get_many([value]).get(value)

    def get_many(self, values: list[str]) -> dict[str, int]:
        """The codes of those of *values* held, in one binary search (an advance looks up to
        `query.ADVANCE_ROWS` at once)."""
        added = self.added
        out = {v: added[v] for v in values if v in added} if added else {}
        width = self.values.itemsize
        # a longer one than every sorted value is not among them
        fits = {v: e for v in values if v not in out for e in [_encoded(v)] if len(e) <= width}
        if not fits or not len(self.values):
            return out
        needles = np.array(list(fits.values()), dtype=f"S{width}")
        at = np.minimum(np.searchsorted(self.values, needles), len(self.values) - 1)
        found = (self.values[at] == needles).tolist()
        out.update((v, int(c)) for v, c, hit in zip(fits, self.codes[at].tolist(), found, strict=True) if hit)
        return out

    def with_added(self, more: list[str]) -> SortedCodes:
        """These codes and *more* (distinct, none held yet) as ``len(self)``, ``len(self) + 1``, ...

        A few at a time wait in a dict beside the sorted arrays, which the new codes share
        with the old: a write of a new slot advances an org's heads, and copying the arrays
        to insert one value cost ~0.1 ms of that advance at 5k heads (100k tenants; more as
        the org grows). Past `ADDED_CODES` waiting, they are sorted in.
        """
        added = {**self.added, **{v: len(self) + i for i, v in enumerate(more)}}
        if len(added) <= ADDED_CODES:
            return SortedCodes(self.values, self.codes, added)
        encoded = _fixed_width(pa.array(list(added), pa.string()))
        width = max(self.values.itemsize, encoded.itemsize)
        # `np.insert` makes new arrays (the old cell keeps its own): widened only when it must be
        values = self.values if self.values.itemsize == width else self.values.astype(f"S{width}")
        order = np.argsort(encoded, kind="stable")
        at = np.searchsorted(values, encoded[order].astype(f"S{width}"))
        codes = np.fromiter(added.values(), np.int32, len(added))[order]
        return SortedCodes(np.insert(values, at, encoded[order]), np.insert(self.codes, at, codes))

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes + self.codes.nbytes) + ADDED_CODE_BYTES * len(self.added)


#: Values `SortedCodes.with_added` keeps in a dict before sorting them into the arrays, and
#: what one costs there (a str and a dict entry, by tracemalloc: see `SortedCodes`).
ADDED_CODES = 64
ADDED_CODE_BYTES = 135


def _encoded(value: str) -> bytes:
    return value.encode() + b"\x01"


def _fixed_width(values: pa.Array) -> np.ndarray:
    """`_encoded` of every value of a string array, as numpy fixed-width bytes.

    Values of one length (lineage ids are hashes) are read straight from the Arrow buffers:
    encoding one value a call cost an org's history at 1M 12 ms for 40k ids, this 0.8 ms.
    Others are encoded one by one (scattering them out of the buffers measured 21 ms).
    """
    if values.null_count:
        raise ValueError("codes are of strings, not nulls")
    n = len(values)
    if not n:
        return np.array([], dtype="S1")
    _, offsets_buffer, data_buffer = values.buffers()
    wide = pa.types.is_large_string(values.type)
    offsets = np.frombuffer(offsets_buffer, np.int64 if wide else np.int32)[values.offset : values.offset + n + 1]
    lengths = np.diff(offsets)
    size = int(lengths[0])
    if size == 0 or not (lengths == size).all():
        return np.array([_encoded(v) for v in values.to_pylist()], dtype=bytes)
    first = int(offsets[0])
    matrix = np.empty((n, size + 1), np.uint8)
    matrix[:, :size] = np.frombuffer(data_buffer, np.uint8)[first : first + n * size].reshape(n, size)
    matrix[:, size] = 1  # the terminator
    return matrix.view(f"S{size + 1}").ravel()


def hashes(values: pa.Array) -> np.ndarray:
    """A 64-bit hash of each of *values* (strings): the multiply-xorshift of `CodeTable` over
    the words its own bytes and terminator span.

    Unlike `CodeTable`'s places, a value's hash does not depend on the width of the values
    hashed with it, so hashes of chunks hashed apart can be compared (`slots.IdRows`). Equal
    strings have equal hashes; unequal ones rarely do, so a match is only a candidate.
    """
    n = len(values)
    if not n:
        return np.empty(0, dtype=np.uint64)
    encoded = _fixed_width(values)
    columns = _words(encoded)
    # each value's own words: those past them (NUL padding up to the widest) leave its hash alone
    own = None
    lengths = np.asarray(pc.binary_length(values).to_numpy(zero_copy_only=False), dtype=np.int64) + 1
    if (lengths != encoded.itemsize).any():
        own = -(-lengths // 8)
    h = np.zeros(n, dtype=np.uint64)
    for j in range(columns.shape[1]):
        mixed = _mixed(h, columns[:, j])
        h = mixed if own is None else np.where(j < own, mixed, h)
    return h


def _words(encoded: np.ndarray) -> np.ndarray:
    """Fixed-width bytes (`_fixed_width`) as rows of 64-bit words, NUL-padded to a multiple of 8."""
    width = encoded.itemsize
    matrix = np.zeros((len(encoded), -(-width // 8) * 8), dtype=np.uint8)
    matrix[:, :width] = encoded.view(np.uint8).reshape(len(encoded), width)
    words: np.ndarray = matrix.view(np.uint64)
    return words


def _mixed(h: np.ndarray, words: np.ndarray) -> np.ndarray:
    """One step of the multiply-xorshift hash (`CodeTable._places`, `hashes`; `_place_of` in Python ints)."""
    mixed: np.ndarray = (h ^ words) * np.uint64(_MIX)
    mixed ^= mixed >> np.uint64(29)
    return mixed


class CodeTable:
    """Codes of distinct strings in a hash table of numpy arrays: `SortedCodes`' bytes, found without a search.

    For a map that grows by whole batches and is asked about whole batches (the writer's
    slot index, `slots.SlotRows`): a batch's values are hashed, looked up and added with a
    few numpy calls, however many there are. `SortedCodes` is immutable (the heads' cells
    share one) and sorts new values in: with ~800 new lineage ids in each 1,000 records,
    its binary searches and sorting in cost a batch ~5 ms more than the dict did (~5% of ingest).

    Each value is kept once, as fixed-width bytes in its code's place (`_fixed_width`: its
    UTF-8 and a terminator); the table is open addressing with linear probing, at most half
    full, holding codes (-1 for an empty place). ~37 bytes a 32-character id, plus 8-16 in
    the table.
    """

    def __init__(self) -> None:
        self._values = np.empty(0, dtype="S1")  # code -> the value's bytes (room beyond `_count` is unused)
        self._count = 0
        self._table = np.full(16, -1, dtype=np.int32)

    @classmethod
    def of(cls, values: Sequence[str] | pa.Array) -> CodeTable:
        """A table holding *values* (distinct) as codes 0..n-1, in their order."""
        table = cls()
        table.add(values)
        return table

    def __len__(self) -> int:
        return self._count

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and self._find_one(_encoded(value)) >= 0

    def values_at(self, codes: np.ndarray | Sequence[int]) -> list[str]:
        """The values of *codes* (each one held), in their order."""
        at = np.asarray(codes, dtype=np.int64)
        if len(at) and (at.min() < 0 or at.max() >= self._count):
            raise IndexError(f"codes must be in [0, {self._count}), got {at.min()}..{at.max()}")
        # numpy's fixed-width bytes drop the padding NULs; each value ends in its terminator
        return [value[:-1].decode() for value in self._values[at].tolist()]

    def find(self, values: Sequence[str] | pa.Array) -> np.ndarray:
        """The code of each of *values* (strings, or an Arrow string array), -1 where none."""
        if len(values) <= ONE_BY_ONE:
            listed = values.to_pylist() if isinstance(values, pa.Array) else values
            return np.array([self._find_one(_encoded(v)) for v in listed], dtype=np.int64)
        if not isinstance(values, pa.Array):
            values = pa.array(list(values), pa.string())
        out = np.full(len(values), -1, dtype=np.int64)
        if not self._count:
            return out
        needles = _fixed_width(values)
        width = self._values.itemsize
        at = np.arange(len(values))
        if needles.itemsize > width:  # those longer than every held value are not held
            narrowed = needles.astype(f"S{width}")
            at = np.flatnonzero(narrowed == needles)
            needles = narrowed[at]
        elif needles.itemsize < width:
            needles = needles.astype(f"S{width}")
        out[at] = self._probe(needles)
        return out

    def number(self, values: Sequence[str] | pa.Array) -> np.ndarray:
        """The code of each of *values* (distinct), adding those not held (`add`)."""
        if len(values) <= ONE_BY_ONE:
            listed = values.to_pylist() if isinstance(values, pa.Array) else list(values)
            found = [self._find_one(_encoded(v)) for v in listed]
            unheld = [v for v, code in zip(listed, found, strict=True) if code < 0]
            if unheld:
                fresh = iter(self.add(unheld).tolist())
                found = [code if code >= 0 else next(fresh) for code in found]
            return np.array(found, dtype=np.int64)
        if not isinstance(values, pa.Array):
            values = pa.array(list(values), pa.string())
        out = self.find(values)
        new = np.flatnonzero(out < 0)
        if len(new):
            out[new] = self.add(values.take(pa.array(new)))
        return out

    def add(self, values: Sequence[str] | pa.Array) -> np.ndarray:
        """Codes ``len(self)``, ``len(self) + 1``, ... for *values* (distinct, none held yet)."""
        m = len(values)
        codes = np.arange(self._count, self._count + m, dtype=np.int64)
        if not m:
            return codes
        if isinstance(values, pa.Array):
            encoded = _fixed_width(values)
        elif m > ONE_BY_ONE:  # read from Arrow buffers (`_fixed_width`), not encoded one by one
            encoded = _fixed_width(pa.array(list(values), pa.string()))
        else:
            encoded = np.array([_encoded(v) for v in values], dtype=bytes)
        width = max(self._values.itemsize, encoded.itemsize)
        rehash = width != self._values.itemsize  # a value's hash is of its bytes at the held width
        if rehash or self._count + m > len(self._values):
            grown = np.empty(max(self._count + m, 2 * len(self._values)), dtype=f"S{width}")
            grown[: self._count] = self._values[: self._count]
            self._values = grown
        self._values[self._count : self._count + m] = encoded
        self._count += m
        if rehash or 2 * self._count > len(self._table):
            size = len(self._table)
            while 2 * self._count > size:
                size *= 2
            self._table = np.full(size, -1, dtype=np.int32)
            self._insert(np.arange(self._count, dtype=np.int64))
        elif m <= ONE_BY_ONE:
            for code in codes.tolist():
                self._insert_one(code)
        else:
            self._insert(codes)
        return codes

    def _places(self, encoded: np.ndarray) -> np.ndarray:
        """Each value's first place in the table: a multiply-xorshift hash of its bytes."""
        h = np.zeros(len(encoded), dtype=np.uint64)
        for column in _words(encoded).T:
            h = _mixed(h, column)
        return (h & np.uint64(len(self._table) - 1)).astype(np.int64)

    def _probe(self, needles: np.ndarray) -> np.ndarray:
        """The code of each of *needles* (at the held width), -1 where none."""
        out = np.full(len(needles), -1, dtype=np.int64)
        place = self._places(needles)
        pending = np.arange(len(needles))
        mask = len(self._table) - 1
        while len(pending):
            held = self._table[place[pending]].astype(np.int64)
            filled = held >= 0
            same = np.zeros(len(pending), dtype=bool)
            same[filled] = self._values[held[filled]] == needles[pending[filled]]
            out[pending[same]] = held[same]
            pending = pending[filled & ~same]  # an empty place ends the search: not held
            place[pending] = (place[pending] + 1) & mask
        return out

    def _insert(self, codes: np.ndarray) -> None:
        """Put *codes* (held in `_values`, not yet in the table) in their places."""
        place = self._places(self._values[codes])
        pending = np.arange(len(codes))
        mask = len(self._table) - 1
        while len(pending):
            at = place[pending]
            free = self._table[at] < 0
            # those whose place is free write their code there; where two share a place, one
            # write lands, and the other finds the place taken and probes on
            self._table[at[free]] = codes[pending[free]]
            placed = np.zeros(len(pending), dtype=bool)
            placed[free] = self._table[at[free]] == codes[pending[free]]
            pending = pending[~placed]
            place[pending] = (place[pending] + 1) & mask

    # One value at a time: a single write's lookups. The same hash and probing as `_places`,
    # `_probe` and `_insert` in Python ints, without the ~30 numpy calls (~0.25 ms) a batch pays.

    def _place_of(self, encoded: bytes) -> int:
        """`_places` of one encoded value (no longer than the held width)."""
        width = self._values.itemsize
        h = 0
        for (word,) in struct.iter_unpack("=Q", encoded.ljust(width + (-width % 8), b"\0")):
            h = ((h ^ word) * _MIX) & _WORD
            h ^= h >> 29
        return h & (len(self._table) - 1)

    def _find_one(self, encoded: bytes) -> int:
        """`_probe` of one encoded value: its code, -1 where none."""
        if not self._count or len(encoded) > self._values.itemsize:
            return -1
        table, values, mask = self._table, self._values, len(self._table) - 1
        place = self._place_of(encoded)
        while (code := int(table[place])) >= 0:
            if values[code] == encoded:  # numpy's bytes drop the padding NULs; a value ends in its terminator
                return code
            place = (place + 1) & mask
        return -1

    def _insert_one(self, code: int) -> None:
        """`_insert` of one code."""
        table, mask = self._table, len(self._table) - 1
        place = self._place_of(bytes(self._values[code]))
        while table[place] >= 0:
            place = (place + 1) & mask
        table[place] = code


#: Up to this many values, `CodeTable` looks up and adds one at a time in Python (a single
#: write's one id: ~0.24 ms of numpy calls vectorised, 15-20 µs this way, `SlotRows.held`).
ONE_BY_ONE = 16
_MIX = 0x9E3779B97F4A7C15
_WORD = (1 << 64) - 1
