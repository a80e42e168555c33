"""Recall: read-your-writes, selective filters that never starve top-k, a stale index catching
up, rebuilds that leave no old file, the exact and HNSW paths agreeing, and context budgets.

Stores here use `HashingEmbedder` (no model load): these tests are about what recall may
return and how the index keeps up, not about semantic quality (that is `evals.retrieval`).
"""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _support import (
    ALICE,
    BOB,
    CURATOR,
    MEMBER,
    ORG,
    SIBLING,
    STEWARD,
    SUPPORT,
    TIER1,
    TIER2,
    SimClock,
    day,
    episode,
    fact,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml
from memory_lakehouse.index import Partition, PartitionedIndex

EMBEDDER = ml.HashingEmbedder(dim=64)


def open_store(root: Path | str, clock: SimClock) -> ml.MemoryStore:
    return ml.open(root, clock=clock, embedder=EMBEDDER)


@pytest.fixture
def clock() -> SimClock:
    return SimClock(day(30))  # the stories below happen on days 1-20


@pytest.fixture
def hstore(tmp_path, clock) -> ml.MemoryStore:
    return open_store(tmp_path / "store", clock)


def index_files(store: ml.MemoryStore) -> dict[str, int]:
    """Every file of the store's index with its mtime (ns)."""
    return {str(p): p.stat().st_mtime_ns for p in store.retriever.index.files()}


def partition(store: ml.MemoryStore, org: str = "acme") -> Partition:
    part = store.retriever.sync(org).partition
    assert part is not None
    return part


def seed(store: ml.MemoryStore, n: int = 12) -> list[str]:
    """A few facts at org, division and team level; returns their record ids."""
    records = [
        fact(
            f"customer:c{i}",
            "plan",
            f"plan {i} allows {10 * i} seats",
            day(1),
            scope=scope,
            evidence=f"https://crm.example/c{i}",
        )
        for i, scope in zip(range(n), [ORG, SUPPORT, TIER2, TIER1] * n, strict=False)
    ]
    return [r.record_id for r in store.write_many(records, by=STEWARD)]


# ----------------------------------------------------------------------- read-your-writes


def test_a_write_is_recalled_at_once_without_a_rebuild(hstore, clock):
    seed(hstore)
    assert hstore.recall("plan seats", by=MEMBER, k=3)  # builds and saves the partition
    on_disk = index_files(hstore)
    assert on_disk, "the first recall saves the org's partition"
    saved_tag = PartitionedIndex(hstore.retriever.index.root, EMBEDDER.name, EMBEDDER.dim).tag("acme")

    clock.advance(minutes=5)
    lines: list[str] = []
    with hstore.tracer(lines.append):  # the write catches the partition up (`catch_up`), or the recall would
        res = hstore.write(
            fact(
                "customer:new",
                "sso_provider",
                "okta single sign-on via saml",
                day(2),
                evidence="https://crm.example/new",
            ),
            by=MEMBER,
        )
        hits = hstore.recall("okta single sign-on", by=MEMBER, k=3)

    assert hits[0].record_id == res.record_id
    # the partition on disk predates the write and was not touched: the row was caught up in memory
    assert saved_tag is not None and saved_tag.versions["fact"] < res.version
    assert index_files(hstore) == on_disk
    assert any("added 1 row(s) newer than the partition" in line for line in lines)


def test_catching_up_reads_only_new_rows_and_still_finds_each_write_after_a_compaction(hstore, clock):
    seed(hstore)
    assert hstore.recall("plan seats", by=MEMBER, k=3)  # the partition holds every row
    catch_ups: list[str] = []
    written = []
    for i in range(4):
        clock.advance(minutes=5)
        with hstore.tracer(catch_ups.append):  # the write catches up (`catch_up`), or the recall would
            written.append(hstore.write(fact(f"customer:w{i}", "plan", f"zebra plan {i}", day(2)), by=MEMBER).record_id)
            if i == 1:
                hstore.maintenance.compact()  # a rewrite: the snapshot starts a new epoch, positions move
            hits = hstore.recall(f"zebra plan {i}", by=MEMBER, k=1, signals=("vector",))
        assert hits[0].record_id == written[-1]
    # each write was added once, as the one row newer than the partition (none embedded twice)
    added = [line for line in catch_ups if "newer than the partition" in line]
    assert added == [line for line in added if "added 1 row(s)" in line] and len(added) == 4
    part = hstore.retriever.sync("acme").partition
    assert part is not None and all(rid in part for rid in written)
    bm25 = [h.record_id for h in hstore.recall("zebra", by=MEMBER, k=4, signals=("bm25",))]
    assert sorted(bm25) == sorted(written)


def test_rows_written_since_the_bm25_model_are_scored_on_their_own_search_text(hstore, clock):
    """The texts a catch-up keeps for rows newer than the org's BM25 model are those rows'
    search texts, as the snapshot spells them; recall finds each such row by its words."""
    seed(hstore, 40)  # a model 3 rows behind is not stale yet (`BM25_STALE_SHARE`)
    assert hstore.recall("plan seats", by=MEMBER, k=3)  # builds the partition and the BM25 model
    written = []
    for i in range(3):
        clock.advance(minutes=5)
        fresh = fact(f"customer:k{i}", "sso_provider", f"kestrel{i} single sign-on via saml", day(2))
        written.append(hstore.write(fresh, by=MEMBER).record_id)
        hits = hstore.recall(f"kestrel{i}", by=MEMBER, k=1)
        assert [h.record_id for h in hits] == [written[-1]]
    retriever = hstore.retriever
    state = retriever._orgs["acme"]
    kept = state.recent
    assert sorted(kept) == sorted(written)  # newer than the model: none of them is in it
    candidates = hstore.retriever._visible(MEMBER, hstore._basis(), kinds=["fact"], subject=None, filters=None)
    assert [kept[rid] for rid in written] == retriever._texts(written, candidates)  # from the snapshot


_POOL_QUERY = "plan seats region renewal"


def _located_pool(hstore: ml.MemoryStore, scopes: list[ml.Scope]):
    """32 facts over *scopes* in turn, each query word in one row of so many (IDF above 0, and
    rows that tell apart by coverage); the org loaded by a recall, then MEMBER's visible rows
    for `_POOL_QUERY`, located (`Retriever._locate`)."""
    words = {"seats": 3, "region": 5, "renewal": 7, "invoice": 4}
    hstore.write_many(
        [
            fact(
                f"customer:c{i}",
                "plan",
                " ".join(["plan", str(i), *(w for w, m in words.items() if i % m == 0)]),
                day(1),
                scope=scopes[i % len(scopes)],
            )
            for i in range(32)
        ],
        by=STEWARD,
    )
    assert hstore.recall(_POOL_QUERY, by=MEMBER, k=3)  # builds the partition and the BM25 model
    retriever = hstore.retriever
    candidates = retriever._visible(MEMBER, hstore._basis(), kinds=["fact"], subject=None, filters=None)
    return retriever, candidates, retriever._locate("acme", candidates, vector=True, bm25=True)


def test_the_lexical_coverage_of_a_visible_row_is_its_own_documents_whether_bm25_ranked_it_or_not(hstore):
    """Fusion weighs each pool row's lexical coverage (`_bm25_lists`): a row BM25 ranked by the
    document it ranked, any other through its (kind, position) in the org's map. Either way it
    is the model's coverage of that row's own document."""
    retriever, candidates, located = _located_pool(hstore, [ORG])
    query = _POOL_QUERY
    lists, coverage = retriever._bm25_lists("acme", query, located, candidates, 3)
    ranked = {rid for rid, _ in lists["bm25"]}
    visible = list(candidates)
    assert len(ranked) == 3 and len(visible) == 32
    assert located.model is not None and located.model_ids is not None and located.partition is not None
    model, ids = located.model, located.model_ids
    docs = {rid: doc for doc, rid in enumerate(ids.values_at(range(len(ids))))}  # read back, not looked up
    expected = model.coverage_at(query, np.array([docs[rid] for rid in visible]))
    labels, found = located.rows.locate_each(candidates.where(visible))  # as `_fuse` finds the pool's
    assert coverage(visible, found) == pytest.approx(dict(zip(visible, expected.tolist(), strict=True)))
    assert len(set(expected.tolist())) >= 6  # rows tell apart: a row given another's document is seen
    # the exact cosines of rows only BM25 reached: the partition's vectors at the labels found
    q = retriever.embed_query(query)
    texts = retriever._texts(visible, candidates)
    exact = {
        rid: float(v @ q / np.linalg.norm(v) / np.linalg.norm(q))
        for rid, v in zip(visible, retriever.embedder.embed(texts), strict=True)
    }
    got = retriever._cosines(query, visible, labels, candidates, located.partition)
    assert got == pytest.approx(exact, abs=1e-5) and (labels >= 0).all()


def test_a_recall_ranks_by_the_bm25_model_it_located_its_rows_in_though_the_org_gets_a_new_one(hstore):
    """A recall takes the org's BM25 model, its ids and the position map together (`_Located`):
    a new model built meanwhile (by a write's catch-up or a recall in another thread) numbers
    its documents afresh, here every episode's moved by the facts written before them, and
    the recall keeps ranking by the model its visible rows were located in."""
    hstore.write_many([fact(f"customer:c{i}", "plan", f"plan {i} seats", day(1)) for i in range(6)], by=STEWARD)
    hstore.write_many(
        [episode("billing", f"outage {i} invoices stuck", "fixed", day(1, i)) for i in range(6)], by=STEWARD
    )
    query = "outage invoices"
    assert hstore.recall(query, by=MEMBER, k=3)  # builds the partition and the BM25 model
    retriever = hstore.retriever

    def bm25_hits(located):
        candidates = retriever._visible(MEMBER, hstore._basis(), kinds=["fact", "episode"], subject=None, filters=None)
        lists, _ = retriever._bm25_lists("acme", query, located, candidates, 20)
        return lists["bm25"]

    candidates = retriever._visible(MEMBER, hstore._basis(), kinds=["fact", "episode"], subject=None, filters=None)
    located = retriever._locate("acme", candidates, vector=False, bm25=True)
    before = bm25_hits(located)
    assert len(before) == 6
    hstore.write_many([fact(f"customer:n{i}", "plan", f"plan {i} renewal", day(2)) for i in range(8)], by=STEWARD)
    state = retriever._orgs["acme"]
    state.bm25 = None  # the next look builds a new model: the episodes' documents move by 8
    retriever._bm25("acme")
    assert state.bm25 is not located.model and len(state.bm25_ids or ()) == 20
    assert bm25_hits(located) == before


def test_fusion_scores_every_pool_row_by_its_own_cosine_and_coverage_whichever_list_reached_it(hstore):
    """`_fuse` finds the pool's partition labels and BM25 documents through each row's (kind,
    position), and scores a row only BM25 reached by the cosine of its own vector. Rows at
    four scopes, interleaved: the partition lays them out by scope, the model in snapshot
    order, so a row's label and its document differ."""
    import re

    retriever, candidates, located = _located_pool(hstore, [ORG, SUPPORT, TIER2, TIER1])
    query = _POOL_QUERY
    lists, coverage = retriever._bm25_lists("acme", query, located, candidates, 32)
    lists["vector"] = retriever._vector_list("acme", query, located, candidates, 2)  # most rows: BM25's alone
    hits = retriever._fuse("acme", query, lists, candidates, located, 40, coverage, retriever.ranking)
    visible = list(candidates)
    labels, docs = located.rows.locate_each(candidates.where(visible))
    assert (labels != docs).sum() >= 8 and len(hits) == len(
        {rid for name in ("bm25", "vector") for rid, _ in lists[name]}
    ) > 16
    q = retriever.embed_query(query)
    vectors = retriever.embedder.embed(retriever._texts(visible, candidates))
    exact = {rid: float(v @ q / np.linalg.norm(v) / np.linalg.norm(q)) for rid, v in zip(visible, vectors, strict=True)}
    assert located.model is not None and located.model_ids is not None
    ids = located.model_ids
    doc_of = {rid: doc for doc, rid in enumerate(ids.values_at(range(len(ids))))}
    for hit in hits:
        cosine, covered = re.findall(r"cosine (-?\d+\.\d+), lexical coverage (\d+\.\d+)", "; ".join(hit.why))[0]
        assert float(cosine) == pytest.approx(exact[hit.record_id], abs=1e-3), hit.record_id
        expected = float(located.model.coverage_at(query, np.array([doc_of[hit.record_id]]))[0])
        assert float(covered) == pytest.approx(expected, abs=6e-3), hit.record_id


def test_a_partition_holding_a_row_the_store_no_longer_has_is_found_by_the_one_count(hstore):
    """`Retriever.gone_rows`: what a partition holds beyond the store's rows of its org. A
    cache another machine's purge could not reach (`_holds_erased_rows`) and a purge that was
    killed (`MemoryStore._partition_holds_gone_rows`) both ask it."""
    seed(hstore, 8)
    assert hstore.recall("plan seats", by=MEMBER, k=3)  # builds and saves the partition
    part = hstore.retriever.index.partition("acme")
    assert part is not None
    assert hstore.retriever.gone_rows("acme", part) == 0 and not hstore._partition_holds_gone_rows("acme")
    part.add(["fac_erased_elsewhere"], np.ones((1, part.dim), dtype=np.float32), num_threads=1)
    assert hstore.retriever.gone_rows("acme", part) == 1 and hstore._partition_holds_gone_rows("acme")


def test_candidates_say_where_each_visible_row_is_placed_or_not_and_none_for_others(hstore):
    """`Candidates.where`: a row ranking placed, one it did not (read from the snapshot), and
    an id no visible row has."""
    ids = seed(hstore, 8)
    candidates = hstore.retriever._visible(MEMBER, hstore._basis(), kinds=["fact"], subject=None, filters=None)
    rows = hstore.lake.all_rows("fact").column("record_id").to_pylist()
    candidates.place(ids[0], "fact", rows.index(ids[0]))
    assert candidates.where([ids[0], ids[5], "fact_none"]) == [
        ("fact", rows.index(ids[0])),
        ("fact", rows.index(ids[5])),
        None,
    ]


def test_a_purge_by_another_handle_leaves_no_kept_text_of_the_purged_row(tmp_path, clock):
    """Texts kept for rows newer than the BM25 model go with the org's partition: a purge made
    elsewhere drops them with it, and recall no longer finds the row."""
    store = open_store(tmp_path / "store", clock)
    seed(store, 40)
    assert store.recall("plan seats", by=MEMBER, k=3)
    clock.advance(minutes=5)
    rid = store.write(fact("customer:k", "sso_provider", "kestrel single sign-on", day(2)), by=MEMBER).record_id
    assert [h.record_id for h in store.recall("kestrel", by=MEMBER, k=1)] == [rid]
    assert rid in store.retriever._orgs["acme"].recent

    other = open_store(tmp_path / "store", clock)
    other.forget("customer:k", by=STEWARD, reason="erasure request")
    other.purge(by=STEWARD)
    other.close()
    assert rid not in [h.record_id for h in store.recall("kestrel", by=MEMBER, k=3)]
    assert all(rid not in state.recent for state in store.retriever._orgs.values())


def test_a_write_is_recalled_even_before_any_index_exists(hstore):
    res = hstore.write(fact("customer:first", "plan", "enterprise", day(1)), by=MEMBER)
    assert [h.record_id for h in hstore.recall("enterprise plan", by=MEMBER)] == [res.record_id]


# ----------------------------------------------------------------------- selective filters


@pytest.fixture(scope="module")
def two_thousand(tmp_path_factory):
    """2,000 facts over 100 teams (20 each); a member of one team sees 1% of them."""
    store = open_store(tmp_path_factory.mktemp("selective") / "store", SimClock(day(30)))
    records = [
        fact(
            f"customer:{i}",
            ("plan", "region", "sso")[i % 3],
            f"value {i} for account {i % 7}",
            day(1),
            scope=ml.Scope("acme", "support", f"team{i % 100:02d}"),
        )
        for i in range(2000)
    ]
    store.write_many(records, by=STEWARD)
    return store


@pytest.mark.parametrize("path", ["exact scan", "hnsw"])
def test_a_one_percent_visible_set_still_fills_top_k(two_thousand, path):
    store = two_thousand
    member = ml.Principal("m7", ml.Scope("acme", "support", "team07", "m7"), role="member")
    part = partition(store)
    part.exact_threshold = 0 if path == "hnsw" else None  # force the filtered graph walk
    try:
        lines: list[str] = []
        with store.tracer(lines.append):
            hits = store.recall("value for account 3", by=member, k=8, signals=("vector",))
        assert len(hits) == 8
        assert {h.record.scope for h in hits} == {ml.Scope("acme", "support", "team07")}
        assert any(line.startswith(path) and "20 allowed" in line for line in lines), lines
        everything = store.recall("value for account 3", by=member, k=50)
        assert len(everything) == 20  # min(k, visible): all of them, nothing else
        plans = sum(1 for i in range(7, 2000, 100) if i % 3 == 0)  # team07's plan facts
        narrower = store.recall("value", by=member, k=8, filters={"attribute": "plan"})
        assert len(narrower) == plans and all(h.record.attribute == "plan" for h in narrower)
    finally:
        part.exact_threshold = None


# ----------------------------------------------------------------------- another process wrote


def _write_from_another_process(root: str, at: str) -> None:
    store = ml.open(root, clock=lambda: datetime.fromisoformat(at), embedder=EMBEDDER)
    store.write(
        ml.Fact(
            "customer:other-process",
            "note",
            "written by a second process about zebras",
            datetime.fromisoformat(at),
            source="child@v1",
        ),
        by=STEWARD,
    )


@pytest.mark.integration
def test_a_stale_partition_catches_up_with_another_process_s_write(tmp_path, clock):
    root = str(tmp_path / "store")
    store = open_store(root, clock)
    seed(store)
    assert store.recall("zebras", by=MEMBER)
    before = store.retriever.index.tag("acme")
    clock.advance(hours=1)
    child = mp.get_context("spawn").Process(
        target=_write_from_another_process, args=(root, (clock.now - timedelta(minutes=30)).isoformat())
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0

    hits = store.recall("zebras", by=MEMBER, k=3)
    assert hits[0].record.subject_name == "customer:other-process"
    assert store.retriever.index.tag("acme") == before  # caught up in memory, no rebuild


class CountingEmbedder:
    """The test embedder, counting the texts it embeds."""

    name, dim = EMBEDDER.name, EMBEDDER.dim

    def __init__(self) -> None:
        self.texts = 0

    def embed(self, texts):
        self.texts += len(texts)
        return EMBEDDER.embed(texts)


def test_close_saves_caught_up_rows_so_the_next_open_embeds_only_the_query(tmp_path, clock):
    root = tmp_path / "store"
    with open_store(root, clock) as store:
        seed(store)
        store.recall("zebras", by=MEMBER)  # builds the partition and saves it
        clock.advance(hours=1)
        store.write(fact("customer:late", "plan", "zebras welcome", day(2), scope=TIER2), by=STEWARD)
        assert store.recall("zebras", by=MEMBER, k=1)[0].record.subject_name == "customer:late"  # caught up, unsaved
    counting = CountingEmbedder()
    again = ml.open(root, clock=clock, embedder=counting)
    assert again.recall("zebras", by=MEMBER, k=1)[0].record.subject_name == "customer:late"
    assert counting.texts == 1  # the query; no row embedded again


def test_closing_saves_each_partition_and_lets_go_of_its_graph_before_saving_the_next(tmp_path, clock, monkeypatch):
    """Saving a partition whose graph is on disk reads the graph in to add the caught-up rows.
    Closing lets go of each again once saved, so a store with many orgs holds one graph at a
    time on the way out (holding all of them peaked ~200 MB above serving at 100k, 20 orgs)."""
    orgs = ["acme", "globex", "initech"]
    leads = {org: ml.Principal(f"lead-{org}", ml.Scope(org), role="curator") for org in orgs}
    store = open_store(tmp_path / "store", clock)
    for org in orgs:
        store.write_many(
            [fact(f"customer:{i}", "plan", f"{org} plan {i}", day(1), scope=ml.Scope(org)) for i in range(30)],
            by=leads[org],
        )
    store.rebuild_index()  # saved, each graph left on disk
    clock.advance(hours=1)
    for org in orgs:
        store.write(fact("customer:late", "plan", "zebras welcome", day(2), scope=ml.Scope(org)), by=leads[org])
        assert store.recall("zebras", by=leads[org], k=1)[0].record.subject_name == "customer:late"  # unsaved
    parts = [partition(store, org) for org in orgs]
    held_at_each_save: list[int] = []
    real_save = Partition.save

    def save(self, *args, **kwargs):
        held_at_each_save.append(sum(p._index is not None for p in parts))
        return real_save(self, *args, **kwargs)

    monkeypatch.setattr(Partition, "save", save)
    store.close()
    assert held_at_each_save == [0, 0, 0]
    assert all(p._index is None for p in parts)
    again = open_store(tmp_path / "store", clock)
    for org in orgs:
        assert again.recall("zebras", by=leads[org], k=1)[0].record.subject_name == "customer:late"
    again.close()


def test_a_reopened_store_catches_up_with_a_write_by_reading_only_the_rows_after_its_snapshot(
    tmp_path, clock, monkeypatch
):
    """A partition loaded at the snapshot's versions holds every row so far: the first write
    after the open is caught up from the rows appended since, not by reading the org's rows
    again (5k rows an org at 100k: ~4 ms on the first write to each org after a restart)."""
    from memory_lakehouse import retrieve

    root = tmp_path / "store"
    with open_store(root, clock) as store:
        seed(store, 60)
        store.recall("zebras", by=MEMBER)  # builds the partition and saves it
    again = open_store(root, clock)
    again.recall("zebras", by=MEMBER)  # the partition loaded at the current versions
    read: list[int] = []
    org_rows = retrieve.Retriever._org_rows

    def counting(self, org, columns, cursor=None):
        out = org_rows(self, org, columns, cursor)
        read.append(sum(rows.num_rows for _, rows in out))
        return out

    monkeypatch.setattr(retrieve.Retriever, "_org_rows", counting)
    clock.advance(hours=1)
    again.write(fact("customer:late", "plan", "zebras welcome", day(2), scope=TIER2), by=STEWARD)
    assert again.recall("zebras", by=MEMBER, k=1)[0].record.subject_name == "customer:late"
    assert read and max(read) == 1  # the write's row, in the index's catch-up and the BM25 count


def test_building_and_catching_up_embed_a_bounded_number_of_rows_at_a_time(tmp_path, clock, monkeypatch):
    from memory_lakehouse import retrieve

    whole = open_store(tmp_path / "whole", clock)
    seed(whole, 20)
    whole.rebuild_index()
    monkeypatch.setattr(retrieve, "EMBED_CHUNK", 3)
    calls: list[int] = []

    class Recording(CountingEmbedder):
        def embed(self, texts):
            calls.append(len(texts))
            return super().embed(texts)

    chunked = ml.open(tmp_path / "chunked", clock=clock, embedder=Recording())
    seed(chunked, 20)
    chunked.rebuild_index()
    clock.advance(hours=1)
    for store in (whole, chunked):
        store.write_many(
            [fact(f"customer:late{i}", "plan", f"late plan {i}", day(2), scope=TIER2) for i in range(7)], by=STEWARD
        )

    def scored(store):  # record ids (the tie-break) differ between the stores: compare scores
        return {h.record.subject: round(h.score, 6) for h in store.recall("late plan seats", by=MEMBER, k=30)}

    assert scored(chunked) == scored(whole)
    assert max(calls) == 3 and sum(calls) >= 27  # 20 rows built, 7 caught up, 3 at a time (+ queries)


def test_close_is_idempotent_and_a_closed_store_refuses_reads(hstore):
    seed(hstore)
    hstore.close()
    hstore.close()
    for read in (
        lambda: hstore.get_fact("customer:c1", "plan", by=MEMBER),
        lambda: hstore.recall("plan", by=MEMBER),
        lambda: hstore.write(fact("customer:c1", "plan", "new", day(3)), by=MEMBER),
        lambda: hstore.rebuild_index(),
    ):
        with pytest.raises(ml.StoreError, match="closed"):
            read()


# ----------------------------------------------------------------------- rebuilds


def test_rebuild_index_leaves_no_file_of_the_old_index(hstore):
    seed(hstore)
    gone = hstore.write(fact("customer:gone", "plan", "the erased customer's plan", day(2)), by=STEWARD)
    hstore.recall("plan", by=MEMBER)  # saves generation 1
    base = hstore.retriever.index.base / "acme"
    old_files = set(index_files(hstore))
    old_gens = {p.name for p in base.iterdir()}

    assert hstore.rebuild_index() == ["acme"]
    new_files = set(index_files(hstore))
    assert new_files and not new_files & old_files
    assert not {p.name for p in base.iterdir()} & old_gens  # old generation directories are gone
    assert all(not Path(f).exists() for f in old_files)

    hstore.forget("customer:gone", by=STEWARD, reason="erasure request")
    hstore.purge(by=STEWARD)
    after_purge = hstore.retriever.index.files()
    assert after_purge and not set(map(str, after_purge)) & new_files
    needle = gone.record_id.encode()
    for path in hstore.retriever.index.root.rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), path


# ----------------------------------------------------------------------- planner


def test_the_exact_scan_and_the_hnsw_walk_return_the_same_visible_set(hstore):
    seed(hstore, 60)
    part = partition(hstore)
    for who in (MEMBER, CURATOR, ml.Principal("bob", BOB, role="member")):
        results = {}
        for threshold in (0, 10**9):  # 0: always the filtered HNSW walk; huge: always the exact scan
            part.exact_threshold = threshold
            everything = hstore.recall("plan seats", by=who, k=100, signals=("vector",))
            top = hstore.recall("plan 12 allows 120 seats", by=who, k=1, signals=("vector",))
            results[threshold] = ({h.record_id for h in everything}, top[0].record_id)
        part.exact_threshold = None
        assert results[0] == results[10**9]
        assert len(results[0][0]) == 45  # org + division + own team (k >= visible): all of them


def test_partition_search_paths_agree_under_the_same_mask(hstore):
    ids = seed(hstore, 40)
    part = partition(hstore)
    mask = part.mask(ids[::3])
    q = EMBEDDER.embed(["plan 9 allows 90 seats"])[0]
    exact = part.search(q, len(ids), allowed=mask, plan="exact")
    walk = part.search(q, len(ids), allowed=mask, plan="hnsw")
    assert {r for r, _ in exact} == {r for r, _ in walk} == set(ids[::3])


def test_a_rebuilt_partition_lays_an_orgs_rows_out_in_scope_order_so_a_reader_reads_them_in_runs(hstore):
    """Rows written interleaved across scopes come back from a rebuild wider scope first, each
    scope's rows together (in the order written); a reader's rows are then runs the exact
    scan reads in place, and a rebuild does not change what recall returns."""
    scopes = [ORG, TIER1, ALICE, SUPPORT, BOB, TIER2] * 20
    records = [
        fact(f"customer:c{i}", "plan", f"plan {i} allows {i} seats", day(1), scope=scope)
        for i, scope in enumerate(scopes)
    ]
    ids = [r.record_id for r in hstore.write_many(records, by=STEWARD)]
    q = "plan allows seats"
    before = {h.record_id: round(h.score, 5) for h in hstore.recall(q, by=MEMBER, k=30)}  # ties: order may vary
    hstore.rebuild_index()
    part = partition(hstore)
    order = part.record_ids()
    path = {rid: scope.path for rid, scope in zip(ids, scopes, strict=True)}
    wanted = [str(s.path) for s in (ORG, SUPPORT, TIER1, BOB, TIER2, ALICE)]
    assert [str(path[rid]) for rid in order] == [p for p in wanted for _ in range(20)]
    assert order == sorted(ids, key=lambda rid: (wanted.index(str(path[rid])), ids.index(rid)))
    lines: list[str] = []
    with hstore.tracer(lines.append):
        after = {h.record_id: round(h.score, 5) for h in hstore.recall(q, by=MEMBER, k=30)}
    assert after == before
    assert "exact scan over 80 allowed (2 runs read in place)" in lines  # acme + support + tier2, then alice


def test_the_tracer_shows_the_planner_decision(hstore):
    seed(hstore)
    lines: list[str] = []
    with hstore.tracer(lines.append):
        hstore.recall("plan", by=MEMBER)
    assert any(line.startswith("exact scan over") for line in lines)
    part = partition(hstore)
    part.exact_threshold = 0
    lines.clear()
    with hstore.tracer(lines.append):
        hstore.recall("plan", by=MEMBER)
    part.exact_threshold = None
    assert any(line.startswith("hnsw ef=") for line in lines)
    assert any(line.startswith("ranked lists: vector=") for line in lines)


# ----------------------------------------------------------------------- never stale, never a sibling's

SCOPES = {"org": ORG, "support": SUPPORT, "tier2": TIER2, "tier1": TIER1, "alice": ALICE, "bob": BOB}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(
        st.tuples(
            st.sampled_from(sorted(SCOPES)), st.sampled_from(["c1", "c2", "c3"]), st.integers(0, 9), st.integers(1, 20)
        ),
        min_size=1,
        max_size=25,
    )
)
def test_recall_serves_only_current_visible_versions(tmp_path_factory, writes):
    store = open_store(tmp_path_factory.mktemp("prop") / "store", SimClock(day(30)))
    records = [
        fact(f"customer:{subject}", "plan", f"plan value {value}", day(d), scope=SCOPES[scope])
        for scope, subject, value, d in writes
    ]
    results = store.write_many(records, by=STEWARD)
    expected: dict[str, tuple] = {}  # subject -> (scope depth, valid_from, order, record_id) of the head
    for i, ((scope, subject, _, d), res) in enumerate(zip(writes, results, strict=True)):
        if res.action == "duplicate" or not MEMBER.can_read(SCOPES[scope]):
            continue
        key = (SCOPES[scope].depth, day(d), i, res.record_id)
        expected[subject] = max(expected.get(subject, key), key)
    for signals in (None, ("vector",), ("bm25",)):
        hits = store.recall("plan value", by=MEMBER, k=100, signals=signals)
        assert {h.record_id for h in hits} == {key[3] for key in expected.values()}


