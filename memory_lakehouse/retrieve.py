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
   the org's rows, masked to the allowed set; rows newer than the BM25 build are scored
   under the org model's statistics (`lexical.Bm25.scores_of`) in a list of their own;
4. **fuse** — the union of both lists is ordered by `ranking.Ranking` (the store's,
   set on ``ml.open(ranking=...)``, or the call's): by default a convex combination of
   the cosine similarity and the *lexical coverage* (the share of the query's IDF mass
   a row's words match), each on its theoretical [0, 1] scale (`ranking.fuse_scores`);
   rows of an *episode* (a conversation session's turns) weigh the lexical match more
   and take evidence from their episode's best rows (`ranking.with_context`); one hit
   per slot (the visibility query already returns one row per lineage);
5. **budget** — `context` packs the best hits into a token budget, one line each with
   its kind, valid time, source and evidence.

The index is a derived cache (`index.PartitionedIndex` under ``<store>/_index``),
tagged with the table versions it reflects and rebuilt from the store on demand.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import re
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .background import Worker
from .candidates import Candidates, OrgRows, PositionHints, RowsView, indexable_mask
from .codes import CodeTable
from .context import Context, ContextItem
from .conversation import UNINDEXED_KINDS
from .errors import ValidationError
from .index import IndexTag, Partition, PartitionedIndex, exact_search
from .lake import column_to_pylist, rows_to_pylist, take_rows
from .lexical import Bm25, best_of
from .progress import Progress, log
from .query import Visibility
from .ranking import (
    CONTEXT_DEPTH,
    LEXICAL_WEIGHT,
    RRF_K,
    EpisodeGroups,
    Ranking,
    best_neighbours,
    episode_groups,
    episode_keys,
    fuse,
    in_named_month,
    learned_features,
    learned_scores,
    named_months,
    names_speaker,
    with_context,
)
from .ranking import SIGNALS as SIGNALS  # their old home: still importable here
from .ranking import fuse_scores as fuse_scores
from .records import KINDS, SPECS, Envelope, record_columns, record_from_row
from .scope import Principal
from .time import Basis

#: The fused score's lexical weight (kept under its old name; see `ranking.LEXICAL_WEIGHT`).
FUSION_ALPHA = LEXICAL_WEIGHT
#: Rows embedded and added to a partition at a time when building or catching up.
EMBED_CHUNK = 4096
#: Rows embedded at a time when a build is long enough to show progress (a bar moves every second or so).
PROGRESS_CHUNK = 128
#: Persist a caught-up partition once this many rows were added since its last save.
SAVE_EVERY = 512
#: A tail of an org's rows (appended since a cursor) is kept for the next caller up to this many rows
#: (`Retriever._appended`): a write's few rows, not a catch-up after a bulk load.
TAIL_ROWS = 512
#: Rebuild an org's BM25 model once rows newer than it exceed this share of it.
BM25_STALE_SHARE = 0.1
#: At most this many rows' search texts are kept per org between BM25 builds (`_OrgState.recent`);
#: a 5k-row org's model is rebuilt after 500 newer rows (`BM25_STALE_SHARE`), so it holds fewer.
RECENT_TEXTS = 4096
#: Kinds the index holds (working-memory notes included; recall chooses what to ask for).
INDEXED_KINDS = tuple(k for k in KINDS if k not in UNINDEXED_KINDS)


#: One line of a hit's ``why``: a format string and its arguments. Ranking notes a few for
#: every row of the pool (~50); only the k winners' are ever formatted.
Reason = tuple[str, tuple[Any, ...]]
Reasons = dict[str, list[Reason]]
_NO_SIGNAL: list[Reason] = [("no signal; visible in scope", ())]


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


@dataclass
class _OrgState:
    """What the retriever keeps per org: its index partition and its BM25 model."""

    partition: Partition | None = None
    unsaved: int = 0
    versions: dict[str, int] | None = None  # lake versions the partition has caught up to
    bm25: Bm25 | None = None
    bm25_ids: CodeTable | None = None  # record_id <-> its document (position in the BM25 corpus)
    bm25_versions: dict[str, int] | None = None
    #: the episodes of the BM25 model's documents, counted at its build (`_episodes`), and their
    #: key -> size: what a row written since is looked up in
    episodes: EpisodeGroups | None = None
    episode_sizes: dict[Any, int] | None = None
    #: kind -> (snapshot epoch, rows of the snapshot) the partition has been caught up over
    index_cursor: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the same for counting the org's rows (``known_rows``), which tells when BM25 is stale
    count_cursor: dict[str, tuple[int, int]] = field(default_factory=dict)
    known_rows: dict[str, int] = field(default_factory=dict)  # kind -> rows counted over count_cursor
    rows: OrgRows | None = None  # the org's rows' positions -> partition labels, BM25 documents
    #: search texts of the rows catch-ups of the partition added (record_id -> text), kept until
    #: the BM25 model is next built: until then recall scores those rows apart (`Bm25.scores_of`)
    #: on every read, and taking their texts from the snapshot again cost ~0.3 ms a read. They
    #: go with the partition's vectors: a forget or purge drops the org's whole state.
    recent: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Located:
    """Where one recall's visible rows sit: per kind, their partition labels and BM25 documents.

    Taken together under the retriever's lock, and kept for the recall: a write's catch-up or
    another recall in another thread may build the org a new BM25 model meanwhile, whose
    documents are numbered afresh."""

    rows: RowsView
    partition: Partition | None
    bm25: _OrgState | None
    model: Bm25 | None  # the BM25 model the documents are of
    model_ids: CodeTable | None  # its documents' record ids
    episodes: EpisodeGroups | None  # its documents' episodes
    where: dict[str, tuple[np.ndarray, np.ndarray]]


class Retriever:
    """Keeps the derived search structures in step with the store and runs recall."""

    def __init__(
        self, vis: Visibility, embedder: Any, *, index_root: Path | None = None, ranking: Ranking | None = None
    ) -> None:
        if ranking is not None and not isinstance(ranking, Ranking):
            raise ValidationError(f"ranking must be a Ranking, got {type(ranking).__name__}", field="ranking")
        #: The store's ranking settings: what `recall` uses when it is given none.
        self.ranking = ranking or Ranking()
        self.vis = vis
        self.lake = vis.lake
        self._embedder = embedder
        self._index_root = index_root
        self._index: PartitionedIndex | None = None
        self._orgs: dict[str, _OrgState] = {}
        #: where each org's position map holds a snapshot position (`candidates.PositionHints`), shared by every org
        self._position_hints = PositionHints()
        #: (org, kind) -> the last short tail `_appended` read, and the snapshot (epoch, start, rows) it was read from
        self._tails: dict[tuple[str, str], tuple[tuple[int, int, int], pa.Table]] = {}
        self._lock = threading.RLock()
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        #: the background build (`warm_up`): a daemon, since a later recall redoes what it leaves
        self._warming: Worker[bool] = Worker("memlake-index-warm-up", self._next_warm_up, self._warm, daemon=True)
        self._warm_asked = False

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
            self._orgs.clear()
            self._tails.clear()
            self._index = None

    # ------------------------------------------------------------------ sync with the store

    def _versions(self) -> dict[str, int]:
        return {kind: self.lake.views[kind].version for kind in INDEXED_KINDS}

    def _org_rows(
        self,
        org: str,
        columns: Sequence[str] | Callable[[str], Sequence[str]],
        cursor: dict[str, tuple[int, int]] | None = None,
    ) -> list[tuple[str, pa.Table]]:
        """Active rows of *org* per kind, known to the store (what the index may hold); a kind
        with no rows to read is left out.

        *columns*: the columns to keep, or a function of the kind that names them. With a
        *cursor* (kind -> snapshot epoch and rows already looked at), only rows appended
        since are read, and the cursor moves past them: positions in a snapshot do not
        move within an epoch, so a caught-up partition reads a write's few rows instead
        of filtering every row of the kind again (~15 ms at 100k). A rewrite (new epoch)
        reads the kind whole. Rows of an incomplete transaction are skipped: when it
        completes, the snapshot starts a new epoch (`Lake._complete_pending`).
        """
        out = []
        for kind in INDEXED_KINDS:
            epoch, rows = snapshot = self.lake.snapshot(kind)  # together: a write may append meanwhile
            start = 0
            if cursor is not None:
                seen = cursor.get(kind)
                start = seen[1] if seen is not None and seen[0] == epoch else 0
                cursor[kind] = (epoch, rows.num_rows)
            if start >= rows.num_rows:
                continue  # nothing appended since (or an empty table): no rows of this kind to give
            names = columns(kind) if callable(columns) else columns
            out.append((kind, self._appended(org, kind, start, names, snapshot)))
        return out

    def _appended(
        self, org: str, kind: str, start: int, columns: Sequence[str], snapshot: tuple[int, pa.Table] | None = None
    ) -> pa.Table:
        """*columns* of *org*'s indexable rows of *kind* (`indexable_mask`) from snapshot position
        *start* on; ``_row`` names their positions and ``search_text`` their search text.

        The first recall after a write asks this of the same few appended rows three times:
        the index's catch-up (`sync`), the BM25 model's count of newer rows (`_bm25`) and the
        position map (`candidates.OrgRows.catch_up`); each filtered the tail again (reading it
        once: ~0.3 ms less in that recall at 100k). A tail (*start* > 0) of at most `TAIL_ROWS` rows is read once with
        every column those ask for (`_TAIL_COLUMNS`) and kept per (org, kind) for the snapshot
        it was read from: positions do not move within an epoch, and a snapshot of an epoch
        only grows, so (epoch, start, rows) names what it holds. *snapshot* is the (epoch,
        rows) the caller's cursor counts (`Lake.snapshot`; read now if not given): the tail
        ends where those rows end, not where a write landed since has taken them.
        """
        names = list(columns)
        epoch, rows = snapshot or self.lake.snapshot(kind)
        key = (epoch, start, rows.num_rows)
        shared = start > 0 and set(names) <= set(_TAIL_COLUMNS)
        if shared:
            with self._lock:
                kept = self._tails.get((org, kind))
            if kept is not None and kept[0] == key:
                return kept[1].select(names)
        tail = rows.slice(start) if start else rows
        wanted = list(_TAIL_COLUMNS) if shared else names
        # the columns asked for (and what the search text reads), then the filter: it costs per column
        read = [n for n in wanted if n not in ("search_text", "_row")]
        if "search_text" in wanted:
            read += [c for c in SPECS[kind].text_columns if c not in read]
        mask = indexable_mask(tail, org)
        picked = tail.select(read).filter(mask)
        if "search_text" in wanted:
            picked = picked.append_column("search_text", SPECS[kind].search_text(picked))
        if "_row" in wanted:
            at = np.flatnonzero(mask.to_numpy(zero_copy_only=False)) + start
            picked = picked.append_column("_row", pa.array(at, pa.int64()))
        picked = picked.select(wanted)
        if shared and picked.num_rows <= TAIL_ROWS:
            with self._lock:
                self._tails[(org, kind)] = (key, picked)
        return picked.select(names)

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

    def gone_rows(self, org: str, part: Partition) -> int:
        """How many rows *part* (the org's partition) holds that the store's snapshots no longer
        have: erased by a purge it did not see, here or on another machine."""
        held = 0
        for kind in INDEXED_KINDS:
            rows = self.lake.all_rows(kind)
            ids = rows.filter(pc.equal(rows.column("org"), org)).column("record_id").combine_chunks()
            held += int(np.count_nonzero(part.find(ids) >= 0))
        return len(part) - held

    def _holds_erased_rows(self, org: str, part: Partition, versions: Mapping[str, int] | None) -> bool:
        """Whether a partition loaded from this machine's cache holds rows the store no longer
        has: a purge made by another machine, which could not reach this cache."""
        if versions is None or any(v > self.lake.views[t].version for t, v in versions.items() if t in self.lake.views):
            return False  # built from a newer snapshot than ours: nothing to judge by yet
        gone = self.gone_rows(org, part)
        if gone:
            self.trace(f"index {org}: the cached partition holds {gone} row(s) erased since; rebuilding")
            return True
        return False

    def warm_up(self) -> None:
        """Catch every org's partition up in a background thread (``ml.open(index="background")``).

        Called after writes: the embedding runs while the caller goes on writing, so the
        first recall does not build the whole index. A recall that needs a partition the
        thread is still building waits for it, and says so.
        """
        with self._warming.lock:
            self._warm_asked = True
            self._warming.kick()

    def _next_warm_up(self) -> bool | None:
        """One more pass when writes asked for one since the last began (called under the worker's lock)."""
        asked, self._warm_asked = self._warm_asked, False
        return True if asked else None

    def _warm(self, _: bool) -> None:
        try:
            for org in self.known_orgs():
                # a read: another thread's rewrite cannot move the snapshot under the catch-up's cursors
                self.lake.run_read(functools.partial(self.sync, org))
        except Exception as exc:  # a background build must never take the process down: recall retries
            log.warning("background index build failed (recall will build what it needs): %s", exc)

    def wait_for_warm_up(self) -> None:
        """Let a background build finish (`close` does, before saving)."""
        self._warming.wait()

    def sync(self, org: str) -> _OrgState:
        """Catch the org's partition up with rows committed since it was built or saved."""
        state = self._state(org)
        # rows counted before the versions are read: when those are still the partition's, no
        # commit landed since and the counts are of its rows (a write in another thread may append)
        counted = None if state.index_cursor else {kind: self.lake.snapshot(kind) for kind in INDEXED_KINDS}
        current = self._versions()
        if state.partition is not None and state.versions == current:
            if counted is not None:  # loaded from disk at the snapshot's versions: it holds every row so far
                state.index_cursor = {kind: (epoch, rows.num_rows) for kind, (epoch, rows) in counted.items()}
            return state
        with self._lock:
            part = state.partition or Partition.create(int(self.embedder.dim))
            ids, texts = _in_scope_order(self._org_rows(org, _LAYOUT_COLUMNS, state.index_cursor))
            fresh = np.flatnonzero(part.find(ids) < 0).tolist()
            new_ids = [ids[i] for i in fresh]
            new_texts = [texts[i] for i in fresh]
            if new_ids:
                started = time.perf_counter()
                self._embed_into(part, new_ids, new_texts, org=org, catch_up=state.partition is not None)
                if state.partition is not None:
                    state.recent.update(zip(new_ids, new_texts, strict=True))
                    if len(state.recent) > RECENT_TEXTS:
                        state.recent.clear()  # many rows since the model: it is rebuilt soon (BM25_STALE_SHARE)
                self.trace(
                    f"index {org}: added {len(new_ids)} row(s) newer than the partition "
                    f"in {(time.perf_counter() - started) * 1000:.1f} ms"
                )
                state.unsaved += len(new_ids)
            state.partition = part
            state.versions = current
            if state.unsaved >= SAVE_EVERY or (new_ids and len(part) == len(new_ids)):
                self.save(org)
            return state

    def save(self, org: str, *, let_go: bool = False) -> None:
        """Persist the org's partition with the versions it reflects (*let_go*: see `flush`)."""
        state = self._state(org)
        if state.partition is None or state.versions is None:
            return
        self.index.put(
            org,
            state.partition,
            IndexTag(self.embedder.name, int(self.embedder.dim), dict(state.versions), len(state.partition)),
            map_vectors=let_go,
        )
        state.unsaved = 0

    def flush(self, *, let_go: bool = False) -> None:
        """Save every partition with unsaved rows.

        Saving a partition whose graph is on disk reads the graph into memory to add the
        new rows; *let_go* (the store is closing) lets go of it and of the float32 copy
        again once saved, so saving every org holds one graph at a time: closing the 100k
        tenants store after writes to its 20 orgs peaked 209 MB above its serving peak
        when the graphs stayed (~10 MB an org of 5k rows), 12 MB with them let go.
        """
        for org, state in list(self._orgs.items()):
            if state.unsaved:
                self.save(org, let_go=let_go)

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
                cursor: dict[str, tuple[int, int]] = {}
                keep_ids, texts = _in_scope_order(self._org_rows(org, _LAYOUT_COLUMNS, cursor))
                gone = set(drop.get(org, ()))
                fresh = Partition.create(int(self.embedder.dim), capacity=max(1024, len(keep_ids)))
                self._orgs.pop(org, None)
                self.index.evict(org)
                # the old partition's files stay until `replace`, so a failure below leaves the org readable
                reused = self._embed_into(fresh, keep_ids, texts, org=org, reuse=old, drop=gone)
                old = None
                versions = self._versions()
                self.index.replace(
                    org, fresh, IndexTag(self.embedder.name, int(self.embedder.dim), versions, len(fresh))
                )
                self._orgs[org] = _OrgState(partition=fresh, versions=versions, index_cursor=cursor)
                self.trace(f"index {org}: rebuilt from the store ({len(fresh)} rows, {reused} vectors reused)")
                done.append(org)
        return done

    def _embed_into(
        self,
        part: Partition,
        ids: Sequence[str],
        texts: Sequence[str],
        *,
        org: str = "",
        catch_up: bool = False,
        reuse: Partition | None = None,
        drop: Collection[str] = (),
    ) -> int:
        """Add rows to *part* in the order given, `PROGRESS_CHUNK` at a time: one big org never
        holds all its vectors twice, and a long build or catch-up (rows written since the
        partition was saved) shows its progress (`progress.Progress`: a bar on a terminal,
        log lines otherwise) instead of looking like a hang.

        A row *reuse* holds (and *drop* does not name) keeps its vector from there: it is
        derived from the same row by the same model. The others are embedded. Returns how
        many vectors were reused.
        """
        in_reuse = [False] * len(ids) if reuse is None else (reuse.find(ids) >= 0).tolist()
        held = [was and rid not in drop for rid, was in zip(ids, in_reuse, strict=True)]
        verb = "catching up index" if catch_up else "indexing"
        label = f"{verb} {org} ({self.embedder.name})" if org else f"{verb} ({self.embedder.name})"
        with Progress(label, total=len(ids) - sum(held)) as progress:
            step = PROGRESS_CHUNK if progress.shown else EMBED_CHUNK
            for start in range(0, len(ids), step):
                chunk = range(start, min(start + step, len(ids)))
                kept = [i for i in chunk if held[i]]
                embed = [i for i in chunk if not held[i]]
                vectors = np.empty((len(chunk), int(self.embedder.dim)), dtype=np.float32)
                if kept and reuse is not None:
                    vectors[[i - start for i in kept]] = reuse.vectors_of([ids[i] for i in kept])
                if embed:
                    vectors[[i - start for i in embed]] = self.embedder.embed([texts[i] for i in embed])
                part.add(ids[chunk.start : chunk.stop], vectors)
                progress.advance(len(embed))
        return sum(held)

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
            for kind in INDEXED_KINDS:  # a rewritten snapshot (compaction, purge) is counted afresh
                if state.count_cursor.get(kind, (None, 0))[0] != self.lake.views[kind].epoch:
                    state.known_rows[kind] = 0
            for kind, rows in self._org_rows(org, ["record_id"], state.count_cursor):
                state.known_rows[kind] = state.known_rows.get(kind, 0) + rows.num_rows
            built = len(state.bm25_ids) if state.bm25_ids is not None else 0
            stale = sum(state.known_rows.values()) - built > BM25_STALE_SHARE * max(1, built)
        if stale:
            ids: list[pa.Array] = []
            texts: list[str] = []
            state.count_cursor = {}
            state.known_rows = {}
            # each document's episode, read with its text: groups of one row are left out (`_episodes`
            # counts a key it lacks as one): in an org of facts most rows are one, and their keys
            # held ~190 bytes a row (~19 MB on the 100k tenants store, by tracemalloc)
            groups: list[EpisodeGroups] = []
            for kind, rows in self._org_rows(
                org, lambda kind: ["record_id", "search_text", *_episode_columns(kind)], state.count_cursor
            ):
                state.known_rows[kind] = rows.num_rows
                ids += rows.column("record_id").cast(pa.string()).chunks
                texts += rows.column("search_text").to_pylist()
                groups.append(episode_groups(kind, rows))  # a key names its kind: no two kinds share one
            model = Bm25(texts)
            episodes = _joined(groups)
            # as a dict of the ids and a list back they held 4.8 MB on the 100k tenants store (tracemalloc)
            model_ids = CodeTable.of(pa.chunked_array(ids, pa.string()).combine_chunks())
            with self._lock:  # the model and its ids together, as a recall takes them (`_locate`)
                state.bm25, state.bm25_ids = model, model_ids
                state.episodes, state.episode_sizes = episodes, episodes.counts()
                state.bm25_versions = current
                state.recent.clear()  # the model holds them now
            self.trace(f"bm25 {org}: built over {len(texts)} row(s)")
        return state

    # ------------------------------------------------------------------ recall

    def recall(
        self,
        query: str,
        principal: Principal,
        basis: Basis,
        *,
        kinds: Sequence[str],
        subject: str | None,
        k: int,
        filters: Mapping[str, Any] | None,
        signals: Sequence[str] | None = None,
        ranking: Ranking | None = None,
    ) -> list[Hit]:
        """Visible rows of the principal at the basis, ordered by *ranking* (the store's by default).

        *signals* overrides the ranking's: ``("vector", "bm25")`` fuses both; one alone is
        for evaluation and diagnosis (how much each contributes: no fusion, no context).
        The visibility filter is the same whatever the ranking: only the order changes.
        """
        if ranking is not None and not isinstance(ranking, Ranking):
            raise ValidationError(f"ranking must be a Ranking, got {type(ranking).__name__}", field="ranking")
        ranking = ranking or self.ranking
        if self._warming.running and not self._warming.is_current():
            log.info("recall waits for the background index build")  # its progress bar shows on a terminal
            self.trace("index: waiting for the background build")
        if signals is not None:
            ranking = ranking.replace(signals=signals)
        org = principal.scope.org
        candidates = self._visible(principal, basis, kinds=kinds, subject=subject, filters=filters)
        if not candidates:
            return []
        depth = max(k * 4, 20)
        lists: dict[str, list[tuple[str, float]]] = {}
        located = self._locate(org, candidates, vector="vector" in ranking.signals, bm25="bm25" in ranking.signals)

        # vector: HNSW with the allowed set inside the walk, plus exact scores for rows
        # the partition does not hold yet (sync adds them first: read-your-writes)
        if "vector" in ranking.signals:
            lists["vector"] = self._vector_list(org, query, located, candidates, depth)
        coverage: Callable[[Sequence[str], np.ndarray], dict[str, float]] | None = None
        if "bm25" in ranking.signals:
            # where the org holds episodes, BM25 is read deeper: an episode's other turns reach the pool
            lex_depth = depth
            if ranking.fused and ranking.context_weight > 0:
                known = self._orgs.get(org)  # the model's episode count; built once if there is none yet
                episodes = (known if known is not None and known.bm25 is not None else self._bm25(org)).episodes
                if episodes is not None and episodes.largest >= ranking.episode_rows:
                    lex_depth = max(depth, CONTEXT_DEPTH)
            lexical, coverage = self._bm25_lists(org, query, located, candidates, lex_depth)
            lists.update(lexical)
        self.trace("ranked lists: " + ", ".join(f"{name}={len(items)}" for name, items in lists.items()))
        if "vector" in lists and coverage is not None:
            return self._fuse(org, query, lists, candidates, located, k, coverage, ranking)
        return self._rank(lists, candidates, k)

    def _locate(self, org: str, candidates: Candidates, *, vector: bool, bm25: bool) -> _Located:
        """The visible rows' partition labels and BM25 documents (`candidates.OrgRows`), per kind.

        Catches the partition up first (`sync`: read-your-writes) and builds the BM25 model
        if there is none, as the signals need them.
        """
        # a signal not asked for keeps what the org has: labels of rows its partition does not
        # hold yet are mapped once a recall that searches vectors has caught it up
        part = self.sync(org).partition if vector else self._state(org).partition
        bstate = self._bm25(org) if bm25 else self._state(org)
        with self._lock:
            rows = self._rows_caught_up(org, part, bstate)
            view = rows.view()
            where = {kind: view.locate(kind, positions) for kind, positions in candidates.positions.items()}
            return _Located(view, part, bstate, bstate.bm25, bstate.bm25_ids, bstate.episodes, where)

    def _rows_caught_up(self, org: str, part: Partition | None, bstate: _OrgState) -> OrgRows:
        """The org's position map (`candidates.OrgRows`) in step with the snapshots, *part* and *bstate*'s model."""
        state = self._state(org)
        if state.rows is None:
            state.rows = OrgRows(INDEXED_KINDS, self._position_hints)
        state.rows.catch_up(
            self.lake,
            lambda kind, start, snapshot: self._appended(org, kind, start, ("_row", "record_id"), snapshot),
            part,
            part if part is not None else CodeTable(),
            bstate.bm25,
            bstate.bm25_ids if bstate.bm25_ids is not None else CodeTable(),
        )
        return state.rows

    def loaded(self, org: str) -> bool:
        """Whether a recall loaded *org*: its partition and BM25 model are in memory (`catch_up`)."""
        known = self._orgs.get(org)
        return known is not None and known.partition is not None and known.bm25 is not None

    def catch_up(self, org: str) -> bool:
        """After a write (`catch_up.after_write`): what the org's next recall does first, when a
        recall has loaded the org: its partition takes the rows written since (`sync`: embedded
        and added), its BM25 row count moves on (`_bm25`, which rebuilds a stale model as a
        recall would), and its position map takes their positions. An org no recall has
        loaded is left alone (building it is a recall's: a write never builds an index).
        Returns whether it caught up."""
        if not self.loaded(org):
            return False
        part = self.sync(org).partition
        bstate = self._bm25(org)
        with self._lock:
            self._rows_caught_up(org, part, bstate)
        return True

    def _vector_list(
        self, org: str, query: str, located: _Located, candidates: Candidates, depth: int
    ) -> list[tuple[str, float]]:
        part = located.partition
        assert part is not None
        qvec = self.embed_query(query)
        mask = np.zeros(len(part), dtype=bool)
        outside: list[str] = []
        for kind, (labels, _) in located.where.items():
            mask[labels[labels >= 0]] = True
            if (labels < 0).any():  # visible but not indexed (e.g. an index another process is still building)
                outside += candidates.ids(kind, candidates.positions[kind][labels < 0])
        in_index = int(np.count_nonzero(mask))
        found = part.search_labels(qvec, min(depth, in_index), allowed=mask, trace=self.trace) if in_index else []
        labels = np.array([label for label, _ in found], dtype=np.int64)
        rids = part.ids_at(labels)
        candidates.place_each(rids, located.rows.at_labels(labels))
        vec_hits = [(rid, score) for rid, (_, score) in zip(rids, found, strict=True)]
        if outside:
            texts = self._texts(outside, candidates)
            vec_hits += exact_search(qvec, self.embedder.embed(texts), outside, min(depth, len(outside)))
            self.trace(f"vector: {len(outside)} visible row(s) outside the index scored exactly")
        return sorted(vec_hits, key=lambda p: -p[1])[:depth]

    def _bm25_lists(
        self, org: str, query: str, located: _Located, candidates: Candidates, depth: int
    ) -> tuple[dict[str, list[tuple[str, float]]], Callable[[Sequence[str], np.ndarray], dict[str, float]]]:
        """BM25 over the org, masked to the visible rows (newer rows ranked apart), and the
        lexical coverage of the query (weighed by the org model's IDF) of the visible rows
        asked for, given with their documents (-1: not in the model): the pool's, computed for
        them alone (`Bm25.coverage_at`)."""
        lists: dict[str, list[tuple[str, float]]] = {}
        bstate, model, model_ids = located.bm25, located.model, located.model_ids
        assert bstate is not None and model is not None and model_ids is not None
        visible = np.zeros(model.size, dtype=bool)
        newer: list[str] = []
        for kind, (_, docs) in located.where.items():
            visible[docs[docs >= 0]] = True
            if (docs < 0).any():  # visible rows written since the org's model was built
                newer += candidates.ids(kind, candidates.positions[kind][docs < 0])
        scores = model.scores(query)
        best = best_of(scores, visible, depth)
        rids = model_ids.values_at(best)
        candidates.place_each(rids, located.rows.at_docs(best))
        lists["bm25"] = list(zip(rids, scores[best].tolist(), strict=True))
        newer_coverage: dict[str, float] = {}
        if newer:  # scored under the org model's statistics (`Bm25.scores_of`), not a model of their own
            texts = self._texts(newer, candidates, known=bstate.recent)
            fresh = model.scores_of(query, texts)
            lists["bm25-new"] = sorted(
                ((rid, float(s)) for rid, s in zip(newer, fresh, strict=True) if s > 0), key=lambda p: -p[1]
            )[:depth]
            newer_coverage = dict(zip(newer, model.coverage_of(query, texts).tolist(), strict=True))

        def coverage(rids: Sequence[str], docs: np.ndarray) -> dict[str, float]:
            held = docs >= 0
            covered = iter(model.coverage_at(query, docs[held]).tolist())
            return {
                rid: next(covered) if in_model else newer_coverage.get(rid, 0.0)
                for rid, in_model in zip(rids, held.tolist(), strict=True)
            }

        return lists, coverage

    def _visible(
        self,
        principal: Principal,
        basis: Basis,
        *,
        kinds: Sequence[str],
        subject: str | None,
        filters: Mapping[str, Any] | None,
    ) -> Candidates:
        """Every visible candidate, as positions in each kind's snapshot (`candidates.Candidates`)."""
        known = set().union(*(SPECS[kind].schema.names for kind in kinds)) if filters else set()
        unknown = sorted(set(filters or {}) - known)
        if unknown:
            raise ValidationError(f"no kind in {list(kinds)} has column(s) {unknown} to filter on", field="filters")
        positions: dict[str, np.ndarray] = {}
        org = principal.scope.org
        holding = self.vis.holds_rows(kinds, org)
        for kind in kinds:
            kind_filters: dict[str, Any] = {}
            if filters:
                names = SPECS[kind].schema.names
                kind_filters = {c: v for c, v in filters.items() if c in names}
                if len(kind_filters) < len(filters):
                    continue  # a filter on a column this kind lacks excludes the kind
            if kind not in holding:
                if kind_filters:
                    self.vis.check_filters(kind, kind_filters)  # refused as a read would refuse it
                continue  # nothing of the kind can be visible (~20 µs a kind through the read)
            positions[kind] = self.vis.positions(kind, principal, basis, subject=subject, filters=kind_filters)
        return Candidates(self.lake, positions)

    def _texts(
        self, rids: Sequence[str], candidates: Mapping[str, tuple[str, int]], *, known: Mapping[str, str] = {}
    ) -> list[str]:
        """Search text of a few candidates: from *known* (texts already derived from the same
        rows), otherwise built from the snapshot on demand."""
        out: dict[str, str] = {}
        for rid in rids:  # one lookup each: *known* may be cleared meanwhile by another thread's BM25 build
            text = known.get(rid)
            if text is not None:
                out[rid] = text
        for kind, ids in _by_kind([rid for rid in rids if rid not in out], candidates).items():
            rows = self.lake.all_rows(kind)
            # take only what the text reads: a take over every column of a many-chunk snapshot costs ms
            rows = rows.select(list(SPECS[kind].text_columns))
            rows = take_rows(rows, np.array([candidates[r][1] for r in ids], np.int64))
            out.update(zip(ids, SPECS[kind].search_text(rows).to_pylist(), strict=True))
        return [out[r] for r in rids]

    def _rank(
        self, lists: Mapping[str, list[tuple[str, float]]], candidates: Mapping[str, tuple[str, int]], k: int
    ) -> list[Hit]:
        """One signal: its lists merged by reciprocal rank (k=60; one list keeps its own order).

        BM25 ranks rows newer than the org's model in a list of its own (scored under the
        model's statistics, `Bm25.scores_of`); ranks merge the two lists.
        """
        fused: dict[str, float] = {}
        why: Reasons = {}
        for name, items in lists.items():
            for rank, (rid, score) in enumerate(items, start=1):
                fused[rid] = fused.get(rid, 0.0) + 1.0 / (RRF_K + rank)
                why.setdefault(rid, []).append(("{} #{} ({:.3f})", (name, rank, score)))
        return self._top(fused, why, candidates, k)

    def _fuse(
        self,
        org: str,
        query: str,
        lists: Mapping[str, list[tuple[str, float]]],
        candidates: Candidates,
        located: _Located,
        k: int,
        coverage: Callable[[Sequence[str], np.ndarray], dict[str, float]],
        ranking: Ranking,
    ) -> list[Hit]:
        """Both signals: every row either list ranked, scored by `ranking.fuse`, then `ranking.with_context`.

        A row only BM25 reached gets its exact cosine (from the partition, or embedded if
        the partition does not hold it), so both signals score every row of the pool.
        """
        why: Reasons = {}
        ranks: dict[str, dict[str, int]] = {"vector": {}, "bm25": {}}
        bm25: dict[str, float] = {}
        for name, items in lists.items():
            signal = "bm25" if name.startswith("bm25") else name
            for rank, (rid, score) in enumerate(items, start=1):
                why.setdefault(rid, []).append(("{} #{} ({:.3f})", (name, rank, score)))
                ranks[signal].setdefault(rid, rank)
                if signal == "bm25":
                    bm25.setdefault(rid, score)
        ids = list(why)
        # the pool's partition labels and BM25 documents, through each row's (kind, position)
        labels, docs = located.rows.locate_each(candidates.where(ids))
        cosine = {rid: score for rid, score in lists["vector"]}
        missing = [i for i, rid in enumerate(ids) if rid not in cosine]
        if missing:
            at = np.array(missing, dtype=np.int64)
            cosine.update(self._cosines(query, [ids[i] for i in missing], labels[at], candidates, located.partition))
        covered = coverage(ids, docs)
        episodes = self._episodes(org, ids, candidates, ranking.episode_rows, docs=docs, located=located)
        fused = fuse(ranking, ids, cosine, covered, bm25, ranks, {rid: e is not None for rid, e in episodes.items()})
        for rid in ids:
            why[rid].append(("cosine {:.3f}, lexical coverage {:.2f}", (cosine[rid], covered[rid])))
        in_episodes = sum(e is not None for e in episodes.values())
        self.trace(
            f"fused {len(fused)} row(s): {ranking.fusion}, lexical weight {ranking.lexical_weight:g} "
            f"({ranking.episode_lexical_weight:g} for the {in_episodes} in episodes)"
        )
        own = fused
        if ranking.context_weight > 0 and in_episodes:
            fused = with_context(fused, episodes, weight=ranking.context_weight, top=ranking.context_top)
            for rid in ids:
                if episodes[rid] is not None:
                    why[rid].append(("fused {:.3f}, {:.3f} with its episode's evidence", (own[rid], fused[rid])))
            self.trace(
                f"context: {len({e for e in episodes.values() if e is not None})} episode(s), "
                f"weight {ranking.context_weight:g}, top {ranking.context_top}"
            )
        named = named_months(query)
        dated: list[str] = []
        if named[0] and (ranking.date_weight > 0 or ranking.fusion == "learned"):
            dated = [rid for rid, start in self._valid_from(ids, candidates).items() if in_named_month(start, named)]
        if ranking.date_weight > 0 and named[0]:
            fused = dict(fused)
            for rid in dated:
                fused[rid] += ranking.date_weight
                why[rid].append(("+{:g}: valid from a month the query names", (ranking.date_weight,)))
            self.trace(f"named months {sorted(named[0])}: {len(dated)} row(s) valid from one of them")
        if ranking.fusion == "learned" and in_episodes:
            fused = self._learned(
                query, ids, candidates, ranking, cosine, covered, bm25, own, fused, episodes, dated, why
            )
        return self._top(fused, why, candidates, k)

    def _learned(
        self,
        query: str,
        ids: list[str],
        candidates: Mapping[str, tuple[str, int]],
        ranking: Ranking,
        cosine: Mapping[str, float],
        covered: Mapping[str, float],
        bm25: Mapping[str, float],
        own: Mapping[str, float],
        baseline: Mapping[str, float],
        episodes: Mapping[str, Any],
        dated: Sequence[str],
        why: Reasons,
    ) -> dict[str, float]:
        """Rows of episodes rescored by the learned model (`ranking.learned_features`, `learned_scores`)
        over the pool; other rows keep *baseline*. A neighbour is the row next to it in the
        snapshot, in its episode: an episode's rows are written in order."""
        keys = [episodes[rid] for rid in ids]
        fused = np.array([own[rid] for rid in ids])
        base = np.array([baseline[rid] for rid in ids])
        inside = [i for i, key in enumerate(keys) if key is not None]
        texts = dict(zip((ids[i] for i in inside), self._texts([ids[i] for i in inside], candidates), strict=True))
        on_month = set(dated)
        features = learned_features(
            cosine=np.array([cosine[rid] for rid in ids]),
            coverage=np.array([covered[rid] for rid in ids]),
            bm25=np.array([bm25.get(rid, 0.0) for rid in ids]),
            fused=fused,
            baseline=base,
            episode=keys,
            neighbour=best_neighbours(fused, keys, [candidates[rid][1] for rid in ids]),
            named=np.array([rid in texts and names_speaker(query, texts[rid]) for rid in ids]),
            dated=np.array([rid in on_month for rid in ids]),
            top=ranking.context_top,
        )
        rows = np.array(inside)
        scores = learned_scores(features[rows], ranking.weights, base[rows])
        out = dict(baseline)
        for i, score in zip(inside, scores.tolist(), strict=True):
            out[ids[i]] = score
            why[ids[i]].append(("learned {:.3f} (default {:.3f})", (score, base[i])))
        self.trace(f"learned: {len(inside)} row(s) of episodes rescored over {len(ids)}")
        return out

    def _valid_from(self, rids: Sequence[str], candidates: Mapping[str, tuple[str, int]]) -> dict[str, Any]:
        """Each row's ``valid_from`` (a datetime), read from the snapshot positions of the pool."""
        out: dict[str, Any] = {}
        for _, ids, rows in self._pool_rows(rids, candidates, lambda kind: ["valid_from"]):
            out.update(zip(ids, column_to_pylist(rows.column("valid_from")), strict=True))
        return out

    def _pool_rows(
        self,
        rids: Sequence[str],
        candidates: Mapping[str, tuple[str, int]],
        columns: Callable[[str], Sequence[str]],
    ) -> Iterator[tuple[str, list[str], pa.Table]]:
        """Per kind: the pool's rows of that kind, and *columns(kind)* of each, taken from the snapshot."""
        for kind, ids in _by_kind(rids, candidates).items():
            positions = pa.array([candidates[r][1] for r in ids], pa.int64())
            yield kind, ids, take_rows(self.lake.all_rows(kind).select(list(columns(kind))), positions)

    def _episodes(
        self,
        org: str,
        rids: Sequence[str],
        candidates: Mapping[str, tuple[str, int]],
        min_rows: int,
        *,
        docs: np.ndarray | None = None,
        located: _Located | None = None,
    ) -> dict[str, Any]:
        """Each row's episode (`ranking.episode_keys`), or None when its group holds fewer than
        *min_rows* rows of the org (as counted at the org's BM25 build; a row with a key is a
        group of at least one, itself, written since or not).

        A row the BM25 model holds (*docs*: its document in *located*'s model, -1 none) is
        looked up in the build's groups; the others' keys are read from the snapshot (the
        pool's rows of the tenants workload: ~0.5 ms a recall). With *min_rows* 1, a group
        of one is an episode too, and the build kept no key of those: every key is read.
        """
        state = self._orgs.get(org)
        sizes = state.episode_sizes if state is not None else None
        # the groups of the model the recall located its rows in (a build since is another's)
        episodes = located.episodes if located is not None else state.episodes if state is not None else None
        if sizes is None or episodes is None or episodes.largest < min_rows:
            return dict.fromkeys(rids)
        out: dict[str, Any] = {}
        if docs is not None and located is not None and min_rows > 1:
            rest = []
            groups = np.where(docs >= 0, episodes.of_row[np.maximum(docs, 0)], -2).tolist()
            for rid, group in zip(rids, groups, strict=True):
                if group == -2:
                    rest.append(rid)  # written since the build
                else:
                    out[rid] = episodes.keys[group] if group >= 0 and episodes.sizes[group] >= min_rows else None
            rids = rest
        for kind, ids, rows in self._pool_rows(rids, candidates, _episode_columns):
            out.update(
                (rid, key if key is not None and sizes.get(key, 1) >= min_rows else None)
                for rid, key in zip(ids, episode_keys(kind, rows), strict=True)
            )
        return out

    def _cosines(
        self, query: str, rids: Sequence[str], labels: np.ndarray, candidates: Candidates, part: Partition | None
    ) -> dict[str, float]:
        """Exact cosine of the query with each of a few visible rows: from *part*'s vectors
        where it holds the row (at its label, -1: not held), embedded where not."""
        q = np.asarray(self.embed_query(query), dtype=np.float32)
        q = q / (float(np.linalg.norm(q)) or 1.0)
        held = [False] * len(rids) if part is None else (labels >= 0).tolist()
        inside = [rid for rid, h in zip(rids, held, strict=True) if h]
        outside = [rid for rid, h in zip(rids, held, strict=True) if not h]
        out: dict[str, float] = {}
        for ids, vectors in (
            (inside, part.vectors_at(labels[labels >= 0]) if inside and part is not None else None),
            (outside, self.embedder.embed(self._texts(outside, candidates)) if outside else None),
        ):
            if vectors is None:
                continue
            rows = np.asarray(vectors, dtype=np.float32)
            norms = np.linalg.norm(rows, axis=1)
            out.update(zip(ids, (rows @ q / np.where(norms > 0, norms, 1.0)).tolist(), strict=True))
        return out

    def _top(
        self,
        fused: Mapping[str, float],
        why: Reasons,
        candidates: Mapping[str, tuple[str, int]],
        k: int,
    ) -> list[Hit]:
        ranked = heapq.nsmallest(k, fused, key=lambda rid: (-fused[rid], rid))
        if len(ranked) < k:  # visible rows no signal reached still count: k results when k are visible
            ranked += heapq.nsmallest(k - len(ranked), (rid for rid in candidates if rid not in fused))
        return self._hits([(rid, fused.get(rid, 0.0), why.get(rid, _NO_SIGNAL)) for rid in ranked], candidates)

    def _hits(
        self, picked: Sequence[tuple[str, float, list[Reason]]], candidates: Mapping[str, tuple[str, int]]
    ) -> list[Hit]:
        """Typed records for the winners, taken from the snapshot positions the query returned."""
        rows: dict[str, dict[str, Any]] = {}
        for kind, ids in _by_kind([rid for rid, _, _ in picked], candidates).items():
            table = self.lake.all_rows(kind).select(list(record_columns(kind)))
            table = take_rows(table, np.array([candidates[r][1] for r in ids], np.int64))
            rows.update(zip(ids, rows_to_pylist(table), strict=True))
        hits = []
        for rid, score, sig in picked:
            row = rows[rid]
            kind = candidates[rid][0]
            hits.append(
                Hit(
                    record_from_row(kind, row),
                    score,
                    describe_why(row, "; ".join(text.format(*args) for text, args in sig)),
                    kind,
                    SPECS[kind].search_text_of(row),
                )
            )
        return hits


#: What an org's rows are laid out by in its partition (`_in_scope_order`).
_LAYOUT_COLUMNS = ("record_id", "search_text", "division", "team", "actor")
#: What `Retriever._appended` reads of a short tail once for every caller: the layout and the positions.
_TAIL_COLUMNS = ("_row", *_LAYOUT_COLUMNS)


def _in_scope_order(parts: Sequence[tuple[str, pa.Table]]) -> tuple[list[str], list[str]]:
    """Record ids and search texts of an org's rows (`Retriever._org_rows` with `_LAYOUT_COLUMNS`),
    the org-wide rows first, then each division's, each team's and each actor's, each scope's
    rows in snapshot order.

    Why: a reader sees rows of its org, its division, its team and its own. Laid out this
    way they lie in a few runs of the partition, and an exact scan reads a run in place
    at a fraction of what gathering its rows costs (`index._Scan`). This is layout only:
    which rows a reader sees is the visibility rule's alone (`query.Visibility`). Rows a
    later write adds go after, in the order written, until the next rebuild.
    """
    if not parts:
        return [], []
    if len(parts) == 1 and parts[0][1].num_rows <= 1:  # a write's one row: nothing to order (~50 µs a sort)
        return parts[0][1].column("record_id").to_pylist(), parts[0][1].column("search_text").to_pylist()
    rows = pa.concat_tables([table for _, table in parts])
    keys = [(level, "ascending", "at_start") for level in ("division", "team", "actor")]  # wider scopes first
    rows = rows.take(pc.sort_indices(rows, sort_keys=keys))
    return rows.column("record_id").to_pylist(), rows.column("search_text").to_pylist()


def _joined(groups: Sequence[EpisodeGroups]) -> EpisodeGroups:
    """The episodes of rows read part by part (`ranking.episode_groups` of each), the rows in
    the parts' order: a BM25 model's documents, kind by kind."""
    keys: list[Any] = []
    sizes: list[int] = []
    of_row = []
    for part in groups:
        of_row.append(np.where(part.of_row >= 0, part.of_row + len(keys), -1).astype(np.int32))
        keys += part.keys
        sizes += part.sizes
    joined = np.concatenate(of_row) if of_row else np.empty(0, dtype=np.int32)
    return EpisodeGroups(keys, sizes, joined, max((part.largest for part in groups), default=0))


def _by_kind(rids: Sequence[str], candidates: Mapping[str, tuple[str, int]]) -> dict[str, list[str]]:
    """*rids* grouped by kind, each group in snapshot order.

    Callers key what they take by id, so the order is theirs to choose: positions in
    order spare `take_rows` its reordering take (a second take of every column).
    """
    by_kind: dict[str, list[str]] = {}
    for rid in sorted(rids, key=lambda r: candidates[r][1]):
        by_kind.setdefault(candidates[rid][0], []).append(rid)
    return by_kind


def _episode_columns(kind: str) -> list[str]:
    """The columns an episode key is read from (`ranking.episode_keys`)."""
    return ["session_id"] if "session_id" in SPECS[kind].schema.names else ["source", "valid_from"]


def describe_why(row: Mapping[str, Any], signal: str) -> tuple[str, ...]:
    why = ["scope " + "/".join(row[level] for level in ("org", "division", "team", "actor") if row.get(level)), signal]
    if row.get("supersedes"):
        why.append(f"supersedes {row['supersedes']}" + (f" ({row['reason']})" if row.get("reason") else ""))
    return tuple(why)


#: A line that does not fit whole is cut only if at least this many tokens of its text fit.
MIN_CUT_TOKENS = 8


def context_block(
    hits: Sequence[Hit],
    *,
    budget_tokens: int,
    header: str = "Memory (most relevant first; each line: kind, valid time, source, evidence):",
) -> Context:
    """Pack hits into a prompt block within *budget_tokens*, most relevant first.

    Every cost is `tokens.count_tokens` (the one definition; a block's parts meet at
    spaces and newlines, where word pieces split, so the block costs the sum of its
    parts, plus one token a line for the newline). Lines that fit whole go in, in rank
    order; one that does not is left out, and a shorter, less relevant one may still
    fit. Then the most relevant line left out is cut to what remains, marked ``cut``,
    if at least `MIN_CUT_TOKENS` of its text fit: a long memory is cut, never overflows.
    The result is a ``str`` with ``.items``: one `ContextItem` per line, in order.
    """
    from .tokens import count_tokens, cut

    def item(hit: Hit, line: str) -> ContextItem:
        r = hit.record
        start, end = r.valid_interval
        return ContextItem(
            hit.record_id,
            hit.kind,
            hit.text,
            r.source,
            r.evidence,
            start,
            end,
            r.scope.path if r.scope else None,
            hit.score,
            line,
        )

    used = count_tokens(header)
    placed: list[tuple[int, str, ContextItem]] = []
    skipped: tuple[int, Hit, str] | None = None  # the most relevant line left out
    for rank, hit in enumerate(hits):
        left = budget_tokens - used
        if left <= 0:
            break
        r = hit.record
        start, end = r.valid_interval
        valid = f"valid {start:%Y-%m-%d}" + (f"..{end:%Y-%m-%d}" if end else "") if start else ""
        meta = "; ".join(
            p for p in (hit.kind, valid, f"source {r.source}", f"evidence {r.evidence}" if r.evidence else "") if p
        )
        line = f"- {hit.text} [{meta}]"
        fitted, cost = cut(line, left - 1)  # one tokenizer pass, which stops where the budget does
        if fitted == line:
            placed.append((rank, line, item(hit, line)))
            used += cost + 1
        elif skipped is None:
            skipped = (rank, hit, meta)
    if skipped is not None:
        rank, hit, meta = skipped
        left = budget_tokens - used - count_tokens(f"- … [{meta}; cut]") - 1
        if left >= MIN_CUT_TOKENS:
            text, _ = cut(hit.text, left)
            line = f"- {text} … [{meta}; cut]"
            placed.append((rank, line, item(hit, line)))
    placed.sort(key=lambda p: p[0])
    return Context("\n".join([header] + [p[1] for p in placed]) if placed else "", [p[2] for p in placed])


def _version_key(version: str) -> tuple[Any, ...]:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"\d+|[A-Za-z]+", version))


def version_in_range(version: str, version_from: str | None, version_to: str | None) -> bool:
    """Whether *version* lies in [version_from, version_to] (numeric-aware: v2.10 > v2.9)."""
    key = _version_key(version)
    if version_from is not None and key < _version_key(version_from):
        return False
    if version_to is not None and key > _version_key(version_to):
        return False
    return True
