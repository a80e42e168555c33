"""Compact codes for many distinct strings (lineage ids): sorted fixed-width bytes, not a dict.

A dict of str holds ~135 bytes an id (the str object and the table's entry); at 1M rows the
ids of every slot cost ~120 MB that way. `SortedCodes` keeps the same map as two numpy
arrays, 37 bytes a 32-character id, looked up by binary search. The heads' lineage codes
(`heads.OrgHeads`) and the writer's slot index (`slots.SlotRows`) use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa


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

    def find(self, values: pa.Array) -> np.ndarray:
        """The code of each of *values* (an Arrow string array), -1 where none: `get_many`
        without a Python step per value where the values are of one length (hashes).

        The writer's slot index asks this for a batch's lineage ids: `get_many` over 1,000
        ids cost ~1.9 ms, most of it building dicts a value at a time.
        """
        out = np.full(len(values), -1, dtype=np.int64)
        if not len(values):
            return out
        if len(self.values):
            needles = _fixed_width(values)
            width = self.values.itemsize
            if needles.itemsize > width:  # some longer than every held value (rare: ids are of one length)
                held = self.get_many(values.to_pylist())
                return np.fromiter((held.get(v, -1) for v in values.to_pylist()), np.int64, len(values))
            if needles.itemsize < width:
                needles = needles.astype(f"S{width}")
            at = np.minimum(np.searchsorted(self.values, needles), len(self.values) - 1)
            hit = self.values[at] == needles
            out[hit] = self.codes[at[hit]]
        if self.added:
            added = self.added
            missing = np.flatnonzero(out < 0)
            out[missing] = [added.get(v, -1) for v in values.take(pa.array(missing)).to_pylist()]
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
