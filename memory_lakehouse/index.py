"""HNSW partitions built from the store: filtered search, an exact fallback, safe files.

The index is a derived cache, never the system of record. One `Partition` per org holds
an hnswlib graph plus a float32 copy of its unit vectors and an int8 one (once the
partition is loaded or rebuilt, the copies are read from their saved files and the graph
only when a walk needs it: see `Partition`); `PartitionedIndex` keeps them under
``<root>/<model-slug>/<org>/gen-NNNNNN/`` tagged (`IndexTag`) with the Delta table
versions they reflect, so the store can tell how far behind a partition is, score the
newer rows with `exact_search`, and rebuild from its rows whenever files are missing,
corrupt or built by another model.

Filtering happens *inside* the search (hnswlib's ``filter`` callback over a boolean
mask), never after it, so a selective visibility filter cannot starve top-k: a search
returns ``min(k, |allowed ∩ partition|)`` results. A small planner picks an exact scan
when the allowed set is small, where it is both exact and faster (see `Partition.search`);
past `CODES_FROM` rows that scan ranks by the int8 codes and rescores a shortlist in float32.

Forgetting rebuilds: a ``mark_deleted`` vector still sits in hnswlib's saved file (and
an int8 code is a copy too), so `PartitionedIndex.replace` writes the new partition and
then deletes every file of the old one. This module imports no store, write or query code; it takes record ids,
vectors and allowed sets.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import shutil
import struct
import threading
import uuid
import weakref
import zlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import hnswlib
import numpy as np
import pyarrow as pa
import simsimd

from .codes import CodeTable
from .errors import ConflictError, StoreError, ValidationError
from .mapped import map_npy, read_rows, release_pages

Trace = Callable[[str], None]
Plan = Literal["auto", "exact", "hnsw"]

#: The planner scans exactly when at most ``EXACT_SCALE * sqrt(n)`` vectors (and never
#: fewer than ``EXACT_FLOOR``) of an n-vector partition are allowed. Why a square root:
#: the filtered walk re-enters Python once per visited node (~1.5 µs each), so it costs
#: about n/allowed, while the exact scan costs about |allowed| rows; the two meet near
#: sqrt(n). Measured by ``scripts/bench_index.py`` (2 cores, random unit 384-d vectors,
#: k=8), since scans past `CODES_FROM` rank by int8 codes: the filtered walk first wins
#: at 24,000 allowed of 100k (after 16,000: the crossover lies in 51-76·sqrt(n)) and at
#: 10,000 of 20k (after 8,000: 57-71·sqrt(n)); 64 is inside both. Scanning float32 rows
#: (the same hour, the same script) it first won at 16,000 and 6,000 (51 and 42·sqrt(n));
#: 40 was fitted so, on an earlier day's 12,000 and 6,000. Below the limit the exact scan is faster *and* exact (at 1,000 of
#: 100k: 0.3 ms vs 26 ms; at 16,000 the walk found 31% of the top k). See `exact_scan_limit`.
EXACT_SCALE = 64.0
EXACT_FLOOR = 2048

#: What a row gathered from scattered labels costs, in rows read in place. Rows next to
#: each other stream from memory; a gather copies each one from wherever it lies. Measured
#: with ``_dot`` over 5,000 x 384 float32 rows (``np.vecdot``): from memory (20 such
#: partitions, 154 MB), 1,150 rows gathered 0.36-0.39 ms against 0.06 ms read in place
#: (4-6x); in cache 2-3x. An exact scan reads the allowed rows in runs (`_Scan`), and the
#: planner's exact limit counts gathered rows, so a run of rows read in place counts a
#: quarter of its length.
GATHER_COST = 4
#: A run read in place pays one step of Python (~2-3 µs: about eight gathered rows).
_RUN_OVERHEAD = 8

#: An exact scan over more than `CODES_FROM` allowed rows ranks them by their int8 codes
#: first (a quarter of the bytes of float32; `_quantize_into`) and rescores only the best
#: ``max(SHORTLIST_FACTOR * k, SHORTLIST_FLOOR)`` in float32, so its scores are the
#: float32 cosines. Cross-validated on real rows (2,760 LoCoMo dev turns, 300 of its
#: questions, MiniLM and hashing vectors, 32 and 80 deep): a shortlist of 1.25 x k found
#: the float32 top k (by score) for every query, 1 x k missed 0.15-0.84 rows a query; 2 x
#: k leaves a margin.
SHORTLIST_FACTOR = 2
SHORTLIST_FLOOR = 32
#: Below this many allowed rows the float32 rows are scored directly. Measured on 20
#: mapped 50,000 x 384 partitions, allowed rows in 6 runs, k = 32 (`Partition.search`,
#: ms p50): 1,000 rows 0.29 float32 / 0.32 codes; 2,000 0.38 / 0.36; 4,000 0.56 / 0.45;
#: 15,000 1.70 / 0.89. Above it the codes win, and a scan touches only the shortlist's
#: float32 pages; below it the codes' pages would be read besides the float32 ones.
CODES_FROM = 2048

#: Search breadth when the caller gives none; raised to at least 2*k per query.
DEFAULT_EF = 64

FORMAT = 2  # 2: with int8 codes and their scales; a format-1 partition loads and gets them computed
_SPACE = "ip"  # unit vectors: inner product == cosine similarity; score = 1 - distance
_CHUNK = 1024  # rows gathered per step of an exact scan: stays in cache
_ADD_CHUNK = 4096  # rows checked and scaled per step of `Partition.add`: bounded temporaries
_GRAPH_FILE = "index.hnsw"
_FILES = (_GRAPH_FILE, "vectors.npy", "ids.json", "codes.npy", "scales.npy")
_FILES_OF = {1: _FILES[:3], 2: _FILES}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
_GEN = re.compile(r"^gen-(\d{6,})$")


@dataclass(frozen=True)
class IndexTag:
    """What a saved partition reflects: model, dimension, table versions, row count.

    ``versions`` maps a table name to the Delta table version the partition was built
    or caught up to; rows committed after it are not in the partition yet.

    >>> IndexTag("m", 3, {"facts": 7}, 10).versions["facts"]
    7
    """

    model: str
    dim: int
    versions: dict[str, int] = field(default_factory=dict)
    count: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValidationError("tag.model must be a non-empty str", field="tag.model")
        _check_positive(self.dim, "tag.dim")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise ValidationError(f"tag.count must be an int >= 0, got {self.count!r}", field="tag.count")
        versions = dict(self.versions)
        for table, version in versions.items():
            if not isinstance(table, str) or isinstance(version, bool) or not isinstance(version, int):
                raise ValidationError(
                    f"tag.versions must map table names to int versions, got {table!r}: {version!r}",
                    field="tag.versions",
                )
        object.__setattr__(self, "versions", versions)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "dim": self.dim, "versions": dict(self.versions), "count": self.count}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IndexTag:
        return cls(data["model"], data["dim"], dict(data["versions"]), data["count"])


def exact_search(query: np.ndarray, vectors: np.ndarray, ids: Sequence[str], k: int) -> list[tuple[str, float]]:
    """Top-k of *vectors* by cosine similarity to *query*, best first.

    For rows the index does not hold yet (newer than its tag) and for small allowed
    sets. Rows need not be unit length; all-zero rows score 0.

    >>> exact_search(np.array([1.0, 0.0]), np.array([[0.0, 2.0], [3.0, 0.0]]), ["a", "b"], 1)
    [('b', 1.0)]
    """
    rows = np.asarray(vectors, dtype=np.float32)
    if rows.ndim != 2 or rows.shape[0] != len(ids):
        raise ValidationError(
            f"vectors must be a 2-D array with one row per id ({len(ids)}), got shape {rows.shape}",
            field="vectors",
        )
    q = _query(query, rows.shape[1])
    _check_k(k)
    if rows.shape[0] == 0:
        return []
    norms = np.linalg.norm(rows, axis=1)
    scores = _dot(rows, q) / np.where(norms > 0, norms, 1.0)
    return [(ids[i], float(scores[i])) for i in _top_k(scores, k)]


class _Rows:
    """One per-row copy of a partition's vectors (float32 rows, int8 codes or their scales), in label order.

    Either an array with room to grow (a partition built in this process), or a read-only
    map of a saved file followed by a tail for rows added since. The map is never copied:
    its pages are read as scans touch them (copying 7.7 MB at 5k x 384 float32 was ~1,900
    fresh pages, 16-29 ms of page faults on an org's first write after a rebuild).
    """

    def __init__(self, data: np.ndarray) -> None:
        self.data = data  # writable with room to grow, or a read-only map of exactly the saved rows
        self.tail: np.ndarray | None = None  # rows added after a map (labels from len(data))
        self.path: Path | None = None  # the file a map was made from, where `fetch` reads it (None: unknown)
        #: whether reads through the map may have mapped its pages in since it was last let go of
        self.paged_in = False

    @property
    def mapped(self) -> bool:
        return not self.data.flags.writeable

    @property
    def room(self) -> int:
        return len(self.data) + (len(self.tail) if self.tail is not None else 0)

    def pieces(self, start: int, stop: int) -> list[np.ndarray]:
        """Rows [start, stop) as views of at most two arrays (the map, then its tail): no copy."""
        base = len(self.data)
        self.paged_in = True
        if self.tail is None or stop <= base:
            return [self.data[start:stop]]
        if start >= base:
            return [self.tail[start - base : stop - base]]
        return [self.data[start:base], self.tail[: stop - base]]

    def slice(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop): a view, or a copy where they span the map and its tail."""
        parts = self.pieces(start, stop)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def gather(self, labels: np.ndarray) -> np.ndarray:
        """The rows at *labels*, gathered into a new array."""
        self.paged_in = True
        return self._with_tail(labels, lambda at: self.data[at])

    def fetch(self, labels: np.ndarray) -> np.ndarray:
        """`gather` of a few scattered rows (*labels* ascending), the map's read from its file
        (`mapped.read_rows`) while no read through the map has paged it in since it was let
        go of (`_keep_pages_of`): a scan's shortlist, the fusion's cosines.

        Through the map, 64 rows of an org's float32 copy at 1M cost a recall ~0.2 ms of
        page faults, and letting the pages go again at the next org's read another ~0.15
        (line profile of `_exact`, 400 recalls). A map a scan has just read in place (rows
        under `CODES_FROM`) is gathered from: its pages are there. So is one whose file
        cannot be read (not a map, a path a newer save replaced).
        """
        if not self.mapped or self.path is None or self.paged_in:
            return self.gather(labels)
        read = read_rows(self.data, self.path, labels[labels < len(self.data)])
        if read is None:
            return self.gather(labels)
        return self._with_tail(labels, lambda _: read)

    def _with_tail(self, labels: np.ndarray, mapped_rows: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """The rows at *labels*: *mapped_rows(at)* gives those of the map (or array) at *at*, in
        their order; the tail's (rows added after a map) are taken from memory."""
        if self.tail is None:
            return mapped_rows(labels)
        base = len(self.data)
        low = labels < base
        out = np.empty((len(labels), *self.data.shape[1:]), dtype=self.data.dtype)
        out[low] = mapped_rows(labels[low])
        out[~low] = self.tail[labels[~low] - base]
        return out

    def release(self) -> None:
        """Let go of the pages of the map this process holds, if it is a map (`mapped.release_pages`)."""
        if self.mapped:
            release_pages(self.data)
            self.paged_in = False

    def block(self, start: int, count: int) -> np.ndarray:
        """Writable rows [start, start + count), within the room `reserve` made."""
        if self.tail is None:
            return self.data[start : start + count]
        base = len(self.data)
        return self.tail[start - base : start - base + count]

    def reserve(self, live: int, needed: int, capacity: int) -> None:
        """Room for *needed* rows, keeping the first *live*: an array grows to *capacity*, a map gets a tail."""
        shape, dtype = self.data.shape[1:], self.data.dtype
        if not self.mapped:
            if needed > len(self.data):
                grown = np.empty((capacity, *shape), dtype=dtype)
                grown[:live] = self.data[:live]
                self.data = grown
            return
        base = len(self.data)
        if self.tail is None or needed - base > len(self.tail):
            tail = np.empty((max(capacity, needed) - base, *shape), dtype=dtype)
            if self.tail is not None:
                tail[: live - base] = self.tail[: live - base]
            self.tail = tail


class Partition:
    """One org's HNSW graph over unit vectors, with record ids for labels.

    Labels are assigned 0, 1, 2… in insertion order; the float32 copy of the vectors
    (one extra copy: 150 MB at 100k x 384; ~340 MB for the whole partition) serves
    exact scans, which hnswlib's ``get_items`` is too slow for (~18 µs a row), and so
    does an int8 copy of them (codes and a unit a row, a quarter of the bytes): a scan
    over more than `CODES_FROM` rows ranks by the codes and rescores a shortlist in float32
    (`SHORTLIST_FACTOR`). A partition that was loaded, or saved by
    `PartitionedIndex.replace`, reads these copies from its ``vectors.npy``,
    ``codes.npy`` and ``scales.npy`` through read-only memory maps: only the pages scans
    touch are resident, and the kernel may drop them again (so a process that rebuilt 20
    orgs does not keep 20 orgs' copies); of the float32 copies, only the org read last
    keeps its pages mapped (`_keep_pages_of`). Rows added after that go to a tail beside
    each map (`_Rows`).

    Such a partition does not hold its graph in memory either (~175 MB at 100k x 384):
    only a filtered or unfiltered walk needs it, and the exact scans that serve small
    allowed sets never do. The first walk (or a save of rows added since) reads it from
    its ``index.hnsw``; rows added before then wait in the float32 copy and join the
    graph at that point, in label order (hnswlib draws their levels afresh, as after any
    load). If the file is gone (another handle rebuilt the org), the graph is built again from
    the float32 copy. A lock makes add and search safe to call from several threads;
    searches run one at a time, single-threaded.

    >>> p = Partition.create(2)
    >>> p.add(["a", "b"], np.array([[1.0, 0.0], [0.0, 1.0]]))
    >>> p.search(np.array([1.0, 0.1]), 1)[0][0]
    'a'
    """

    def __init__(
        self,
        index: hnswlib.Index | None,
        ids: list[str],
        vectors: np.ndarray,
        codes: np.ndarray,
        scales: np.ndarray,
        *,
        dim: int,
        M: int,
        ef_construction: int,
        ef: int = DEFAULT_EF,
        exact_threshold: int | None = None,
        graph_file: Path | None = None,
        graph_crc: int | None = None,
    ) -> None:
        # Use `create` or `load`; this wires already-consistent parts together.
        self._index = index  # the graph in memory, holding every row; None: read from graph_file when needed
        self._graph_file = graph_file  # a saved graph of the first `_graph_count` rows
        self._graph_crc = graph_crc  # the CRC-32 graph_file must have, until checked (`_graph_file_intact`)
        self._graph_count = len(ids) if index is None else 0
        self._pending_threads = 2  # threads for adding rows to the graph once it is read back
        # label <-> record id, a label being its id's code (`codes.CodeTable`). A list of the ids
        # and a dict back held ~15 MB over the 100k tenants store's 20 partitions (tracemalloc:
        # index.py and json); these tables and the BM25 models' hold 7.4 MB together
        self._ids = CodeTable.of(ids)
        # capacity rows each, the first len(ids) live; or read-only maps of the saved rows
        self._vectors = _Rows(vectors)  # float32 unit vectors
        self._codes = _Rows(codes)  # int8 codes of them (`_quantize_into`)
        self._scales = _Rows(scales)  # float32: a code's unit, per row
        self.dim = int(dim)
        self.M = M
        self.ef_construction = ef_construction
        self.ef = ef
        self.exact_threshold = exact_threshold
        self._lock = threading.RLock()

    @classmethod
    def create(
        cls,
        dim: int,
        *,
        capacity: int = 1024,
        M: int = 16,
        ef_construction: int = 100,
        ef: int = DEFAULT_EF,
        exact_threshold: int | None = None,
        seed: int = 100,
    ) -> Partition:
        """An empty partition for *dim*-dimensional vectors; it grows past *capacity* by itself.

        *exact_threshold* fixes the planner's exact-scan limit; None (the default)
        scales it with the partition's size (`exact_scan_limit`).
        """
        _check_positive(dim, "dim")
        for name, value in (("capacity", capacity), ("M", M), ("ef_construction", ef_construction), ("ef", ef)):
            _check_positive(value, name)
        if exact_threshold is not None and (
            isinstance(exact_threshold, bool) or not isinstance(exact_threshold, int) or exact_threshold < 0
        ):
            raise ValidationError(
                f"exact_threshold must be an int >= 0, got {exact_threshold!r}", field="exact_threshold"
            )
        index = hnswlib.Index(space=_SPACE, dim=dim)
        index.init_index(max_elements=capacity, M=M, ef_construction=ef_construction, random_seed=seed)
        return cls(
            index,
            [],
            np.empty((capacity, dim), dtype=np.float32),
            np.empty((capacity, dim), dtype=np.int8),
            np.empty(capacity, dtype=np.float32),
            dim=dim,
            M=M,
            ef_construction=ef_construction,
            ef=ef,
            exact_threshold=exact_threshold,
        )

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, record_id: object) -> bool:
        with self._lock:
            return record_id in self._ids

    def find(self, record_ids: Sequence[str] | pa.Array) -> np.ndarray:
        """The label of each of *record_ids* (a row's place in the partition, what a `search`
        mask is over), -1 where the partition does not hold it."""
        with self._lock:
            return self._ids.find(record_ids)

    def ids_at(self, labels: np.ndarray | Sequence[int]) -> list[str]:
        """The record ids of *labels* (each one held), in their order."""
        with self._lock:
            return self._ids.values_at(labels)

    def record_ids(self) -> list[str]:
        """Every record id the partition holds, in label order."""
        with self._lock:
            return self._ids.values_at(np.arange(len(self._ids)))

    def __repr__(self) -> str:
        return f"Partition(dim={self.dim}, count={len(self)}, capacity={self.capacity})"

    @property
    def capacity(self) -> int:
        if self._index is not None:
            return int(self._index.get_max_elements())
        return self._vectors.room

    def add(self, record_ids: Sequence[str], vectors: np.ndarray, *, num_threads: int = 2) -> None:
        """Add vectors under their record ids; ids already present are skipped.

        A record's vector never changes (records are append-only), so re-adding an id
        is a no-op rather than an update. Vectors are scaled to unit length; all-zero
        rows stay zero. ``num_threads=1`` builds the same graph on every run.
        """
        rows = _rows(vectors, len(record_ids), self.dim)
        for i, rid in enumerate(record_ids):
            if not isinstance(rid, str) or not rid:
                raise ValidationError(f"record_ids[{i}] must be a non-empty str, got {rid!r}", field="record_ids")
        with self._lock:
            fresh: list[int] = []
            seen: set[str] = set()
            for i in np.flatnonzero(self._ids.find(record_ids) < 0).tolist():
                if record_ids[i] not in seen:
                    seen.add(record_ids[i])
                    fresh.append(i)
            if not fresh:
                return
            start, count = len(self._ids), len(fresh)
            self._reserve(start + count)
            # Scaled straight into the float32 copy, which hnswlib then reads: no
            # full-size temporaries (at 100k x 384, each would be another 150 MB).
            block = self._vectors.block(start, count)
            _unit_rows_into(rows, None if count == len(rows) else np.asarray(fresh), block)
            _quantize_into(block, self._codes.block(start, count), self._scales.block(start, count))
            if self._index is not None:
                labels = np.arange(start, start + count, dtype=np.int64)
                self._index.add_items(block, labels, num_threads=max(1, num_threads))
            else:  # the graph takes them when it is read back (`_graph`)
                self._pending_threads = min(self._pending_threads, max(1, num_threads))
            self._ids.add([record_ids[i] for i in fresh])  # codes start.. : their labels

    def _reserve(self, needed: int) -> None:
        # Doubling keeps adds amortised O(1); the unused room is address space, not RSS
        # (neither hnswlib nor np.empty touches it until rows arrive). A mapped copy gets a
        # tail instead (`_Rows`).
        capacity = self.capacity
        if needed > capacity:
            capacity = max(needed, capacity * 2)
            if self._index is not None:
                self._index.resize_index(capacity)
        n = len(self._ids)
        for rows in (self._vectors, self._codes, self._scales):
            rows.reserve(n, needed, capacity)

    def _graph(self) -> hnswlib.Index:
        """The graph over every row: read back from its file on first use, then caught up.

        Call with the lock held. Rows added while the graph was on disk join it here, in
        label order; a missing or unreadable file means building it from the float32 copy.
        """
        index = self._index
        n = len(self._ids)
        if index is None:
            capacity = max(self._vectors.room, n, 1)
            if self._graph_file is not None and self._graph_file_intact():
                index = hnswlib.Index(space=_SPACE, dim=self.dim)
                try:
                    index.load_index(str(self._graph_file), max_elements=capacity)
                    if index.element_count != self._graph_count:
                        index = None
                except (OSError, RuntimeError):  # hnswlib: "Cannot open file"
                    index = None
            if index is None:
                index = hnswlib.Index(space=_SPACE, dim=self.dim)
                index.init_index(max_elements=capacity, M=self.M, ef_construction=self.ef_construction, random_seed=100)
            self._index, self._graph_file, self._graph_count = index, None, 0
        indexed = int(index.element_count)
        if indexed < n:
            if n > index.get_max_elements():
                index.resize_index(max(n, self._vectors.room))
            for start in range(indexed, n, _ADD_CHUNK):
                stop = min(start + _ADD_CHUNK, n)
                labels = np.arange(start, stop, dtype=np.int64)
                index.add_items(self._vectors.slice(start, stop), labels, num_threads=self._pending_threads)
        self._pending_threads = 2
        return index

    def mask(self, allowed: Collection[str]) -> np.ndarray:
        """*allowed* as a boolean mask over labels, to pass to `search` many times.

        Mapping ids to labels is the cost of a big allowed set (50k ids ≈ 30 ms; 17 ms
        when the labels were a dict of str, which held ~135 bytes an id), so a caller whose
        visible set has not changed can compute it once (recall builds its masks from
        labels, `candidates.OrgRows`, and never maps ids here). Records added after the mask was made count as
        not allowed.
        """
        with self._lock:
            out = np.zeros(len(self._ids), dtype=bool)
            labels = self._ids.find(list(allowed))
            out[labels[labels >= 0]] = True
            return out

    def search(
        self,
        query: np.ndarray,
        k: int,
        *,
        allowed: Collection[str] | np.ndarray | None = None,
        ef: int | None = None,
        plan: Plan = "auto",
        trace: Trace | None = None,
    ) -> list[tuple[str, float]]:
        """`search_labels`, each row named by its record id: ``(record_id, score)``, best first."""
        hits = self.search_labels(query, k, allowed=allowed, ef=ef, plan=plan, trace=trace)
        ids = self.ids_at([label for label, _ in hits])
        return [(rid, score) for rid, (_, score) in zip(ids, hits, strict=True)]

    def search_labels(
        self,
        query: np.ndarray,
        k: int,
        *,
        allowed: Collection[str] | np.ndarray | None = None,
        ef: int | None = None,
        plan: Plan = "auto",
        trace: Trace | None = None,
    ) -> list[tuple[int, float]]:
        """The k nearest rows by cosine similarity, best first, as ``(label, score)``.

        With *allowed*, only those ids can be returned and the filter is applied inside
        the graph walk (a pre-filter), so the result has ``min(k, |allowed ∩ self|)``
        rows — a selective filter never starves top-k. Ids not in the partition are
        ignored; a boolean mask from `mask` may stand in for the ids. The planner
        (``plan="auto"``):

        * at most `exact_limit` candidates (by default ``64 * sqrt(n)``, at least
          2048: 20,238 at n = 100k — the measured crossover) → exact scan, which is
          then both exact and faster than the filtered walk;
        * *allowed* covers the whole partition → plain HNSW, no callback;
        * otherwise HNSW with the filter, ``ef >= 2*k``; if the walk finds fewer than
          k it retries with 4x ef, then falls back to an exact scan.

        An exact scan over more than `CODES_FROM` rows ranks them by int8 codes and
        rescores a shortlist in float32 (`SHORTLIST_FACTOR`). ``plan="exact"`` /
        ``"hnsw"`` force a path. *trace* receives one line saying which path ran, e.g.
        ``"exact scan over 1000 allowed"``.
        """
        q = _query(query, self.dim)
        _check_k(k)
        if ef is not None:
            _check_positive(ef, "ef")
        if plan not in ("auto", "exact", "hnsw"):
            raise ValidationError(f"plan must be 'auto', 'exact' or 'hnsw', got {plan!r}", field="plan")
        say = trace or (lambda line: None)
        with self._lock:
            n = len(self._ids)
            mask: np.ndarray | None = None
            if isinstance(allowed, np.ndarray):
                if allowed.dtype != bool or allowed.ndim != 1 or len(allowed) > n:
                    raise ValidationError("an allowed mask must come from Partition.mask", field="allowed")
                mask = allowed if len(allowed) == n else np.concatenate([allowed, np.zeros(n - len(allowed), bool)])
            elif allowed is not None:
                if isinstance(allowed, str):
                    raise ValidationError("allowed must be a collection of record ids, not one str", field="allowed")
                mask = self.mask(allowed)
            count = n if mask is None else int(np.count_nonzero(mask))
            if count == n:
                mask = None  # the filter excludes nothing: skip the callback
            if count == 0:
                say(f"empty: 0 of {n} allowed")
                return []
            k = min(k, count)
            what = "allowed" if mask is not None else "(whole partition)"
            scan = _Scan.of(mask, n) if mask is not None else None
            cost = count if scan is None else scan.cost
            if plan == "exact" or (plan == "auto" and cost <= self.exact_limit()):
                runs = len(scan.first) if scan is not None else 0
                in_place = f" ({runs} run{'s' if runs > 1 else ''} read in place)" if runs else ""
                codes = f", ranked by int8 codes, {_shortlist(k)} rescored" if _by_codes(count, k) else ""
                say(f"exact scan over {count} {what}{in_place}{codes}")
                return self._exact(q, mask, scan, k, count)
            ef = max(ef or self.ef, 2 * k)
            for _ in range(2):  # a second try at 4x the ef
                say(f"hnsw ef={ef}, " + (f"filter {count} allowed" if mask is not None else f"unfiltered over {n}"))
                graph = self._graph()
                graph.set_ef(ef)
                try:
                    labels_, distances = graph.knn_query(
                        q, k=k, num_threads=1, filter=None if mask is None else mask.__getitem__
                    )
                except RuntimeError:  # hnswlib: fewer than k reachable within ef
                    ef *= 4
                    continue
                return [(int(label), float(1.0 - d)) for label, d in zip(labels_[0], distances[0], strict=True)]
            say(f"hnsw found fewer than {k}: exact scan over {count} {what}")
            return self._exact(q, mask, scan, k, count)

    def exact_limit(self) -> int:
        """How many candidates the planner scans exactly at the partition's current size."""
        if self.exact_threshold is not None:
            return self.exact_threshold
        return exact_scan_limit(len(self._ids))

    def _exact(
        self, q: np.ndarray, mask: np.ndarray | None, scan: _Scan | None, k: int, count: int
    ) -> list[tuple[int, float]]:
        """The top k of the *count* allowed rows by float32 cosine.

        Over more than `CODES_FROM`, the rows are ranked by their int8 codes first and
        only a shortlist of them (`SHORTLIST_FACTOR`) is scored in float32.
        """
        if not _by_codes(count, k):
            labels, scores = self._read(mask, scan, self._cosines(q), self._cosines_at(q))
        else:
            qc = _query_code(q)
            labels, approx = self._read(mask, scan, self._code_scores(qc), self._code_scores_at(qc))
            best = _top_k(approx, _shortlist(k))
            labels = np.sort(best if labels is None else labels[best])
            scores = _dot(self._vectors.fetch(labels), q)
        _keep_pages_of(self._vectors)
        if labels is None:
            return [(int(i), float(scores[i])) for i in _top_k(scores, k)]
        return [(int(labels[i]), float(scores[i])) for i in _top_k(scores, k)]

    def _read(
        self,
        mask: np.ndarray | None,
        scan: _Scan | None,
        in_place: Callable[[int, int], np.ndarray],
        gathered: Callable[[np.ndarray], np.ndarray],
    ) -> tuple[np.ndarray | None, np.ndarray]:
        """Scores of the allowed rows as the scan plan reads them: ``(labels, scores)``.

        *in_place* scores rows [low, high), *gathered* the rows at some labels. Labels
        None: the scores are of every row in label order, those not allowed -inf.
        """
        if mask is None or scan is None or scan.whole:
            # every row in order, what is not allowed blanked out: cheaper than reading the
            # allowed ones apart once they are a good share of the partition (`_Scan.whole`)
            scores = in_place(0, len(self._ids))
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)  # k <= count: -inf is never picked
            return None, scores
        labels = scan.labels
        scores = np.empty(len(labels), dtype=np.float32)
        apart = np.ones(len(labels), dtype=bool)
        for first, stop in zip(scan.first.tolist(), scan.stop.tolist(), strict=True):
            low, high = int(labels[first]), int(labels[stop - 1]) + 1
            scores[first:stop] = in_place(low, high)[labels[first:stop] - low]
            apart[first:stop] = False
        rest = np.flatnonzero(apart)
        for start in range(0, len(rest), _CHUNK):  # the others gathered, a chunk at a time
            part = rest[start : start + _CHUNK]
            scores[part] = gathered(labels[part])
        return labels, scores

    def _cosines(self, q: np.ndarray) -> Callable[[int, int], np.ndarray]:
        """Float32 cosines of *q* with rows [low, high), read in place."""

        def score(low: int, high: int) -> np.ndarray:
            pieces = [_dot(rows, q) for rows in self._vectors.pieces(low, high)]
            return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)

        return score

    def _cosines_at(self, q: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        return lambda labels: _dot(self._vectors.gather(labels), q)

    def _code_scores(self, qc: np.ndarray) -> Callable[[int, int], np.ndarray]:
        """Rows [low, high) scored by their int8 codes (`_code_dot`), read in place."""

        def score(low: int, high: int) -> np.ndarray:
            pieces = [
                _code_dot(codes, qc) * scales
                for codes, scales in zip(self._codes.pieces(low, high), self._scales.pieces(low, high), strict=True)
            ]
            return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)

        return score

    def _code_scores_at(self, qc: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        return lambda labels: _code_dot(self._codes.gather(labels), qc) * self._scales.gather(labels)

    def vectors_of(self, record_ids: Sequence[str]) -> np.ndarray:
        """The stored unit vectors of *record_ids* (all must be present), in that order.

        A rebuild from the store re-uses them instead of re-embedding rows it kept.
        """
        with self._lock:
            labels = self._ids.find(record_ids)
            missing = np.flatnonzero(labels < 0)
            if len(missing):
                raise ValidationError(
                    f"{len(missing)} id(s) not in the partition, e.g. {record_ids[int(missing[0])]!r}",
                    field="record_ids",
                )
            return self.vectors_at(labels)

    def vectors_at(self, labels: np.ndarray) -> np.ndarray:
        """The stored unit vectors of the rows at *labels* (each one held), in that order."""
        labels = np.asarray(labels, dtype=np.int64)
        with self._lock:
            if len(labels) and (labels.min() < 0 or labels.max() >= len(self._ids)):
                raise ValidationError(f"labels must be in [0, {len(self._ids)})", field="labels")
            order = np.argsort(labels, kind="stable")
            rows = np.empty((len(labels), self.dim), dtype=np.float32)
            rows[order] = self._vectors.fetch(labels[order])
            _keep_pages_of(self._vectors)  # as a scan does (`_exact`)
            return rows

    def rebuilt_without(self, record_ids: Collection[str], *, num_threads: int = 2) -> Partition:
        """A fresh partition holding every vector except *record_ids* — for forgetting.

        Built anew (not ``mark_deleted``), so saving it writes no byte of the removed
        vectors. Re-uses the stored vectors: nothing is re-embedded.
        """
        drop = set(record_ids)
        with self._lock:  # copy out what survives; the slow build runs without the lock
            ids = self._ids.values_at(np.arange(len(self._ids)))
            keep = [i for i, rid in enumerate(ids) if rid not in drop]
            kept_ids = [ids[i] for i in keep]
            kept_vectors = self._vectors.gather(np.array(keep, dtype=np.int64))
        fresh = Partition.create(
            self.dim,
            capacity=max(len(keep), 1),
            M=self.M,
            ef_construction=self.ef_construction,
            ef=self.ef,
            exact_threshold=self.exact_threshold,
        )
        if keep:
            fresh.add(kept_ids, kept_vectors, num_threads=num_threads)
        return fresh

    def save(self, directory: Path, tag: IndexTag, *, map_vectors: bool = False) -> None:
        """Write the partition to *directory* atomically: a temp dir, then a rename.

        Files: ``index.hnsw`` (hnswlib), ``vectors.npy``, ``codes.npy``, ``scales.npy``,
        ``ids.json`` and ``tag.json`` (the tag, hnswlib parameters and each file's size
        and CRC-32, so a torn or corrupt copy loads as None, and a corrupt graph is built
        again from the vectors, instead of crashing hnswlib: `_graph_file_intact`).
        An existing *directory* is swapped out and deleted. With *map_vectors*, the
        copies of the vectors are then read from the written files instead of memory and
        the graph is let go of until a walk needs it (unless rows were added meanwhile);
        a partition that keeps growing is better saved without.
        """
        directory = Path(directory)
        if tag.dim != self.dim or tag.count != len(self):
            raise ValidationError(
                f"tag says dim={tag.dim}, count={tag.count}; the partition has dim={self.dim}, count={len(self)}",
                field="tag",
            )
        tmp = directory.parent / f".{directory.name}.tmp-{uuid.uuid4().hex}"
        mapped: list[np.ndarray | None] = []
        try:
            tmp.mkdir(parents=True)
            with self._lock:
                n = len(self._ids)
                if not self._copy_graph(tmp / "index.hnsw", n):
                    self._graph().save_index(str(tmp / "index.hnsw"))
                copies = self._copies()
                for name, rows in copies.items():
                    np.save(tmp / name, rows.slice(0, n), allow_pickle=False)
                (tmp / "ids.json").write_text(json.dumps(self._ids.values_at(np.arange(n))), encoding="utf-8")
                if map_vectors:  # mapped before the rename: the map follows the file, not the path
                    mapped = [
                        map_npy(tmp / name, (n, *rows.data.shape[1:]), rows.data.dtype.str)
                        for name, rows in copies.items()
                    ]
            meta = {
                "format": FORMAT,
                "tag": tag.to_json(),
                "space": _SPACE,
                "M": self.M,
                "ef_construction": self.ef_construction,
                "files": {name: {"size": (tmp / name).stat().st_size, "crc32": _crc32(tmp / name)} for name in _FILES},
            }
            (tmp / "tag.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
            if directory.exists():
                old = directory.parent / f".{directory.name}.old-{uuid.uuid4().hex}"
                os.rename(directory, old)
                os.rename(tmp, directory)
                shutil.rmtree(old)
            else:
                os.rename(tmp, directory)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise StoreError(f"cannot save index partition to {directory}: {exc}") from exc
        with self._lock:
            if self._index is None:  # the graph was copied: read it from here, as the old file goes
                self._graph_file = directory / "index.hnsw"
            elif mapped and mapped[0] is not None and len(self._ids) == n:
                self._index, self._graph_file, self._graph_count = None, directory / "index.hnsw", n
            if mapped and len(self._ids) == n:
                for (name, rows), map_ in zip(self._copies().items(), mapped, strict=True):
                    if map_ is not None:
                        rows.data, rows.tail, rows.path = map_, None, directory / name

    def _copies(self) -> dict[str, _Rows]:
        """The per-row copies of the vectors, by the file each is saved to."""
        return {"vectors.npy": self._vectors, "codes.npy": self._codes, "scales.npy": self._scales}

    def _graph_file_intact(self) -> bool:
        """Whether the saved graph file has the CRC-32 its partition's tag recorded: checked
        once, before hnswlib reads it or a save copies it (`load` leaves it to then).

        Why then: the graph is most of a partition's bytes (~85 MB of an org's 50,000 rows),
        and a recall that scans exactly never reads it; checking every file at `load` read
        them all from disk on a restart's first recall of each org (~220 ms of it at 1M).
        A file that fails is never handed to hnswlib (a corrupt graph can crash it): the
        graph is built from the float32 copy instead, as for a missing file.
        """
        expected = self._graph_crc
        if expected is None or self._graph_file is None:
            return True
        try:
            intact = _crc32(self._graph_file) == expected
        except OSError:
            intact = False
        if intact:
            self._graph_crc = None
        else:
            self._graph_file = None
        return intact

    def _copy_graph(self, target: Path, n: int) -> bool:
        """Copy the saved graph file to *target* if it holds all *n* rows, the graph is not in
        memory and the file is intact."""
        if self._index is not None or self._graph_file is None or self._graph_count != n:
            return False
        if not self._graph_file_intact():
            return False
        try:
            shutil.copyfile(self._graph_file, target)
        except OSError:
            return False
        return True

    @classmethod
    def load(
        cls, directory: Path, *, model: str | None = None, dim: int | None = None
    ) -> tuple[Partition, IndexTag] | None:
        """Read a saved partition; None if it is missing, corrupt, or for another model/dim.

        None means "rebuild from the store": the index is a cache, so a bad file is
        never an error. The graph file's checksum is checked when the graph is first
        needed (`_graph_file_intact`), the others' here.
        """
        directory = Path(directory)
        try:
            meta = json.loads((directory / "tag.json").read_text(encoding="utf-8"))
            saved_format = meta.get("format")
            if saved_format not in _FILES_OF or meta.get("space") != _SPACE:
                return None
            tag = IndexTag.from_json(meta["tag"])
            if (model is not None and tag.model != model) or (dim is not None and tag.dim != dim):
                return None
            for name in _FILES_OF[saved_format]:
                expect = meta["files"][name]
                path = directory / name
                if path.stat().st_size != expect["size"]:
                    return None
                if name != _GRAPH_FILE and _crc32(path) != expect["crc32"]:  # the graph's: when read
                    return None
            ids = json.loads((directory / "ids.json").read_text(encoding="utf-8"))
            n, d = tag.count, tag.dim
            vectors = _load_npy(directory / "vectors.npy", (n, d), np.float32)
            codes: np.ndarray | None
            scales: np.ndarray | None
            if saved_format == 1:  # saved before the int8 copy: computed here, saved with the partition's next save
                codes, scales = _codes_of_file(directory / "vectors.npy", n, d)
            else:
                codes = _load_npy(directory / "codes.npy", (n, d), np.int8)
                scales = _load_npy(directory / "scales.npy", (n,), np.float32)
            if (
                not isinstance(ids, list)
                or len(ids) != n
                or len(set(ids)) != len(ids)
                or not all(isinstance(i, str) for i in ids)
                or vectors is None
                or codes is None
                or scales is None
            ):
                return None
            if _saved_graph_count(directory / "index.hnsw") != tag.count:
                return None
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, ValidationError, struct.error):
            return None
        # the graph stays on disk until a walk needs it (see `Partition`)
        part = cls(
            None,
            ids,
            vectors,
            codes,
            scales,
            dim=tag.dim,
            M=int(meta["M"]),
            ef_construction=int(meta["ef_construction"]),
            graph_file=directory / _GRAPH_FILE,
            graph_crc=int(meta["files"][_GRAPH_FILE]["crc32"]),
        )
        part._vectors.path = directory / "vectors.npy"  # `_Rows.fetch` reads the shortlist's rows from it
        return part, tag


class PartitionedIndex:
    """Every org's partition for one embedding model, persisted under *root*.

    Layout: ``<root>/<model-slug>/<org>/gen-NNNNNN/`` — the model name is part of the
    path (the cache key), and each save is a new generation; older ones are deleted
    once the new one is in place. Partitions load lazily and stay cached.

    >>> import shutil, tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> idx = PartitionedIndex(root, "toy-model", 2)
    >>> p = Partition.create(2); p.add(["a"], np.array([[1.0, 0.0]]))
    >>> idx.put("acme", p, IndexTag("toy-model", 2, {"facts": 3}, 1))
    >>> idx.tag("acme").versions
    {'facts': 3}
    >>> shutil.rmtree(root)
    """

    def __init__(self, root: Path, model: str, dim: int) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValidationError("model must be a non-empty str (model and version)", field="model")
        _check_positive(dim, "dim")
        self.root = Path(root)
        self.model = model
        self.dim = dim
        self.base = self.root / model_slug(model)
        self._cache: dict[str, tuple[Partition, IndexTag]] = {}
        self._unusable: dict[str, int] = {}  # org -> generation that failed to load
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"PartitionedIndex(root={str(self.root)!r}, model={self.model!r}, dim={self.dim})"

    def other_models(self) -> list[Path]:
        """Partition folders of other embedders under the same root (stale caches)."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir() and p != self.base)

    def orgs(self) -> list[str]:
        """Orgs with a partition on disk."""
        if not self.base.is_dir():
            return []
        return sorted(p.name for p in self.base.iterdir() if p.is_dir() and _NAME.match(p.name) and self._gens(p.name))

    def partition(self, org: str) -> Partition | None:
        """The org's partition, loaded from disk on first use; None if absent or unusable."""
        got = self._get(org)
        return got[0] if got else None

    def tag(self, org: str) -> IndexTag | None:
        """What the org's partition reflects; None when there is no usable partition."""
        got = self._get(org)
        return got[1] if got else None

    def _get(self, org: str) -> tuple[Partition, IndexTag] | None:
        _check_org(org)
        with self._lock:
            if org not in self._cache:
                gens = self._gens(org)
                if not gens or self._unusable.get(org) == gens[-1]:
                    return None
                loaded = Partition.load(self._gen_dir(org, gens[-1]), model=self.model, dim=self.dim)
                if loaded is None:
                    self._unusable[org] = gens[-1]  # don't re-read a bad generation on every call
                    return None
                self._cache[org] = loaded
            return self._cache[org]

    def put(self, org: str, partition: Partition, tag: IndexTag, *, map_vectors: bool = False) -> None:
        """Persist the org's partition (e.g. caught up) as a new generation; delete older ones.

        Raises ConflictError if *tag* is behind the saved one for some table: a builder
        that started before a rebuild must not bring back what the rebuild removed.
        *map_vectors*: see `Partition.save` (a partition that will not grow soon).
        """
        self._write(org, partition, tag, check_versions=True, map_vectors=map_vectors)

    def replace(self, org: str, partition: Partition, tag: IndexTag) -> None:
        """Swap in a fully rebuilt partition, then delete every file of the old one.

        For forgetting (and for a store restored from backup, whose versions may be
        lower: a full rebuild from the store always wins). The old generations and any
        unfinished temp dirs are removed, and the org's directory is checked to hold
        nothing but the new generation; StoreError if anything else is left. The
        partition's float32 copy is then read from its saved file, and its graph is read
        back only when a walk needs it (see `Partition`).
        """
        new_dir = self._write(org, partition, tag, check_versions=False, map_vectors=True)
        org_dir = self.base / org
        for entry in org_dir.iterdir():
            if entry != new_dir:
                _remove(entry)
        stray = [p for p in org_dir.rglob("*") if new_dir not in p.parents and p != new_dir]
        if stray:
            raise StoreError(f"replace({org!r}) left old index files behind: {[str(p) for p in stray]}")

    def _write(
        self, org: str, partition: Partition, tag: IndexTag, *, check_versions: bool, map_vectors: bool = False
    ) -> Path:
        _check_org(org)
        if tag.model != self.model or tag.dim != self.dim or partition.dim != self.dim:
            raise ValidationError(
                f"index is for {self.model!r} dim {self.dim}; got tag {tag.model!r} dim {tag.dim}, "
                f"partition dim {partition.dim}",
                field="tag",
            )
        with self._lock:
            current = self._saved_tag(org) if check_versions else None
            if current is not None:
                behind = {
                    t: (v, current.versions[t])
                    for t, v in tag.versions.items()
                    if t in current.versions and v < current.versions[t]
                }
                if behind:
                    raise ConflictError(f"index partition {org!r} is already newer than this build: {behind}")
            gens = self._gens(org)
            target = self._gen_dir(org, (gens[-1] if gens else 0) + 1)
            partition.save(target, tag, map_vectors=map_vectors)
            self._cache.pop(org, None)
            for gen in gens:
                _remove(self._gen_dir(org, gen))
            self._cache[org] = (partition, tag)
            self._unusable.pop(org, None)
            return target

    def _saved_tag(self, org: str) -> IndexTag | None:
        if org in self._cache:
            return self._cache[org][1]
        gens = self._gens(org)
        if not gens:
            return None
        try:
            meta = json.loads((self._gen_dir(org, gens[-1]) / "tag.json").read_text(encoding="utf-8"))
            return IndexTag.from_json(meta["tag"])
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            return None

    def evict(self, org: str) -> None:
        """Let go of the org's partition in memory; its files stay (the next read loads them)."""
        _check_org(org)
        with self._lock:
            self._cache.pop(org, None)

    def drop(self, org: str) -> None:
        """Delete the org's partition from memory and disk (a later read rebuilds it)."""
        _check_org(org)
        with self._lock:
            self._cache.pop(org, None)
            self._unusable.pop(org, None)
            _remove(self.base / org)

    def files(self, org: str | None = None) -> list[Path]:
        """Every file this index holds on disk (for one org, or all), sorted."""
        top = self.base if org is None else self.base / org
        if org is not None:
            _check_org(org)
        if not top.is_dir():
            return []
        return sorted(p for p in top.rglob("*") if p.is_file())

    def _gens(self, org: str) -> list[int]:
        org_dir = self.base / org
        if not org_dir.is_dir():
            return []
        return sorted(int(m.group(1)) for p in org_dir.iterdir() if (m := _GEN.match(p.name)) and p.is_dir())

    def _gen_dir(self, org: str, gen: int) -> Path:
        return self.base / org / f"gen-{gen:06d}"


def exact_scan_limit(n: int) -> int:
    """The default exact-scan limit for an n-vector partition: ``max(2048, 64 * sqrt(n))``.

    >>> exact_scan_limit(100_000), exact_scan_limit(1_000_000)
    (20238, 64000)
    """
    return max(EXACT_FLOOR, int(EXACT_SCALE * n**0.5))


def model_slug(model: str) -> str:
    """A directory name for *model*: readable, and distinct for distinct names.

    >>> model_slug("sentence-transformers/all-MiniLM-L6-v2")[:39]
    'sentence-transformers_all-MiniLM-L6-v2-'
    """
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._-")[:64] or "model"
    return f"{readable}-{hashlib.sha256(model.encode('utf-8')).hexdigest()[:10]}"


@dataclass(frozen=True)
class _Scan:
    """How an exact scan reads the allowed rows of a mask: runs of nearby rows in place, the rest gathered.

    A run is a stretch of allowed labels no more than `GATHER_COST` apart (reading the
    rows between costs less than gathering the next one); it is read in place when its
    rows cost less that way than its allowed rows gathered (`_RUN_OVERHEAD` included).
    Where an org's rows lie in scope order (`retrieve`), a reader's visible rows are a few
    such runs: its org's, its team's, its own.
    """

    labels: np.ndarray  # allowed labels, ascending
    first: np.ndarray  # per run read in place: the index in labels of its first label
    stop: np.ndarray  # ... and one past its last
    spanned: int  # rows the runs read, allowed or not
    n: int  # rows in the partition

    @classmethod
    def of(cls, mask: np.ndarray, n: int) -> _Scan:
        labels = np.flatnonzero(mask)
        breaks = np.flatnonzero(np.diff(labels) > GATHER_COST) + 1
        first = np.concatenate(([0], breaks))
        stop = np.concatenate((breaks, [len(labels)]))
        rows = labels[stop - 1] - labels[first] + 1
        in_place = rows / GATHER_COST + _RUN_OVERHEAD < stop - first
        return cls(labels, first[in_place], stop[in_place], int(rows[in_place].sum()), n)

    @property
    def gathered(self) -> int:
        return len(self.labels) - int((self.stop - self.first).sum())

    @property
    def whole(self) -> bool:
        """Whether reading every row of the partition costs no more than this plan."""
        return self.n <= self.spanned + GATHER_COST * self.gathered

    @property
    def cost(self) -> float:
        """The scan's cost in gathered rows (what the planner's exact limit counts)."""
        return min(self.n, self.spanned + GATHER_COST * self.gathered) / GATHER_COST


def _dot(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    # ``rows @ q`` is an OpenBLAS gemv that wakes a second thread, and on a busy 2-core
    # machine waiting for it cost a 4-8 ms scheduler slice. ``vecdot`` runs on this thread
    # (one BLAS dot per row, never threaded at 384 dims) and reads the rows at twice
    # einsum's speed: 0.25 against 0.48 ms over 5,000 x 384 (einsum's own loop has no SIMD).
    scores: np.ndarray = np.vecdot(rows, q)
    return scores


def _shortlist(k: int) -> int:
    """How many of the best rows by int8 codes an exact scan rescores in float32 (`SHORTLIST_FACTOR`)."""
    return max(SHORTLIST_FACTOR * k, SHORTLIST_FLOOR)


_pages_kept: weakref.ref[_Rows] | None = None
_pages_kept_lock = threading.Lock()


def _keep_pages_of(rows: _Rows) -> None:
    """Keep the float32 pages of the partition just read (*rows*) mapped, and let go of those
    of the one read before it, if that was another (`_Rows.release`).

    The kernel maps far more of a file around the rows a scan reads than they fill
    (`mapped.release_pages`), and pages that stay mapped count in the process's RSS: with
    every org's kept, the tenants bench's Δ peak RSS at 100k was 651-673 MB, with only the
    last org's 528-530 (with none 510-524); at 1M (scans by codes) the file-backed RSS after
    200 recalls was 1,491 MB, and 445 with the pages let go of after each scan. Letting
    them go costs the next read of that org its page faults (they come back from the page
    cache). Measured at 100k in one process, alternating blocks of 25 recalls: a new actor
    of another org each time +0.06 ms (+0.11 when every read let go of its own org's pages
    too), the same reader again +0.003 (+0.12). So a reader asking the same org again (a
    conversation) pays nothing, and a process serving many orgs keeps at most one org's
    copy. At 1M, against a scan letting its own org's pages go too: a new actor 3.87 /
    4.05 ms, the same reader 2.67 / 3.07. The int8 codes stay mapped: every scan past
    `CODES_FROM` reads them in bulk (~4.8 MB an org at 1M), and letting them go as well cost
    a recall +0.36 ms there for 243 MB of RSS. Another thread may still be scanning the org
    let go of: its reads fault the pages in again (the map is read-only), nothing else.
    """
    global _pages_kept
    with _pages_kept_lock:
        before = _pages_kept() if _pages_kept is not None else None
        _pages_kept = weakref.ref(rows)
    if before is not None and before is not rows:
        before.release()


def _by_codes(count: int, k: int) -> bool:
    """Whether an exact scan over *count* allowed rows ranks them by int8 codes first (`CODES_FROM`)."""
    return count > max(_shortlist(k), CODES_FROM)


def _quantize_into(rows: np.ndarray, codes: np.ndarray, scales: np.ndarray) -> None:
    """Write int8 codes of *rows* into *codes* and each row's unit into *scales*.

    Each row is scaled on its own so its largest component is ±127 (``row ≈ codes *
    scale``): a per-row unit keeps the precision of rows whose components are all small
    (MiniLM's rarely pass 0.3). All-zero rows get zero codes and a zero unit.
    """
    for start in range(0, len(rows), _ADD_CHUNK):
        stop = min(start + _ADD_CHUNK, len(rows))
        part = rows[start:stop]
        unit = np.max(np.abs(part), axis=1) / 127.0
        scales[start:stop] = unit
        codes[start:stop] = np.rint(part / np.where(unit > 0, unit, 1.0)[:, None])


def _query_code(q: np.ndarray) -> np.ndarray:
    """The int8 code of a query vector, made as a row's is (`_quantize_into`); its unit is left
    out of every score alike, so it does not change their order."""
    code, unit = np.empty((1, len(q)), dtype=np.int8), np.empty(1, dtype=np.float32)
    _quantize_into(q[None], code, unit)
    row: np.ndarray = code[0]
    return row


def _code_dot(codes: np.ndarray, qc: np.ndarray) -> np.ndarray:
    """Integer dot products of int8 *codes* rows with the query's code, as float32.

    simsimd's SIMD kernel reads the codes in place (a map's pages included); numpy has
    no int8 kernel and would first widen every row.
    """
    if len(codes) == 0:
        return np.zeros(0, dtype=np.float32)
    dots: np.ndarray = np.asarray(simsimd.cdist(qc[None], codes, metric="dot", out_dtype="float32"))[0]
    return dots


def _load_npy(path: Path, shape: tuple[int, ...], dtype: type) -> np.ndarray | None:
    """A saved array of *shape* and *dtype*: mapped read-only where it can be, else read; None if it is not one."""
    rows = map_npy(path, shape, np.dtype(dtype).str)
    if rows is None:
        rows = np.load(path, allow_pickle=False)
    return rows if rows.dtype == dtype and rows.shape == shape else None


def _codes_of_file(path: Path, n: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Int8 codes and units of the float32 rows saved at *path*, read through a map of their own
    that is let go of afterwards (the partition's own map stays untouched: no resident pages)."""
    codes = np.empty((n, dim), dtype=np.int8)
    scales = np.empty(n, dtype=np.float32)
    if n:
        rows = np.load(path, mmap_mode="r", allow_pickle=False)
        _quantize_into(rows, codes, scales)
        del rows
    return codes, scales


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    if k < len(scores):
        idx = np.argpartition(-scores, k - 1)[:k]
    else:
        idx = np.arange(len(scores))
    return idx[np.argsort(-scores[idx], kind="stable")]


def _query(query: np.ndarray, dim: int) -> np.ndarray:
    q = np.asarray(query, dtype=np.float32)
    if q.ndim == 2 and q.shape[0] == 1:
        q = q[0]
    if q.shape != (dim,):
        raise ValidationError(f"query must have shape ({dim},), got {q.shape}", field="query")
    if not np.all(np.isfinite(q)):
        raise ValidationError("query has NaN or infinite values", field="query")
    norm = float(np.linalg.norm(q))
    return q / norm if norm > 0 else q


def _rows(vectors: np.ndarray, n: int, dim: int) -> np.ndarray:
    """*vectors* as float32 rows (no copy when they already are), checked; not yet unit length."""
    try:
        rows = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"vectors are not a numeric array: {exc}", field="vectors") from exc
    if rows.shape != (n, dim):
        raise ValidationError(f"vectors must have shape ({n}, {dim}), got {rows.shape}", field="vectors")
    for start in range(0, n, _ADD_CHUNK):
        if not np.all(np.isfinite(rows[start : start + _ADD_CHUNK])):
            raise ValidationError("vectors have NaN or infinite values", field="vectors")
    return rows


def _unit_rows_into(rows: np.ndarray, pick: np.ndarray | None, out: np.ndarray) -> None:
    """Write ``rows[pick]`` (all rows if None) scaled to unit length into *out*, a chunk at a time.

    All-zero rows stay zero.
    """
    for start in range(0, len(out), _ADD_CHUNK):
        stop = min(start + _ADD_CHUNK, len(out))
        part = rows[start:stop] if pick is None else rows[pick[start:stop]]
        norms = np.linalg.norm(part, axis=1, keepdims=True)
        np.divide(part, np.where(norms > 0, norms, 1.0), out=out[start:stop])


def _check_positive(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a positive int, got {value!r}", field=name)


def _check_k(k: object) -> None:
    _check_positive(k, "k")


def _check_org(org: object) -> None:
    if not isinstance(org, str) or not _NAME.match(org):
        raise ValidationError(f"org must be a short name of letters, digits and _.:@- (got {org!r})", field="org")


def _saved_graph_count(path: Path) -> int:
    """How many elements a saved hnswlib graph holds (its header: offsetLevel0, max_elements, count)."""
    with open(path, "rb") as fh:
        count: int = struct.unpack("<3Q", fh.read(24))[2]
    return count


#: How much of a file `_crc32` sums before its pages leave this process's RSS (a multiple of the page size).
CRC_WINDOW = 1 << 22


def _crc32(path: Path) -> int:
    """``zlib.crc32`` of the file's bytes, summed through a read-only map.

    A partition's load checks its files' CRCs, and a restarted process's first recall of
    an org pays for it (13 ms of a 69 ms first recall at 100k records, ~10 MB of files).
    Summing the map needs no copy into Python bytes: a 7.7 MB ``vectors.npy`` in 2.2-2.4
    ms against 5.7-6.3 ms read in 4 MB chunks. Each window's pages are let go once summed
    (``MADV_DONTNEED``; the page cache keeps them), so a big file never sits whole in the
    process's RSS.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return 0  # an empty file cannot be mapped; its CRC is that of no bytes
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as view:
            crc = 0
            for start in range(0, size, CRC_WINDOW):
                crc = zlib.crc32(view[start : start + CRC_WINDOW], crc)
                if hasattr(mmap, "MADV_DONTNEED"):
                    mapped.madvise(mmap.MADV_DONTNEED, start, min(CRC_WINDOW, size - start))
            return crc


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    except OSError as exc:
        raise StoreError(f"cannot delete index files at {path}: {exc}") from exc


__all__ = [
    "DEFAULT_EF",
    "EXACT_FLOOR",
    "EXACT_SCALE",
    "IndexTag",
    "Partition",
    "PartitionedIndex",
    "exact_scan_limit",
    "exact_search",
    "model_slug",
]
