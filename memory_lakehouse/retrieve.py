"""Recall: filter by visibility, then rank (vector + BM25, fused), then budget.

The visibility query (`query.Visibility`) is the only definition of what may be
returned. Ranking never widens it:

1. **filter** — the visible rows of the principal at the basis (scope, status,
   supersession, valid time, expiry, ledger, kinds, subject, filters) become an
   allowed set;
2. **vector** — the org's HNSW partition is searched *with the allowed set inside the
   walk* (`index.Partition.search`; an exact scan when the set is small), so a
   selective filter never starves top-k; visible rows the partition does not hold yet
   (written since it was built) are embedded and scored exactly, then added —
   read-your-writes without waiting for a rebuild;
3. **lexical** — BM25 (`lexical.Bm25`: bm25s; Snowball-stemmed words, English stopwords dropped) over
   the org's rows, masked to the allowed set; rows newer than the BM25 build are ranked
   by a small BM25 of their own;
4. **fuse** — a convex combination, over the union of both lists, of the cosine
   similarity and the *lexical coverage* (the share of the query's IDF mass a row's
   words match), each on its theoretical [0, 1] scale (`fuse_scores`, weight
   `FUSION_ALPHA`); one hit per slot (the visibility query already returns one row per
   lineage);
5. **budget** — `context` packs the best hits into a token budget, one line each with
   its kind, valid time, source and evidence.

The index is a derived cache (`index.PartitionedIndex` under ``<store>/_index``),
tagged with the table versions it reflects and rebuilt from the store on demand.
"""

from __future__ import annotations

import hashlib
import heapq
import re
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, KeysView, Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import ValidationError
from .index import IndexTag, Partition, PartitionedIndex, exact_search
from .lexical import Bm25
from .query import Visibility
from .conversation import UNINDEXED_KINDS
from .records import KINDS, SPECS, Envelope, record_from_row
from .scope import Principal
from .time import Basis

#: Reciprocal-rank fusion constant (Cormack et al. 2009): merges the lists of one signal.
RRF_K = 60
#: Weight of lexical coverage in the fused score, (1 - a) * cosine01 + a * coverage (both
#: on their theoretical [0, 1] scale). Chosen on the *dev* half of the labelled retrieval
#: fixture's first batch only (``python -m evals.retrieval --tune``; the split is by a hash
#: of the query id); the *test* half and the second batch are held out. See
#: docs/design-notes.md, "Hybrid fusion".
FUSION_ALPHA = 0.1
#: Rows embedded and added to a partition at a time when building or catching up.
EMBED_CHUNK = 4096
#: Persist a caught-up partition once this many rows were added since its last save.
SAVE_EVERY = 512
#: Rebuild an org's BM25 model once rows newer than it exceed this share of it.
BM25_STALE_SHARE = 0.1
#: Kinds the index holds (working-memory notes included; recall chooses what to ask for).
INDEXED_KINDS = tuple(k for k in KINDS if k not in UNINDEXED_KINDS)
#: The ranked lists recall can fuse; recall uses both unless told otherwise.
SIGNALS: tuple[str, ...] = ("vector", "bm25")


@dataclass(frozen=True)
class Hit:
    """One recalled memory, with its score and the reasons it was returned.

    ``score`` is what the hits were ordered by: the fused score in [0, 1] when both
    signals rank (`fuse_scores`), the cosine mapped to [0, 1] for vectors alone, the BM25
    score for BM25 alone, 0 for a visible row no signal reached. ``why`` names the scope,
    each signal's rank and raw score, and the lexical coverage.
    """

    record: Envelope
    score: float
    why: tuple[str, ...]
    kind: str
    text: str

    @property
    def record_id(self) -> str:
        return self.record.record_id or ""