def test_recall_hides_superseded_versions_and_other_teams(hstore):
    old = hstore.write(fact("customer:acme", "plan", "Business up to 150 members", day(1)), by=CURATOR)
    new = hstore.write(fact("customer:acme", "plan", "Enterprise up to 500 members", day(5)), by=CURATOR)
    tier1 = hstore.write(fact("customer:acme", "plan", "Enterprise up to 500 members", day(5), scope=TIER1), by=STEWARD)
    assert new.action == "superseded" and new.supersedes == old.record_id
    hits = hstore.recall("how many members can acme have", by=MEMBER, k=10)
    assert [h.record_id for h in hits] == [new.record_id]
    assert any(w.startswith("supersedes") for w in hits[0].why)
    then = hstore.recall("how many members can acme have", by=MEMBER, k=10, valid_at=day(2))
    assert [h.record_id for h in then] == [old.record_id]
    bob = hstore.recall("how many members can acme have", by=ml.Principal("bob", BOB, role="member"), k=10)
    assert [h.record_id for h in bob] == [tier1.record_id]


# ----------------------------------------------------------------------- signals


def test_signals_change_the_ranking_never_what_is_visible(hstore):
    seed(hstore, 30)
    sets = [
        {h.record_id for h in hstore.recall("plan 7 seats", by=MEMBER, k=100, signals=s)}
        for s in (None, ("vector",), ("bm25",), ("bm25", "vector"))
    ]
    assert all(s == sets[0] for s in sets)
    for bad in ((), ("tfidf",), "vector"):
        with pytest.raises(ml.ValidationError):
            hstore.recall("plan", by=MEMBER, signals=bad)


# ----------------------------------------------------------------------- context


class WordPieceCounting:
    """The hashing embedder with the default model's tokenizer for counting (no model load)."""

    name = EMBEDDER.name
    dim = EMBEDDER.dim

    def __init__(self) -> None:
        self.count_tokens = ml.MiniLMEmbedder().count_tokens

    def embed(self, texts):
        return EMBEDDER.embed(texts)


@pytest.mark.parametrize("budget", [30, 70, 150, 800])
def test_context_stays_within_its_token_budget_and_cites_each_line(tmp_path, clock, budget):
    embedder = WordPieceCounting()
    store = ml.open(tmp_path / "store", clock=clock, embedder=embedder)
    seed(store, 20)
    store.write(
        ml.Episode(
            "checkout",
            "prod",
            "p99 latency after deploy",
            "rolled back",
            "fixed",
            day(2),
            evidence="https://incidents.example/INC-1",
            source="incident-bot@v2",
        ),
        by=MEMBER,
    )
    block = store.context("plan seats latency", by=MEMBER, budget_tokens=budget)
    if not block:
        assert budget < 19 + 45  # the header and one line (~45 word-pieces) do not fit
        return
    assert embedder.count_tokens(block) <= budget
    header, *lines = block.split("\n")
    assert lines
    for line in lines:
        meta = line[line.rindex("[") + 1 : -1].split("; ")
        assert meta[0] in ("fact", "episode")
        assert meta[1].startswith("valid ") and any(m.startswith("source ") for m in meta)
        assert any(m.startswith("evidence ") for m in meta)
    ranked = [h.text for h in store.recall("plan seats latency", by=MEMBER, k=20)]
    texts = [line[2 : line.rindex(" [")] for line in lines]
    assert texts == [t for t in ranked if t in texts]  # most relevant first