def fuse_scores(cosine: float, coverage: float, alpha: float = FUSION_ALPHA) -> float:
    """Convex combination of a cosine similarity and a lexical coverage, both mapped to [0, 1].

    Each signal is normalised by its *theoretical* range — cosine from [-1, 1], coverage
    already in [0, 1] — not by the best score of the query's list, so a query whose best
    lexical match covers a tenth of it cannot count that match as a perfect one (Bruch
    et al. 2022, "An Analysis of Fusion Functions for Hybrid Retrieval": convex
    combination of theoretically normalised scores over reciprocal-rank fusion).

    >>> fuse_scores(1.0, 1.0), fuse_scores(-1.0, 0.0), fuse_scores(0.0, 1.0, alpha=0.5)
    (1.0, 0.0, 0.75)
    """
    return (1.0 - alpha) * (cosine + 1.0) / 2.0 + alpha * coverage


@dataclass
class _OrgState:
    """What the retriever keeps per org: its index partition and its BM25 model."""

    partition: Optional[Partition] = None
    unsaved: int = 0
    versions: Optional[dict[str, int]] = None  # lake versions the partition has caught up to
    bm25: Optional[Bm25] = None
    bm25_ids: Optional[dict[str, int]] = None  # record_id -> position in the BM25 corpus
    bm25_rids: Optional[list[str]] = None  # position in the BM25 corpus -> record_id
    bm25_versions: Optional[dict[str, int]] = None