def test_a_filter_on_a_column_no_requested_kind_has_is_an_error(tmp_path):
    """A typo in a filter must not look like "nothing is visible"."""
    store = ml.open(tmp_path / "s", embedder=ml.HashingEmbedder())
    alice = ml.Principal("alice", ml.Scope("acme", "support"), role="member")
    with pytest.raises(ml.ValidationError) as err:
        store.recall("plan", by=alice, kinds=["fact"], filters={"atribute": "plan"})
    assert err.value.field == "filters"


# ----------------------------------------------------------------------- positions -> labels, documents


def _assert_org_rows_agree(store: ml.MemoryStore, org: str = "acme") -> None:
    """The org's position map places every indexable row at the label and document its id has."""
    from memory_lakehouse.candidates import indexable_mask

    state = store.retriever._orgs[org]
    rows, part, model_ids = state.rows, state.partition, state.bm25_ids
    assert rows is not None and part is not None and model_ids is not None
    # each row's label and document read back from the code order (not looked up as the map does)
    labels_of = {rid: i for i, rid in enumerate(part.record_ids())}
    docs_of = {rid: i for i, rid in enumerate(model_ids.values_at(range(len(model_ids))))}
    for code, kind in enumerate(rows.kinds):
        snapshot = store.lake.all_rows(kind)
        mask = indexable_mask(snapshot, org).to_numpy(zero_copy_only=False)
        positions = np.flatnonzero(mask)
        ids = snapshot.column("record_id").to_pylist()
        labels, docs = rows.locate(kind, positions)
        assert labels.tolist() == [labels_of.get(ids[p], -1) for p in positions]
        assert docs.tolist() == [docs_of.get(ids[p], -1) for p in positions]
        for by, targets in ((rows.by_label, labels), (rows.by_doc, docs)):
            held = targets >= 0
            assert (by[0][targets[held]] == code).all() and (by[1][targets[held]] == positions[held]).all()
        # every row the map holds is noted where it holds it: recall finds them all without a search
        mapped = rows.view().rows.get(kind, (np.empty(0, np.int64),))[0]
        hints = rows.view().hints.get(kind)
        assert not len(mapped) or (hints is not None and hints[mapped].tolist() == list(range(len(mapped))))
    # the reverse maps, kept up entry by entry after appends, are the ones built whole
    assert len(rows.by_label[0]) == len(part) and len(rows.by_doc[0]) == len(model_ids)
    for name, by in (("labels", rows.by_label), ("docs", rows.by_doc)):
        whole = rows._reverse(len(by[0]), name)
        assert np.array_equal(by[0], whole[0]) and np.array_equal(by[1], whole[1]), name


def test_recall_places_visible_rows_by_position_through_writes_compactions_purges_and_rebuilds(hstore, clock):
    """Recall maps visible snapshot positions to index labels and BM25 documents (`candidates.OrgRows`):
    after each change the map agrees with the ids, and recall returns exactly the visible set.
    (That each hit is scored as its own row: tests/test_catch_up_batches.py.)"""
    hstore.catch_up = "read"  # the reads take the written rows in: a BM25-only read leaves them unlabelled
    seed(hstore, 40)  # a write or two leaves the BM25 model current: newer rows are mapped to no document
    readers = [MEMBER, SIBLING, CURATOR, STEWARD, ml.Principal("ann", ml.Scope("acme", "sales"), role="member")]

    def check(query: str, signals: tuple[str, ...] = ("vector", "bm25")) -> None:
        for who in readers:
            visible = {r["record_id"] for r in hstore.vis.rows("fact", who, hstore._basis()).to_pylist()}
            hits = hstore.recall(query, by=who, k=1000, kinds=["fact"], signals=signals)
            assert {h.record_id for h in hits} == visible
        if "vector" in signals:
            _assert_org_rows_agree(hstore)

    check("plan seats", ("bm25",))  # the map is made before the org has a partition
    check("plan seats")
    for step in range(6):
        clock.advance(minutes=5)
        hstore.write(fact(f"customer:s{step}", "plan", f"zebra plan {step}", day(2)), by=MEMBER)
        hstore.write(fact("customer:c1", "plan", f"plan moved {step}", day(3 + step), scope=ORG), by=STEWARD)
        check(f"zebra plan {step}", ("bm25",))  # rows the partition does not hold yet: label -1 until caught up
        # steps 0-1 leave the BM25 model current; step 2 replaces it (more than a tenth is new)
        if step == 3:
            hstore.maintenance.compact()  # a new epoch: positions move
        if step == 4:
            hstore.forget("customer:c2", by=STEWARD, reason="erasure request")
            hstore.purge(by=STEWARD)  # rows rewritten away, the partition rebuilt
        if step == 5:
            hstore.rebuild_index()  # a new partition object: every label mapped again
        check(f"zebra plan {step}")
        hstore.write(fact(f"customer:y{step}", "plan", f"yak plan {step}", day(2)), by=MEMBER)
        check(f"yak plan {step}")  # read first with vectors: the appended rows come labelled


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(min_value=-(2**55), max_value=2**55)),
            st.one_of(st.none(), st.text(max_size=5)),
        ),
        max_size=6,
    ),
    st.integers(min_value=0, max_value=6),
)
def test_rows_and_columns_to_pylist_give_what_to_pylist_gives(values, cut):
    import pyarrow as pa

    from memory_lakehouse.lake import column_to_pylist, rows_to_pylist

    table = pa.table(
        {
            "at": pa.array([v for v, _ in values], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "naive": pa.array([v for v, _ in values], pa.int64()).cast(pa.timestamp("us")),
            "text": pa.array([t for _, t in values], pa.string()),
        }
    )
    cut = min(cut, table.num_rows)
    table = pa.concat_tables([table.slice(0, cut), table.slice(cut)])  # two chunks, the second at an offset
    fast, slow = rows_to_pylist(table), table.to_pylist()
    assert fast == slow
    for column in table.itercolumns():
        assert column_to_pylist(column) == column.to_pylist()
    assert [repr(r["at"]) for r in fast] == [repr(r["at"]) for r in slow]  # the same tzinfo too


def test_recall_builds_each_hit_as_get_builds_that_record_for_every_kind(hstore, clock):
    """Recall builds its winners from snapshot positions: every field of every kind (evidence,
    confidence, reason, supersedes, derived_from, known_since, ...) comes back as `get`
    reads it."""
    first = hstore.write(
        fact("customer:k", "plan", "kiwi plan basic", day(1), evidence="https://crm.example/k"), by=STEWARD
    )
    clock.advance(minutes=5)
    written = [
        fact(
            "customer:k",
            "plan",
            "kiwi plan pro",
            day(2),
            evidence="https://crm.example/k2",
            confidence=0.7,
            reason="upgrade",
            derived_from=(first.record_id,),
        ),
        ml.Preference("customer:k", "contact", "kiwi prefers email", day(1), source="test@v1", confidence=0.9),
        episode("checkout", "kiwi refund stuck", "fixed", day(1), subject="customer:k"),
        ml.Reference("kb://kiwi", "Kiwi guide", "kiwi setup steps", day(1), source="kb@v1", subject="customer:k"),
    ]
    ids = [r.record_id for r in hstore.write_many(written, by=STEWARD)]
    hits = hstore.recall("kiwi", by=STEWARD, k=20)
    assert {h.record_id for h in hits} == set(ids)
    assert {h.kind for h in hits} == {"fact", "preference", "episode", "reference"}
    for hit in hits:
        assert hit.record == hstore.get(hit.record_id, by=STEWARD)
    assert next(h for h in hits if h.kind == "fact").record.supersedes == first.record_id


@pytest.mark.parametrize("min_rows", [1, 2, 3, 5, 6])
def test_a_row_is_in_an_episode_when_its_group_holds_enough_rows_groups_of_one_included(hstore, clock, min_rows):
    """The org's episode sizes are counted at its BM25 build; groups of one row are not kept
    (most rows of an org of facts), and a row of such a group, or one written since, is a
    group of one: the same answer as counting every group."""
    sizes = {"s1": 1, "s2": 2, "s5": 5, "s12": 12}  # s12: one more row leaves the model fresh
    turns = [
        ml.Turn(session, "user", f"{session} line {i} about the okta rollout", day(1, i), source="chat", position=i)
        for session, n in sizes.items()
        for i in range(n)
    ]
    hstore.write_many(turns, by=STEWARD)
    assert hstore.recall("okta rollout", by=STEWARD, k=3, kinds=["turn"])  # builds the BM25 model, episode sizes
    clock.advance(minutes=5)
    late = hstore.write(ml.Turn("s9", "user", "s9 a later okta line", day(2), source="chat"), by=STEWARD)
    sizes["s9"] = 1  # written after the build: a group of one
    retriever = hstore.retriever
    candidates = retriever._visible(STEWARD, hstore._basis(), kinds=["turn"], subject=None, filters=None)
    rids = list(candidates)
    assert late.record_id in rids and len(rids) == sum(sizes.values())
    located, docs = _located_docs(retriever, candidates, rids)
    assert (docs >= 0).sum() == len(rids) - 1  # the late row is no document of the model
    session_of = {rid: session for rid, session in zip(rids, _sessions(hstore, rids), strict=True)}
    # read from the snapshot, and looked up in the build's groups where the model holds the row
    for got in (
        retriever._episodes("acme", rids, candidates, min_rows),
        retriever._episodes("acme", rids, candidates, min_rows, docs=docs, located=located),
    ):
        assert {rid: key is not None for rid, key in got.items()} == {
            rid: sizes[session_of[rid]] >= min_rows for rid in rids
        }
        assert all(key == ("turn", session_of[rid]) for rid, key in got.items() if key is not None)


def test_the_episodes_of_several_kinds_looked_up_by_document_are_those_read_from_the_snapshot(hstore):
    """A BM25 model's documents are read kind by kind, each kind's episodes grouped apart: a
    turn's episode found through its document is the one its row names, after a kind
    (facts of one source and time) whose groups come first."""
    synced = [ml.Fact(f"customer:c{i}", "plan", f"okta plan {i}", day(1), source="sync@v1") for i in range(4)]
    turns = [
        ml.Turn(session, "user", f"{session} line {i} about okta", day(2, i), source="chat", position=i)
        for session, n in (("s3", 3), ("s4", 4), ("s1", 1))
        for i in range(n)
    ]
    hstore.write_many([*synced, *turns], by=STEWARD)
    assert hstore.recall("okta", by=STEWARD, k=3)  # builds the org's BM25 model
    retriever = hstore.retriever
    candidates = retriever._visible(STEWARD, hstore._basis(), kinds=["fact", "turn"], subject=None, filters=None)
    rids = list(candidates)
    located, docs = _located_docs(retriever, candidates, rids)
    assert (docs >= 0).all()
    looked_up = retriever._episodes("acme", rids, candidates, 2, docs=docs, located=located)
    assert looked_up == retriever._episodes("acme", rids, candidates, 2)
    in_episodes = Counter(key[0] for key in looked_up.values() if key is not None)
    assert in_episodes == {"fact": 4, "turn": 7}  # the lone turn of s1 is in none


def _located_docs(retriever: Any, candidates: Any, rids: list[str]) -> tuple[Any, np.ndarray]:
    """What a recall's fusion hands `_episodes`: the located rows, and each of *rids*' BM25 document."""
    located = retriever._locate("acme", candidates, vector=False, bm25=True)
    _, docs = located.rows.locate_each(candidates.where(rids))
    return located, docs


def _sessions(store: ml.MemoryStore, rids: list[str]) -> list[str]:
    rows = store.lake.all_rows("turn")
    where = dict(zip(rows.column("record_id").to_pylist(), rows.column("session_id").to_pylist(), strict=True))
    return [where[rid] for rid in rids]


def test_an_orgs_bm25_documents_and_partition_labels_name_the_same_rows_both_ways(hstore):
    """The org's BM25 model and its index partition hold their ids as codes (`codes.CodeTable`):
    each id found is the id read back at its document or label."""
    seed(hstore, 20)
    assert hstore.recall("plan seats", by=MEMBER, k=3)  # builds the partition, then the BM25 model
    state = hstore.retriever._orgs["acme"]
    part, model_ids = state.partition, state.bm25_ids
    assert part is not None and model_ids is not None
    ids = model_ids.values_at(range(len(model_ids)))
    assert len(ids) == len(set(ids)) == 20 and sorted(ids) == sorted(part.record_ids())
    assert model_ids.find(ids).tolist() == list(range(20))
    assert part.ids_at(part.find(ids)) == ids


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_search_text_of_a_row_is_what_search_text_gives_its_table_for_every_kind(data):
    """Recall's winners take their text from `search_text_of` (Python values), BM25 and the
    embedder from `search_text` (Arrow): one text, whichever built it."""
    import pyarrow as pa

    from memory_lakehouse.records import SPECS

    for kind, spec in SPECS.items():
        values = st.one_of(st.none(), st.text(max_size=6))
        rows = data.draw(
            st.lists(st.fixed_dictionaries({c: values for c in spec.text_columns}), min_size=1, max_size=4)
        )
        if not spec.text_columns:  # no column in its text (Arrow then joins scalars to a scalar)
            assert {spec.search_text_of(r) for r in rows} == {"".join(spec.text_parts)}, kind
            continue
        table = pa.table({c: pa.array([r[c] for r in rows], pa.string()) for c in spec.text_columns})
        assert [spec.search_text_of(r) for r in rows] == spec.search_text(table).to_pylist(), kind


def test_an_appended_tail_read_once_for_every_caller_is_what_each_would_read_alone(hstore, clock):
    """The org's rows appended since a cursor (`Retriever._appended`) are read once per snapshot
    for the index's catch-up, the BM25 count and the position map: whatever columns a caller
    asks, it gets the rows its own read of the tail returns, and a later append is read anew."""
    from memory_lakehouse.candidates import indexable_mask
    from memory_lakehouse.records import SPECS
    from memory_lakehouse.retrieve import _LAYOUT_COLUMNS

    globex = ml.Principal("gina", ml.Scope("globex"), role="steward")
    seed(hstore, 20)
    hstore.recall("plan", by=MEMBER)
    start = hstore.lake.all_rows("fact").num_rows
    for step in range(3):
        clock.advance(minutes=5)
        hstore.write(fact(f"customer:t{step}", "plan", f"tail plan {step}", day(2)), by=MEMBER)
        hstore.write(fact("customer:c1", "plan", f"moved {step}", day(3 + step), scope=ORG), by=STEWARD)
        hstore.write(fact(f"customer:g{step}", "plan", "elsewhere", day(2), scope=ml.Scope("globex")), by=globex)
        tail = hstore.lake.all_rows("fact").slice(start)
        mask = indexable_mask(tail, "acme")
        alone = {
            "_row": (np.flatnonzero(mask.to_numpy(zero_copy_only=False)) + start).tolist(),
            "search_text": SPECS["fact"].search_text(tail.filter(mask)).to_pylist(),
        }
        for name in ("record_id", "division", "team", "actor"):
            alone[name] = tail.column(name).filter(mask).to_pylist()
        assert len(alone["_row"]) == 2 * (step + 1)  # acme's rows since the cursor, not globex's
        for columns in (("_row", "record_id"), ("record_id",), _LAYOUT_COLUMNS, ("record_id",)):
            got = hstore.retriever._appended("acme", "fact", start, columns)
            assert got.column_names == list(columns)
            assert {name: got.column(name).to_pylist() for name in columns} == {name: alone[name] for name in columns}