class Retriever:
    """Keeps the derived search structures in step with the store and runs recall."""

    #: Weight of lexical coverage in hybrid fusion (`fuse_scores`); an instance may override it
    #: (the retrieval eval's ``--tune`` sweep does, on the dev split).
    fusion_alpha: float = FUSION_ALPHA

    def __init__(self, vis: Visibility, embedder: Any, *, index_root: Optional[Path] = None) -> None:
        self.vis = vis
        self.lake = vis.lake
        self._embedder = embedder
        self._index_root = index_root
        self._index: Optional[PartitionedIndex] = None
        self._orgs: dict[str, _OrgState] = {}
        self._lock = threading.RLock()
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._visible_memo: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # ids of cached visibility results -> candidates
        self._mask_memo: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # (candidates, partition, size) -> allowed mask

    # ------------------------------------------------------------------ plumbing

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            from .embed import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    @property
    def index(self) -> PartitionedIndex:
        if self._index is None:
            root = self._index_root
            if root is None:
                if self.lake.is_local:
                    root = Path(self.lake.root) / "_index"
                else:  # object stores: the derived index is a local cache keyed by the store URI
                    # (shared by this machine's processes; other machines keep their own, and a
                    # purge made elsewhere reaches it when it is next loaded: see `_state`)
                    digest = hashlib.sha256(self.lake.root.encode()).hexdigest()[:16]
                    root = Path(tempfile.gettempdir()) / "memlake-index" / digest
            self._index = PartitionedIndex(root, self.embedder.name, int(self.embedder.dim))
        return self._index

    def trace(self, message: str) -> None:
        self.vis.trace(message)

    def embed_query(self, text: str) -> np.ndarray:
        """Query embeddings are cached (LRU); `clear_caches` empties it (purge does)."""
        with self._lock:
            hit = self._query_cache.get(text)
            if hit is not None:
                self._query_cache.move_to_end(text)
                return hit
        vec: np.ndarray = self.embedder.embed([text])[0]
        with self._lock:
            self._query_cache[text] = vec
            while len(self._query_cache) > 1024:
                self._query_cache.popitem(last=False)
        return vec

    def clear_caches(self) -> None:
        with self._lock:
            self._query_cache.clear()
            self._visible_memo.clear()
            self._mask_memo.clear()
            self._orgs.clear()
            self._index = None

    # ------------------------------------------------------------------ sync with the store

    def _versions(self) -> dict[str, int]:
        return {kind: self.lake.views[kind].version for kind in INDEXED_KINDS}

    def _org_rows(self, org: str, columns: Sequence[str]) -> list[tuple[str, pa.Table]]:
        """Active rows of *org* per kind, known to the store (what the index may hold)."""
        out = []
        for kind in INDEXED_KINDS:
            rows = self.lake.known_rows(kind)
            mask = pc.and_(pc.equal(rows.column("org"), org), pc.equal(rows.column("status"), "active"))
            picked = rows.filter(mask)
            if "search_text" in columns:
                picked = picked.append_column("search_text", SPECS[kind].search_text(picked))
            out.append((kind, picked.select(list(columns))))
        return out

    def _state(self, org: str) -> _OrgState:
        with self._lock:
            state = self._orgs.get(org)
            if state is None:
                state = self._orgs[org] = _OrgState()
                part = self.index.partition(org)
                if part is not None:
                    state.partition = part
                    tag = self.index.tag(org)
                    state.versions = dict(tag.versions) if tag else None
                    if not self.lake.is_local and self._holds_erased_rows(org, part, state.versions):
                        self.rebuild([org])  # reuses the surviving rows' vectors
                        state = self._orgs[org]
            return state

    def _holds_erased_rows(self, org: str, part: Partition, versions: Optional[Mapping[str, int]]) -> bool:
        """Whether a partition loaded from this machine's cache holds rows the store no longer
        has: a purge made by another machine, which could not reach this cache."""
        if versions is None or any(v > self.lake.views[t].version for t, v in versions.items()
                                   if t in self.lake.views):
            return False  # built from a newer snapshot than ours: nothing to judge by yet
        held = 0
        for kind in INDEXED_KINDS:
            rows = self.lake.all_rows(kind)
            ids = rows.filter(pc.equal(rows.column("org"), org)).column("record_id").to_pylist()
            held += sum(rid in part for rid in ids)
        if held < len(part):
            self.trace(f"index {org}: the cached partition holds {len(part) - held} row(s) erased since; rebuilding")
            return True
        return False

    def sync(self, org: str) -> _OrgState:
        """Catch the org's partition up with rows committed since it was built or saved."""
        state = self._state(org)
        current = self._versions()
        if state.partition is not None and state.versions == current:
            return state
        with self._lock:
            part = state.partition or Partition.create(int(self.embedder.dim))
            new_ids: list[str] = []
            new_texts: list[str] = []
            for _, rows in self._org_rows(org, ["record_id", "search_text"]):
                for rid, text in zip(rows.column("record_id").to_pylist(), rows.column("search_text").to_pylist()):
                    if rid not in part:
                        new_ids.append(rid)
                        new_texts.append(text)
            if new_ids:
                started = time.perf_counter()
                self._embed_into(part, new_ids, new_texts)
                self.trace(f"index {org}: added {len(new_ids)} row(s) newer than the partition "
                           f"in {(time.perf_counter() - started) * 1000:.1f} ms")
                state.unsaved += len(new_ids)
            state.partition = part
            state.versions = current
            if state.unsaved >= SAVE_EVERY or (new_ids and len(part) == len(new_ids)):
                self.save(org)
            return state

    def save(self, org: str) -> None:
        """Persist the org's partition with the versions it reflects."""
        state = self._state(org)
        if state.partition is None or state.versions is None:
            return
        self.index.put(org, state.partition, IndexTag(self.embedder.name, int(self.embedder.dim),
                                                      dict(state.versions), len(state.partition)))
        state.unsaved = 0

    def flush(self) -> None:
        for org, state in list(self._orgs.items()):
            if state.unsaved:
                self.save(org)

    def rebuild(self, orgs: Sequence[str], *, drop: Mapping[str, set[str]] = {}) -> list[str]:
        """Rebuild partitions from the store's rows and delete the old files.

        Vectors of rows that are still in the store are reused from the old partition
        (they are derived from those rows and the same model); erased rows' vectors are
        not carried over — ``drop`` names them — and the old files go (a mark-deleted
        vector would still sit in them).
        """
        done = []
        for org in orgs:
            with self._lock:
                old = self._state(org).partition
                keep_ids: list[str] = []
                texts: list[str] = []
                for _, rows in self._org_rows(org, ["record_id", "search_text"]):
                    keep_ids += rows.column("record_id").to_pylist()
                    texts += rows.column("search_text").to_pylist()
                gone = set(drop.get(org, ()))
                fresh = Partition.create(int(self.embedder.dim), capacity=max(1024, len(keep_ids)))
                reuse = [keep_ids[i] for i, rid in enumerate(keep_ids)
                         if old is not None and rid in old and rid not in gone]
                for start in range(0, len(reuse), EMBED_CHUNK):
                    chunk = reuse[start:start + EMBED_CHUNK]
                    fresh.add(chunk, old.vectors_of(chunk))  # type: ignore[union-attr]  # reuse is empty without old
                # the old partition is not needed any more: its files stay until `replace`,
                # so a failure below leaves the org readable, and its graph is not kept
                # alive next to the new one's while the rest is embedded
                old = None
                self._orgs.pop(org, None)
                self.index.evict(org)
                missing = [i for i, rid in enumerate(keep_ids) if rid not in fresh]
                if missing:
                    self._embed_into(fresh, [keep_ids[i] for i in missing], [texts[i] for i in missing])
                versions = self._versions()
                self.index.replace(org, fresh, IndexTag(self.embedder.name, int(self.embedder.dim), versions,
                                                        len(fresh)))
                self._orgs[org] = _OrgState(partition=fresh, versions=versions)
                self.trace(f"index {org}: rebuilt from the store ({len(fresh)} rows, {len(reuse)} vectors reused)")
                done.append(org)
        return done

    def _embed_into(self, part: Partition, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Embed and add rows `EMBED_CHUNK` at a time: one big org never holds all its vectors twice."""
        for start in range(0, len(ids), EMBED_CHUNK):
            part.add(ids[start:start + EMBED_CHUNK], self.embedder.embed(texts[start:start + EMBED_CHUNK]))

    def known_orgs(self) -> list[str]:
        orgs = set(self.index.orgs())
        for kind in INDEXED_KINDS:
            orgs.update(pc.unique(self.lake.known_rows(kind).column("org")).to_pylist())
        return sorted(orgs)

    # ------------------------------------------------------------------ lexical

    def _bm25(self, org: str) -> _OrgState:
        state = self._state(org)
        current = self._versions()
        stale = state.bm25 is None
        if not stale and state.bm25_versions != current:
            known = sum(r.num_rows for _, r in self._org_rows(org, ["record_id"]))
            stale = known - len(state.bm25_ids or {}) > BM25_STALE_SHARE * max(1, len(state.bm25_ids or {}))
        if stale:
            ids: list[str] = []
            texts: list[str] = []
            for _, rows in self._org_rows(org, ["record_id", "search_text"]):
                ids += rows.column("record_id").to_pylist()
                texts += rows.column("search_text").to_pylist()
            state.bm25 = Bm25(texts)
            state.bm25_ids = {rid: i for i, rid in enumerate(ids)}
            state.bm25_rids = ids
            state.bm25_versions = current
            self.trace(f"bm25 {org}: built over {len(ids)} row(s)")
        return state

    # ------------------------------------------------------------------ recall

    def recall(self, query: str, principal: Principal, basis: Basis, *, kinds: Sequence[str],
               subject: Optional[str], k: int, filters: Optional[Mapping[str, Any]],
               signals: Sequence[str] = SIGNALS) -> list[Hit]:
        """Visible rows of the principal at the basis, ranked by the fused *signals*.

        *signals* picks which ranked lists are fused — ``("vector", "bm25")`` by default;
        one alone is for evaluation and diagnosis (how much each contributes). The
        visibility filter is the same whatever the signals: only the ranking changes.
        """
        unknown = [s for s in signals if s not in SIGNALS]
        if unknown or not signals or isinstance(signals, str):
            raise ValidationError(f"signals must be a non-empty subset of {SIGNALS}, got {signals!r}",
                                  field="signals")
        org = principal.scope.org
        candidates = self._visible(principal, basis, kinds=kinds, subject=subject, filters=filters)
        if not candidates:
            return []
        allowed = candidates.keys()  # set-like: membership, iteration, len
        depth = max(k * 4, 20)
        lists: dict[str, list[tuple[str, float]]] = {}

        # vector: HNSW with the allowed set inside the walk, plus exact scores for rows
        # the partition does not hold yet (sync adds them first: read-your-writes)
        if "vector" in signals:
            lists["vector"] = self._vector_list(org, query, allowed, candidates, depth)
        coverage: Optional[Callable[[str], float]] = None
        if "bm25" in signals:
            lexical, coverage = self._bm25_lists(org, query, allowed, candidates, depth)
            lists.update(lexical)
        self.trace("ranked lists: " + ", ".join(f"{name}={len(items)}" for name, items in lists.items()))
        if "vector" in lists and coverage is not None:
            return self._fuse(org, query, lists, candidates, k, coverage)
        return self._rank(lists, candidates, k)

    def _vector_list(self, org: str, query: str, allowed: "KeysView[str]", candidates: Mapping[str, tuple[str, int]],
                     depth: int) -> list[tuple[str, float]]:
        state = self.sync(org)
        qvec = self.embed_query(query)
        part = state.partition
        assert part is not None
        mask_key = (id(candidates), id(part), len(part))
        cached = self._mask_memo.get(mask_key)
        if cached is not None and cached[0] is candidates:
            mask = cached[1]
        else:
            mask = part.mask(allowed)  # one id->label pass; reused by the walk, and by later reads
            self._mask_memo.clear()
            self._mask_memo[mask_key] = (candidates, mask)
        in_index = int(np.count_nonzero(mask))
        vec_hits = part.search(qvec, min(depth, in_index), allowed=mask, trace=self.trace) if in_index else []
        outside = [rid for rid in allowed if rid not in part] if in_index < len(allowed) else []
        if outside:  # visible but not indexed (e.g. an index another process is still building)
            texts = self._texts(outside, candidates)
            vec_hits += exact_search(qvec, self.embedder.embed(texts), outside, min(depth, len(outside)))
            self.trace(f"vector: {len(outside)} visible row(s) outside the index scored exactly")
        return sorted(vec_hits, key=lambda p: -p[1])[:depth]

    def _bm25_lists(self, org: str, query: str, allowed: "KeysView[str]", candidates: Mapping[str, tuple[str, int]],
                    depth: int) -> tuple[dict[str, list[tuple[str, float]]], Callable[[str], float]]:
        """BM25 over the org, masked to the allowed set (newer rows ranked apart), and each
        visible row's lexical coverage of the query (weighed by the org model's IDF)."""
        lists: dict[str, list[tuple[str, float]]] = {}
        bstate = self._bm25(org)
        assert bstate.bm25 is not None and bstate.bm25_ids is not None and bstate.bm25_rids is not None
        scores = bstate.bm25.scores(query)
        hits: list[tuple[str, float]] = []
        matched = np.flatnonzero(scores)  # usually few: walk them best first, keep the visible ones
        for i in matched[np.argsort(-scores[matched], kind="stable")]:
            rid = bstate.bm25_rids[int(i)]
            if rid in allowed:
                hits.append((rid, float(scores[i])))
                if len(hits) == depth:
                    break
        lists["bm25"] = hits
        newer = [rid for rid in allowed if rid not in bstate.bm25_ids] \
            if len(allowed) > len(bstate.bm25_ids) or bstate.bm25_versions != self._versions() else []
        newer_coverage: dict[str, float] = {}
        if newer:
            small = Bm25(self._texts(newer, candidates))
            fresh = small.scores(query)
            lists["bm25-new"] = sorted(((rid, float(s)) for rid, s in zip(newer, fresh) if s > 0),
                                       key=lambda p: -p[1])[:depth]
            newer_coverage = dict(zip(newer, small.coverage(query, idf_from=bstate.bm25).tolist()))
        covered = bstate.bm25.coverage(query)
        ids = bstate.bm25_ids

        def coverage(rid: str) -> float:
            pos = ids.get(rid)
            return float(covered[pos]) if pos is not None else newer_coverage.get(rid, 0.0)

        return lists, coverage

    def _visible(self, principal: Principal, basis: Basis, *, kinds: Sequence[str], subject: Optional[str],
                 filters: Optional[Mapping[str, Any]]) -> dict[str, tuple[str, int]]:
        """record_id -> (kind, position in the kind's snapshot) of every visible candidate."""
        out: dict[str, tuple[str, int]] = {}
        known = set().union(*(SPECS[kind].schema.names for kind in kinds))
        unknown = sorted(set(filters or {}) - known)
        if unknown:
            raise ValidationError(f"no kind in {list(kinds)} has column(s) {unknown} to filter on", field="filters")
        tables = []
        for kind in kinds:
            names = set(SPECS[kind].schema.names)
            kind_filters = {c: v for c, v in (filters or {}).items() if c in names}
            if filters and len(kind_filters) < len(filters):
                continue  # a filter on a column this kind lacks excludes the kind
            tables.append((kind, self.vis.rows(kind, principal, basis, subject=subject, filters=kind_filters,
                                               columns=["record_id", "_row"])))
        # the visibility cache hands back the same result objects while nothing changed:
        # reuse what was built from them (the memo keeps them alive, so ids are not reused)
        key = tuple(id(t) for _, t in tables)
        with self._lock:
            memo = self._visible_memo.get(key)
            if memo is not None and all(a is b for (_, a), (_, b) in zip(memo[0], tables)):
                found: dict[str, tuple[str, int]] = memo[1]
                return found
        for kind, rows in tables:
            out.update(zip(rows.column("record_id").to_pylist(),
                           zip([kind] * rows.num_rows, rows.column("_row").to_pylist())))
        with self._lock:
            self._visible_memo[key] = (tables, out)
            while len(self._visible_memo) > 64:
                self._visible_memo.pop(next(iter(self._visible_memo)))
        return out

    def _texts(self, rids: Sequence[str], candidates: Mapping[str, tuple[str, int]]) -> list[str]:
        """Search text of a few candidates, built from the snapshot on demand."""
        out: dict[str, str] = {}
        by_kind: dict[str, list[str]] = {}
        for rid in rids:
            by_kind.setdefault(candidates[rid][0], []).append(rid)
        for kind, ids in by_kind.items():
            rows = self.lake.all_rows(kind).take(pa.array([candidates[r][1] for r in ids], pa.int64()))
            out.update(zip(ids, SPECS[kind].search_text(rows).to_pylist()))
        return [out[r] for r in rids]

    def _rank(self, lists: Mapping[str, list[tuple[str, float]]], candidates: Mapping[str, tuple[str, int]],
              k: int) -> list[Hit]:
        """One signal: its lists merged by reciprocal rank (k=60; one list keeps its own order).

        BM25 ranks rows newer than the org's model in a list of its own, whose scores come
        from another model: ranks, not scores, merge them.
        """
        fused: dict[str, float] = {}
        why: dict[str, list[str]] = {}
        for name, items in lists.items():
            for rank, (rid, score) in enumerate(items, start=1):
                fused[rid] = fused.get(rid, 0.0) + 1.0 / (RRF_K + rank)
                why.setdefault(rid, []).append(f"{name} #{rank} ({score:.3f})")
        return self._top(fused, why, candidates, k)

    def _fuse(self, org: str, query: str, lists: Mapping[str, list[tuple[str, float]]],
              candidates: Mapping[str, tuple[str, int]], k: int, coverage: Callable[[str], float]) -> list[Hit]:
        """Both signals: every row either list ranked, by `fuse_scores` of its cosine and coverage.

        A row only BM25 reached gets its exact cosine (from the partition, or embedded if
        the partition does not hold it), so both signals score every row of the pool.
        """
        why: dict[str, list[str]] = {}
        for name, items in lists.items():
            for rank, (rid, score) in enumerate(items, start=1):
                why.setdefault(rid, []).append(f"{name} #{rank} ({score:.3f})")
        cosine = {rid: score for rid, score in lists["vector"]}
        missing = [rid for rid in why if rid not in cosine]
        if missing:
            cosine.update(self._cosines(org, query, missing, candidates))
        alpha = float(self.fusion_alpha)
        fused: dict[str, float] = {}
        for rid, parts in why.items():
            cov = coverage(rid)
            fused[rid] = fuse_scores(cosine[rid], cov, alpha)
            parts.append(f"cosine {cosine[rid]:.3f}, lexical coverage {cov:.2f}")
        self.trace(f"fused {len(fused)} row(s): (1 - {alpha:g}) * cosine01 + {alpha:g} * lexical coverage")
        return self._top(fused, why, candidates, k)

    def _cosines(self, org: str, query: str, rids: Sequence[str],
                 candidates: Mapping[str, tuple[str, int]]) -> dict[str, float]:
        """Exact cosine of the query with each of a few visible rows."""
        part = self.sync(org).partition
        q = np.asarray(self.embed_query(query), dtype=np.float32)
        q = q / (float(np.linalg.norm(q)) or 1.0)
        inside = [rid for rid in rids if part is not None and rid in part]
        outside = [rid for rid in rids if part is None or rid not in part]
        out: dict[str, float] = {}
        for ids, vectors in ((inside, part.vectors_of(inside) if inside and part is not None else None),
                             (outside, self.embedder.embed(self._texts(outside, candidates)) if outside else None)):
            if vectors is None:
                continue
            rows = np.asarray(vectors, dtype=np.float32)
            norms = np.linalg.norm(rows, axis=1)
            out.update(zip(ids, (rows @ q / np.where(norms > 0, norms, 1.0)).tolist()))
        return out

    def _top(self, fused: Mapping[str, float], why: Mapping[str, list[str]], candidates: Mapping[str, tuple[str, int]],
             k: int) -> list[Hit]:
        ranked = heapq.nsmallest(k, fused, key=lambda rid: (-fused[rid], rid))
        if len(ranked) < k:  # visible rows no signal reached still count: k results when k are visible
            ranked += heapq.nsmallest(k - len(ranked), (rid for rid in candidates if rid not in fused))
        return self._hits([(rid, fused.get(rid, 0.0), why.get(rid, ["no signal; visible in scope"]))
                           for rid in ranked], candidates)

    def _hits(self, picked: Sequence[tuple[str, float, list[str]]],
              candidates: Mapping[str, tuple[str, int]]) -> list[Hit]:
        """Typed records for the winners, taken from the snapshot positions the query returned."""
        by_kind: dict[str, list[str]] = {}
        for rid, _, _ in picked:
            by_kind.setdefault(candidates[rid][0], []).append(rid)
        rows: dict[str, dict[str, Any]] = {}
        for kind, ids in by_kind.items():
            table = self.lake.all_rows(kind).take(pa.array([candidates[r][1] for r in ids], pa.int64()))
            table = table.append_column("search_text", SPECS[kind].search_text(table))
            rows.update(zip(ids, table.to_pylist()))
        hits = []
        for rid, score, sig in picked:
            row = rows[rid]
            kind = candidates[rid][0]
            hits.append(Hit(record_from_row(kind, row), score, describe_why(row, "; ".join(sig)), kind,
                            row["search_text"]))
        return hits


def describe_why(row: Mapping[str, Any], signal: str) -> tuple[str, ...]:
    why = ["scope " + "/".join(row[level] for level in ("org", "division", "team", "actor") if row.get(level)),
           signal]
    if row.get("supersedes"):
        why.append(f"supersedes {row['supersedes']}" + (f" ({row['reason']})" if row.get("reason") else ""))
    return tuple(why)


def context_block(hits: Sequence[Hit], *, budget_tokens: int, count_tokens: Callable[[str], int],
                  header: str = "Memory (most relevant first; each line: kind, valid time, source, evidence):") -> str:
    """Pack hits into a prompt block within *budget_tokens*, most relevant first."""
    lines = [header]
    used = count_tokens(header)
    for hit in hits:
        r = hit.record
        start, end = r.valid_interval
        valid = f"valid {start:%Y-%m-%d}" + (f"..{end:%Y-%m-%d}" if end else "") if start else ""
        meta = "; ".join(p for p in (hit.kind, valid, f"source {r.source}",
                                     f"evidence {r.evidence}" if r.evidence else "") if p)
        line = f"- {hit.text} [{meta}]"
        cost = count_tokens(line) + 1
        if used + cost > budget_tokens:
            continue  # a shorter, less relevant line may still fit
        lines.append(line)
        used += cost
    return "\n".join(lines) if len(lines) > 1 else ""


def _version_key(version: str) -> tuple[Any, ...]:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"\d+|[A-Za-z]+", version))


def version_in_range(version: str, version_from: Optional[str], version_to: Optional[str]) -> bool:
    """Whether *version* lies in [version_from, version_to] (numeric-aware: v2.10 > v2.9)."""
    key = _version_key(version)
    if version_from is not None and key < _version_key(version_from):
        return False
    if version_to is not None and key > _version_key(version_to):
        return False
    return True
