"""The HNSW index: filtered search never starves, the planner agrees with HNSW,
files are saved atomically, and a replace leaves no byte of the old partition."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import hnswlib
import numpy as np
import pytest
from _support import present
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_lakehouse import index as index_mod
from memory_lakehouse import mapped
from memory_lakehouse.errors import ConflictError, StoreError, ValidationError
from memory_lakehouse.index import IndexTag, Partition, PartitionedIndex, exact_search

DIM = 32
MODEL = "test-model-v1"


def unit(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def ids(n: int, prefix: str = "rec") -> list[str]:
    return [f"{prefix}_{i:05d}" for i in range(n)]


def built(n: int, dim: int = DIM, seed: int = 0, **kw) -> tuple[Partition, list[str], np.ndarray]:
    rids, vecs = ids(n), unit(n, dim, seed)
    part = Partition.create(dim, **kw)
    part.add(rids, vecs, num_threads=1)
    return part, rids, vecs


@pytest.fixture(scope="module")
def five_thousand() -> tuple[Partition, list[str], np.ndarray]:
    return built(5000, dim=64, seed=1, capacity=5000)


# -- filtered search --------------------------------------------------------------


@pytest.mark.parametrize("plan", ["hnsw", "auto"])
def test_a_one_percent_filter_never_starves_top_k(five_thousand, plan):
    part, rids, _ = five_thousand
    rng = np.random.default_rng(7)
    allowed = {rids[i] for i in rng.choice(len(rids), 50, replace=False)}  # 1%
    for q in unit(20, 64, seed=99):
        got = part.search(q, 8, allowed=allowed, plan=plan)
        assert len(got) == 8
        assert {r for r, _ in got} <= allowed
        scores = [s for _, s in got]
        assert scores == sorted(scores, reverse=True)
    # asking for more than is allowed returns everything allowed, nothing else
    got = part.search(unit(1, 64, seed=5)[0], 100, allowed=allowed, plan=plan)
    assert {r for r, _ in got} == allowed


def test_allowed_ids_missing_from_the_partition_are_ignored(five_thousand):
    part, rids, _ = five_thousand
    allowed = {rids[3], rids[4], "not-indexed-yet", "also-new"}
    got = part.search(unit(1, 64, seed=2)[0], 8, allowed=allowed, plan="hnsw")
    assert {r for r, _ in got} == {rids[3], rids[4]}
    assert part.search(unit(1, 64)[0], 8, allowed={"nothing-here"}) == []
    assert part.search(unit(1, 64)[0], 8, allowed=set()) == []


def test_a_precomputed_mask_gives_the_same_answer_as_ids(five_thousand):
    part, rids, _ = five_thousand
    allowed = set(rids[::10])
    mask = part.mask(allowed)
    q = unit(1, 64, seed=3)[0]
    for plan in ("exact", "hnsw"):
        assert part.search(q, 8, allowed=mask, plan=plan) == part.search(q, 8, allowed=allowed, plan=plan)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 120),
    k=st.integers(1, 20),
    picks=st.sets(st.integers(0, 150), max_size=60),
    seed=st.integers(0, 2**16),
)
def test_filtered_search_returns_min_of_k_and_allowed_on_every_path(n, k, picks, seed):
    part, rids, _ = built(n, seed=seed, capacity=8)
    allowed = {f"rec_{i:05d}" for i in picks}  # some beyond n: not in the partition
    present = allowed & set(rids)
    q = unit(1, seed=seed + 1)[0]
    for plan in ("auto", "exact", "hnsw"):
        got = part.search(q, k, allowed=allowed, plan=plan)
        assert len(got) == min(k, len(present))
        assert {r for r, _ in got} <= present


# -- planner ----------------------------------------------------------------------


def test_exact_and_hnsw_paths_agree_on_small_data():
    part, rids, vecs = built(300, seed=4)
    allowed = set(rids[::3])
    for q in unit(10, seed=11):
        exact = part.search(q, 10, plan="exact")
        hnsw = part.search(q, 10, plan="hnsw", ef=300)
        assert {r for r, _ in exact} == {r for r, _ in hnsw}
        direct = exact_search(q, vecs, rids, 10)
        assert [r for r, _ in exact] == [r for r, _ in direct]
        assert [s for _, s in exact] == pytest.approx([s for _, s in direct], abs=1e-5)
        fe = part.search(q, 10, allowed=allowed, plan="exact")
        fh = part.search(q, 10, allowed=allowed, plan="hnsw", ef=300)
        assert {r for r, _ in fe} == {r for r, _ in fh}
        for (_, a), (_, b) in zip(fe, fh, strict=True):
            assert a == pytest.approx(b, abs=1e-5)


def test_the_planner_says_which_path_it_took():
    part, rids, _ = built(400, seed=5, exact_threshold=50)
    q = unit(1, seed=6)[0]
    lines: list[str] = []
    part.search(q, 5, allowed=set(rids[:20]), trace=lines.append)
    assert lines == ["exact scan over 20 allowed (1 run read in place)"]
    lines.clear()
    part.search(q, 5, allowed=set(rids[:250:5]), trace=lines.append)  # 50 rows apart: gathered
    assert lines == ["exact scan over 50 allowed"]
    lines.clear()
    part.search(q, 5, allowed=set(rids[:255:5]), trace=lines.append)
    assert lines == ["hnsw ef=64, filter 51 allowed"]
    lines.clear()
    part.search(q, 5, allowed=set(rids), trace=lines.append)  # excludes nothing: no callback
    assert lines == ["hnsw ef=64, unfiltered over 400"]
    lines.clear()
    part.search(q, 40, ef=10, trace=lines.append)
    assert lines == ["hnsw ef=80, unfiltered over 400"]  # ef is raised to 2*k


def test_exact_search_scores_cosine_similarity_best_first():
    got = exact_search(
        np.array([1.0, 0.0]),
        np.array([[-3.0, 0.0], [2.0, 2.0], [5.0, 0.0], [0.0, 0.0]]),
        ["left", "diag", "right", "zero"],
        3,
    )
    assert [r for r, _ in got] == ["right", "diag", "zero"]
    assert got[0][1] == pytest.approx(1.0)
    assert got[1][1] == pytest.approx(2**-0.5)
    assert exact_search(np.array([1.0, 0.0]), np.zeros((0, 2)), [], 3) == []


def test_bad_queries_and_vectors_are_validation_errors():
    part, _, _ = built(10)
    with pytest.raises(ValidationError):
        part.search(np.ones(DIM + 1), 3)
    with pytest.raises(ValidationError):
        part.search(np.full(DIM, np.nan), 3)
    with pytest.raises(ValidationError):
        part.search(np.ones(DIM), 0)
    with pytest.raises(ValidationError):
        part.search(np.ones(DIM), 3, allowed="rec_00001")
    with pytest.raises(ValidationError):
        part.add(["a", "b"], unit(3))
    with pytest.raises(ValidationError):
        part.add([""], unit(1))
    with pytest.raises(ValidationError):
        exact_search(np.ones(3), np.ones((2, 4)), ["a", "b"], 1)


# -- adding -----------------------------------------------------------------------


def test_adding_an_existing_id_is_a_no_op():
    part, rids, vecs = built(50, seed=8)
    q = vecs[7]
    before = part.search(q, 1, plan="exact")
    part.add([rids[7], rids[7]], -unit(2, seed=9), num_threads=1)  # same id, other vectors
    assert len(part) == 50
    assert part.search(q, 1, plan="exact") == before
    assert before[0][0] == rids[7] and before[0][1] == pytest.approx(1.0, abs=1e-5) and len(before) == 1
    part.add(["new", "new"], unit(2, seed=10), num_threads=1)  # duplicates in one batch: first wins
    assert len(part) == 51 and "new" in part


@given(
    batches=st.lists(
        st.lists(st.sampled_from([f"r{i}" for i in range(40)] + ["ü-ï", "long-" * 9]), max_size=30), max_size=6
    )
)
@settings(max_examples=40, deadline=None)
def test_labels_and_record_ids_name_each_other_after_adds_a_save_and_a_rebuild(tmp_path_factory, batches):
    """A partition keeps its ids as codes (`codes.CodeTable`, a label being its id's code):
    whatever batches were added (ids held, repeated, new), each id is found at the label it
    was added at, and read back there; so after a save and load, and in a partition rebuilt
    without some ids (labels given afresh, in order)."""
    part, order = Partition.create(DIM, capacity=4), list[str]()
    for batch in batches:
        part.add(batch, unit(len(batch), seed=len(order)), num_threads=1)
        order += [rid for rid in dict.fromkeys(batch) if rid not in order]
    assert len(part) == len(order) and part.record_ids() == order
    assert part.find([*order, "r-none"]).tolist() == [*range(len(order)), -1]
    assert part.ids_at(list(range(len(order)))[::-1]) == order[::-1]
    assert [rid in part for rid in order] == [True] * len(order) and "r-none" not in part
    if order:
        directory = tmp_path_factory.mktemp("p") / "part"
        part.save(directory, IndexTag("m", DIM, {}, len(part)))
        loaded = Partition.load(directory)
        assert loaded is not None and loaded[0].record_ids() == order
        assert loaded[0].find(order[::-1]).tolist() == list(range(len(order)))[::-1]
    kept = order[1::2]
    rebuilt = part.rebuilt_without(order[::2], num_threads=1)
    assert rebuilt.record_ids() == kept and rebuilt.find(kept).tolist() == list(range(len(kept)))


def test_capacity_grows_as_vectors_arrive():
    part = Partition.create(DIM, capacity=4)
    vecs = unit(300, seed=12)
    for start in range(0, 300, 37):
        part.add(ids(300)[start : start + 37], vecs[start : start + 37], num_threads=1)
    assert len(part) == 300 and part.capacity >= 300
    for i in (0, 150, 299):
        assert part.search(vecs[i], 1, plan="hnsw", ef=300)[0][0] == f"rec_{i:05d}"
        assert part.search(vecs[i], 1, plan="exact")[0][0] == f"rec_{i:05d}"


# -- files ------------------------------------------------------------------------


def test_save_and_load_keep_results_and_tag(tmp_path):
    part, rids, _ = built(500, seed=13)
    tag = IndexTag(MODEL, DIM, {"facts": 4, "episodes": 2}, 500)
    part.save(tmp_path / "p", tag)
    loaded = Partition.load(tmp_path / "p", model=MODEL, dim=DIM)
    assert loaded is not None
    again, again_tag = loaded
    assert again_tag == tag and len(again) == 500 and rids[42] in again
    allowed = set(rids[::7])
    for q in unit(5, seed=14):
        assert again.search(q, 8, plan="exact") == part.search(q, 8, plan="exact")
        assert again.search(q, 8, plan="hnsw") == part.search(q, 8, plan="hnsw")
        assert again.search(q, 8, allowed=allowed) == part.search(q, 8, allowed=allowed)
    # a loaded partition keeps growing
    again.add(["later"], unit(1, seed=15), num_threads=1)
    assert "later" in again and len(again) == 501
    # saving over an existing directory swaps it
    again.save(tmp_path / "p", IndexTag(MODEL, DIM, {"facts": 5}, 501))
    loaded_tag = Partition.load(tmp_path / "p")
    assert loaded_tag is not None and loaded_tag[1].versions == {"facts": 5}
    assert [p.name for p in tmp_path.iterdir()] == ["p"]


def test_load_returns_none_for_missing_foreign_or_corrupt_files(tmp_path):
    assert Partition.load(tmp_path / "nothing") is None
    part, _, _ = built(40)
    part.save(tmp_path / "p", IndexTag(MODEL, DIM, {}, 40))
    assert Partition.load(tmp_path / "p", model="other-model") is None
    assert Partition.load(tmp_path / "p", dim=DIM * 2) is None
    assert Partition.load(tmp_path / "p", model=MODEL, dim=DIM) is not None

    data = bytearray((tmp_path / "p" / "vectors.npy").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "p" / "vectors.npy").write_bytes(bytes(data))
    assert Partition.load(tmp_path / "p") is None

    part.save(tmp_path / "q", IndexTag(MODEL, DIM, {}, 40))
    (tmp_path / "q" / "tag.json").write_text("{not json")
    assert Partition.load(tmp_path / "q") is None


def test_a_corrupt_graph_file_is_never_read_a_walk_builds_the_graph_from_the_vectors(tmp_path, monkeypatch):
    """`load` checks the graph file's CRC only when the graph is needed (a walk, or a save that
    would copy it): a partition with a corrupt graph loads, and its first walk builds the graph
    from the float32 copy instead of handing hnswlib the file; a save writes that graph, not
    the corrupt bytes."""
    part, rids, vecs = built(300)
    part.save(tmp_path / "p", IndexTag(MODEL, DIM, {}, 300))
    graph = tmp_path / "p" / "index.hnsw"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF
    graph.write_bytes(bytes(data))
    loaded, _ = present(Partition.load(tmp_path / "p"))
    saved_again, _ = present(Partition.load(tmp_path / "p"))
    handed: list[str] = []  # the files hnswlib is asked to read

    class Index(hnswlib.Index):
        def load_index(self, path: str, *args: object, **kwargs: object) -> None:
            handed.append(path)
            super().load_index(path, *args, **kwargs)

    monkeypatch.setattr(hnswlib, "Index", Index)
    queries = unit(5, seed=9)
    for q in queries:
        lines: list[str] = []
        walked = loaded.search(q, 5, plan="hnsw", trace=lines.append)
        assert [rid for rid, _ in walked] == [rid for rid, _ in part.search(q, 5, plan="exact")], lines
    assert loaded._graph_file is None and loaded._index is not None  # built here, the file let go of
    assert handed == []
    saved_again.save(tmp_path / "q", IndexTag(MODEL, DIM, {}, 300))
    assert (tmp_path / "q" / "index.hnsw").read_bytes() != bytes(data)
    again, _ = present(Partition.load(tmp_path / "q"))
    assert again._graph_file_intact()
    assert [r for r, _ in again.search(queries[0], 5, plan="hnsw")] == [r for r, _ in part.search(queries[0], 5)]
    assert handed == [str(tmp_path / "q" / "index.hnsw")]  # an intact file is read


def test_tags_must_match_what_they_describe(tmp_path):
    part, _, _ = built(10)
    with pytest.raises(ValidationError):
        part.save(tmp_path / "p", IndexTag(MODEL, DIM, {}, 11))
    with pytest.raises(ValidationError):
        IndexTag(MODEL, DIM, {"facts": "7"}, 1)  # type: ignore[dict-item]  # the wrong type is the point
    index = PartitionedIndex(tmp_path, MODEL, DIM)
    with pytest.raises(ValidationError):
        index.put("acme", part, IndexTag("another-model", DIM, {}, 10))
    with pytest.raises(ValidationError):
        index.put("../escape", part, IndexTag(MODEL, DIM, {}, 10))


def test_the_model_name_is_part_of_the_cache_key(tmp_path):
    part, _, _ = built(20)
    PartitionedIndex(tmp_path, MODEL, DIM).put("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 20))
    assert PartitionedIndex(tmp_path, MODEL, DIM).partition("acme") is not None
    assert PartitionedIndex(tmp_path, "test-model-v2", DIM).partition("acme") is None
    assert PartitionedIndex(tmp_path, MODEL, DIM * 2).tag("acme") is None


def test_partitions_load_lazily_per_org(tmp_path):
    index = PartitionedIndex(tmp_path, MODEL, DIM)
    a, a_ids, _ = built(30, seed=1)
    b, b_ids, _ = built(30, seed=2)
    index.put("acme", a, IndexTag(MODEL, DIM, {"facts": 1}, 30))
    index.put("globex", b, IndexTag(MODEL, DIM, {"facts": 2}, 30))
    fresh = PartitionedIndex(tmp_path, MODEL, DIM)
    assert fresh.orgs() == ["acme", "globex"]
    assert fresh.partition("initech") is None and fresh.tag("initech") is None
    assert present(fresh.tag("globex")).versions == {"facts": 2}
    q = unit(1, seed=3)[0]
    assert present(fresh.partition("acme")).search(q, 5) == a.search(q, 5)


def test_put_keeps_one_generation_and_refuses_to_go_back(tmp_path):
    index = PartitionedIndex(tmp_path, MODEL, DIM)
    part, rids, vecs = built(30)
    index.put("acme", part, IndexTag(MODEL, DIM, {"facts": 3}, 30))
    part.add(["r_new"], unit(1, seed=77), num_threads=1)
    index.put("acme", part, IndexTag(MODEL, DIM, {"facts": 4}, 31))
    assert {p.parent.name for p in index.files()} == {"gen-000002"}
    stale, _, _ = built(30)
    with pytest.raises(ConflictError):
        index.put("acme", stale, IndexTag(MODEL, DIM, {"facts": 3}, 30))
    assert present(PartitionedIndex(tmp_path, MODEL, DIM).tag("acme")).count == 31


def test_replace_leaves_no_file_of_the_old_partition(tmp_path):
    forgotten = "fac_forgotten_customer_728"
    rids = ids(200) + [forgotten]
    vecs = unit(201, seed=21)
    old = Partition.create(DIM)
    old.add(rids, vecs, num_threads=1)
    index = PartitionedIndex(tmp_path, MODEL, DIM)
    index.put("acme", old, IndexTag(MODEL, DIM, {"facts": 9}, 201))
    # an unfinished build from before the forget, left by a crash
    stray = index.base / "acme" / ".gen-000002.tmp-crashed"
    stray.mkdir()
    (stray / "ids.json").write_text(json.dumps([forgotten]))

    secret_vector = vecs[-1].astype(np.float32).tobytes()
    before = index.files()
    assert any(forgotten.encode() in p.read_bytes() for p in before)  # the check can see it
    assert any(secret_vector in p.read_bytes() for p in before)

    rebuilt = old.rebuilt_without({forgotten})
    assert len(rebuilt) == 200 and forgotten not in rebuilt
    index.replace("acme", rebuilt, IndexTag(MODEL, DIM, {"facts": 10}, 200))

    after = index.files()
    assert after and not set(before) & set(after)
    assert all(not p.exists() for p in before)
    for path in (p for p in Path(tmp_path).rglob("*") if p.is_file()):
        data = path.read_bytes()
        assert forgotten.encode() not in data, path
        assert secret_vector not in data, path
    again = PartitionedIndex(tmp_path, MODEL, DIM)
    reloaded = again.partition("acme")
    assert reloaded is not None and forgotten not in reloaded and len(reloaded) == 200
    assert index.partition("acme") is rebuilt


def test_replace_wins_over_newer_versions(tmp_path):
    # a store restored from backup has lower table versions; a full rebuild still wins
    index = PartitionedIndex(tmp_path, MODEL, DIM)
    part, _, _ = built(10)
    index.put("acme", part, IndexTag(MODEL, DIM, {"facts": 50}, 10))
    index.replace("acme", part, IndexTag(MODEL, DIM, {"facts": 3}, 10))
    assert present(PartitionedIndex(tmp_path, MODEL, DIM).tag("acme")).versions == {"facts": 3}


def test_drop_deletes_the_partition(tmp_path):
    index = PartitionedIndex(tmp_path, MODEL, DIM)
    part, _, _ = built(10)
    index.put("acme", part, IndexTag(MODEL, DIM, {}, 10))
    index.put("globex", part, IndexTag(MODEL, DIM, {}, 10))
    index.drop("acme")
    assert index.partition("acme") is None and index.files("acme") == []
    assert index.orgs() == ["globex"] and index.files()
    index.drop("never-there")  # nothing to do


def test_a_corrupt_partition_reads_as_missing_until_rebuilt(tmp_path):
    index = PartitionedIndex(tmp_path, MODEL, DIM)
    part, _, _ = built(10)
    index.put("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 10))
    (index.files("acme")[0]).write_bytes(b"garbage")
    fresh = PartitionedIndex(tmp_path, MODEL, DIM)
    assert fresh.partition("acme") is None
    fresh.replace("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 10))
    assert PartitionedIndex(tmp_path, MODEL, DIM).partition("acme") is not None


def test_save_failures_are_store_errors(tmp_path):
    part, _, _ = built(5)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError):
        part.save(blocker / "p", IndexTag(MODEL, DIM, {}, 5))


def test_the_default_planner_scans_exactly_up_to_about_sixty_four_sqrt_n(five_thousand):
    from memory_lakehouse.index import exact_scan_limit

    part, rids, _ = five_thousand
    assert exact_scan_limit(100_000) == 20238 and exact_scan_limit(100) == 2048
    assert part.exact_limit() == exact_scan_limit(5000) == 4525


def test_the_planner_counts_rows_read_in_place_at_a_quarter_of_gathered_ones():
    from memory_lakehouse.index import GATHER_COST

    part, rids, _ = built(2000, seed=3, exact_threshold=100)
    q = unit(1, seed=4)[0]
    lines: list[str] = []
    scattered = rids[:: GATHER_COST + 1]  # no two within reach of a run: each one is gathered
    part.search(q, 8, allowed=set(scattered[:100]), trace=lines.append)
    part.search(q, 8, allowed=set(scattered[:101]), trace=lines.append)
    part.search(q, 8, allowed=set(rids[: 100 * GATHER_COST]), trace=lines.append)  # one run of 400 rows
    part.search(q, 8, allowed=set(rids[: 100 * GATHER_COST + 1]), trace=lines.append)
    assert lines == [
        "exact scan over 100 allowed",
        "hnsw ef=64, filter 101 allowed",
        "exact scan over 400 allowed (1 run read in place)",
        "hnsw ef=64, filter 401 allowed",
    ]


def test_exact_scans_read_runs_in_place_and_gather_the_rest_with_the_same_scores():
    """Runs of nearby rows (a reader's scopes, where rows lie in scope order) are read in
    place, scattered ones gathered: every mix scores exactly as the rows taken one by one."""
    part, rids, vecs = built(3000, seed=11)
    rng = np.random.default_rng(12)
    for trial in range(12):
        keep: set[int] = set()
        for _ in range(int(rng.integers(0, 5))):  # a few dense stretches, some with gaps
            start = int(rng.integers(0, 2900))
            stretch = np.arange(start, min(3000, start + int(rng.integers(10, 600))))
            keep.update(stretch[rng.random(len(stretch)) < rng.uniform(0.3, 1.0)].tolist())
        keep.update(rng.choice(3000, int(rng.integers(1, 200)), replace=False).tolist())  # and scattered ones
        chosen = sorted(keep)
        q = unit(1, seed=100 + trial)[0]
        got = part.search(q, 10, allowed={rids[i] for i in chosen}, plan="exact")
        want = exact_search(q, vecs[chosen], [rids[i] for i in chosen], 10)
        assert [r for r, _ in got] == [r for r, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


@pytest.mark.parametrize("every", [2, 3, 10, 50])  # dense masks scan all rows, sparse ones gather
def test_exact_scans_match_exact_search_on_the_allowed_rows(five_thousand, every):
    part, rids, vecs = five_thousand
    keep = list(range(0, len(rids), every))
    q = unit(1, 64, seed=every)[0]
    got = part.search(q, 12, allowed={rids[i] for i in keep}, plan="exact")
    want = exact_search(q, vecs[keep], [rids[i] for i in keep], 12)
    assert [r for r, _ in got] == [r for r, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


def test_an_exact_scan_past_its_shortlist_finds_the_float32_top_k_by_score(monkeypatch):
    """Over more rows than a shortlist, a scan ranks by int8 codes and rescores the best
    `SHORTLIST_FACTOR` x k in float32: what it returns is the float32 top k, scores and all."""
    monkeypatch.setattr(index_mod, "CODES_FROM", 0)  # by codes past the shortlist, at any size
    part, rids, vecs = built(3000, seed=43)
    rng = np.random.default_rng(44)
    for trial, q in enumerate(unit(120, seed=45)):
        k = int(rng.integers(1, 40))
        chosen = np.flatnonzero(rng.random(3000) < rng.uniform(0.05, 1.0))  # gathered, in runs, or whole
        assert len(chosen) > index_mod.SHORTLIST_FLOOR
        got = part.search(q, k, allowed={rids[i] for i in chosen}, plan="exact")
        cosines = np.vecdot(vecs[chosen], q)
        assert [s for _, s in got] == pytest.approx(np.sort(cosines)[::-1][:k].tolist(), abs=1e-6), trial
        assert {rids[chosen[i]] for i in np.flatnonzero(cosines > got[-1][1] + 1e-6)} <= {r for r, _ in got}


def test_int8_codes_hold_each_row_to_half_a_unit_and_zero_rows_to_zero():
    rows = np.vstack([unit(50, seed=46), np.zeros((2, DIM), dtype=np.float32)])
    codes, scales = np.empty(rows.shape, dtype=np.int8), np.empty(len(rows), dtype=np.float32)
    index_mod._quantize_into(rows, codes, scales)
    assert np.all(np.abs(codes.astype(np.float32) * scales[:, None] - rows) <= scales[:, None] / 2 + 1e-7)
    assert np.array_equal(np.abs(codes[:50]).max(axis=1), np.full(50, 127))  # each row's largest component is ±127
    assert not codes[50:].any() and not scales[50:].any()


def test_a_partition_saved_before_int8_codes_loads_with_them_computed_and_saves_them(tmp_path, monkeypatch):
    monkeypatch.setattr(index_mod, "CODES_FROM", 0)  # every scan past its shortlist reads the codes
    part, rids, _ = built(600, seed=47)
    PartitionedIndex(tmp_path, MODEL, DIM).replace("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 600))
    (gen,) = {p.parent for p in PartitionedIndex(tmp_path, MODEL, DIM).files("acme")}
    meta = json.loads((gen / "tag.json").read_text())
    meta["format"] = 1  # as the index saved partitions before the codes
    for name in ("codes.npy", "scales.npy"):
        del meta["files"][name]
        (gen / name).unlink()
    (gen / "tag.json").write_text(json.dumps(meta))
    loaded = present(PartitionedIndex(tmp_path, MODEL, DIM).partition("acme"))
    assert loaded._vectors.mapped and np.array_equal(loaded._codes.slice(0, 600), part._codes.slice(0, 600))
    allowed = set(rids[::3])
    for q in unit(5, seed=48):
        assert loaded.search(q, 8, allowed=allowed) == part.search(q, 8, allowed=allowed)
    PartitionedIndex(tmp_path, MODEL, DIM).put("acme", loaded, IndexTag(MODEL, DIM, {"facts": 2}, 600))
    assert {p.name for p in PartitionedIndex(tmp_path, MODEL, DIM).files("acme")} >= {"codes.npy", "scales.npy"}
    again = present(PartitionedIndex(tmp_path, MODEL, DIM).partition("acme"))
    assert again._codes.mapped and np.array_equal(again._scales.slice(0, 600), part._scales.slice(0, 600))


def test_vectors_of_returns_the_stored_unit_vectors():
    part, rids, vecs = built(20)
    np.testing.assert_allclose(part.vectors_of([rids[3], rids[1]]), vecs[[3, 1]], atol=1e-6)
    with pytest.raises(ValidationError):
        part.vectors_of(["missing"])


# -- memory -----------------------------------------------------------------------


def test_adding_scales_rows_in_chunks_exactly_as_in_one_pass(monkeypatch):
    monkeypatch.setattr(index_mod, "_ADD_CHUNK", 7)  # many chunks, and a ragged last one
    raw = np.random.default_rng(21).standard_normal((40, DIM)).astype(np.float32) * 5
    raw[3] = 0.0  # an all-zero row stays zero
    part = Partition.create(DIM, capacity=8)
    part.add(ids(10), raw[:10], num_threads=1)
    # overlaps what is there and repeats itself: only the 30 new ids are taken, in order
    part.add(ids(40)[5:] + [ids(40)[20]], np.vstack([raw[5:], raw[20:21]]), num_threads=1)
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    want = raw / np.where(norms > 0, norms, 1.0)
    assert len(part) == 40
    assert np.array_equal(part.vectors_of(ids(40)), want)


def test_a_bad_row_in_a_later_chunk_adds_nothing(monkeypatch):
    monkeypatch.setattr(index_mod, "_ADD_CHUNK", 4)
    part, _, _ = built(10)
    bad = unit(12, seed=22)
    bad[11, 0] = np.nan
    with pytest.raises(ValidationError):
        part.add(ids(12, prefix="new"), bad, num_threads=1)
    assert len(part) == 10 and "new_00000" not in part


def test_a_rebuilt_or_loaded_partition_reads_its_vectors_from_its_file(tmp_path):
    part, rids, _ = built(600, seed=23)
    queries, allowed = unit(5, seed=24), set(rids[::9])
    before = [(part.search(q, 8, plan="exact"), part.search(q, 8, allowed=allowed)) for q in queries]
    idx = PartitionedIndex(tmp_path, MODEL, DIM)
    idx.replace("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 600))
    assert part._vectors.mapped  # a read-only map of vectors.npy, not a copy in memory
    assert [(part.search(q, 8, plan="exact"), part.search(q, 8, allowed=allowed)) for q in queries] == before
    loaded = present(PartitionedIndex(tmp_path, MODEL, DIM).partition("acme"))
    assert loaded._vectors.mapped
    assert [(loaded.search(q, 8, plan="exact"), loaded.search(q, 8, allowed=allowed)) for q in queries] == before
    assert np.array_equal(loaded.vectors_of(rids[:50]), part.vectors_of(rids[:50]))


def test_a_mapped_partition_keeps_serving_after_its_files_are_replaced(tmp_path):
    part, _, _ = built(300, seed=25)
    idx = PartitionedIndex(tmp_path, MODEL, DIM)
    idx.replace("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 300))
    q = unit(1, seed=26)[0]
    before = part.search(q, 8, plan="exact")
    other, _, _ = built(5, seed=27)
    idx.replace("acme", other, IndexTag(MODEL, DIM, {"facts": 2}, 5))  # deletes every file `part` came from
    assert len(idx.files("acme")) == 6  # the new generation only: graph, vectors, codes, scales, ids, tag
    assert part.search(q, 8, plan="exact") == before


@pytest.mark.parametrize("codes_from", [0, index_mod.CODES_FROM])  # scans by int8 codes, and by float32 rows
def test_adding_to_a_mapped_partition_keeps_the_map_and_serves_its_rows_with_the_new_ones(
    tmp_path, monkeypatch, codes_from
):
    """Rows added after a map go to a tail of their own (the map is never copied into memory:
    that was 16-29 ms of page faults on an org's first write after a rebuild), and every read
    sees the map and the tail as one: exact scans whole and gathered, the graph, vectors_of,
    a rebuild without some rows, and a save."""
    monkeypatch.setattr(index_mod, "CODES_FROM", codes_from)
    part, rids, vecs = built(200, seed=28)
    PartitionedIndex(tmp_path, MODEL, DIM).replace("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 200))
    loaded = PartitionedIndex(tmp_path, MODEL, DIM).partition("acme")
    assert loaded is not None
    extra = unit(30, seed=29)
    for start in (0, 10, 20):  # three adds: the tail grows past its first room
        loaded.add(ids(30, prefix="late")[start : start + 10], extra[start : start + 10], num_threads=1)
    assert loaded._vectors.mapped and len(loaded._vectors.data) == 200  # the map, untouched
    assert loaded._codes.mapped and len(loaded._codes.data) == 200 and loaded._scales.mapped
    assert len(loaded) == 230
    reference = Partition.create(DIM)
    reference.add(rids + ids(30, prefix="late"), np.vstack([vecs, extra]), num_threads=1)
    np.testing.assert_allclose(
        loaded.vectors_of([rids[0], "late_00029", rids[199]]), [vecs[0], extra[29], vecs[199]], atol=1e-6
    )
    allowed_sets = [None, set(rids[::7]) | {"late_00003", "late_00017"}]  # whole scans, and gathered ones
    for q in unit(6, seed=32):
        for allowed in allowed_sets:
            assert loaded.search(q, 8, plan="exact", allowed=allowed) == reference.search(
                q, 8, plan="exact", allowed=allowed
            )
        assert loaded.search(q, 5, plan="hnsw")  # the graph, read back, holds the tail's rows too
    assert loaded.search(extra[3], 1, plan="hnsw")[0][0] == "late_00003"
    smaller = loaded.rebuilt_without({rids[1], "late_00004"})
    assert len(smaller) == 228 and "late_00004" not in smaller
    np.testing.assert_allclose(smaller.vectors_of(["late_00005", rids[2]]), [extra[5], vecs[2]], atol=1e-6)
    PartitionedIndex(tmp_path, MODEL, DIM).put("acme", loaded, IndexTag(MODEL, DIM, {"facts": 2}, 230))
    again = present(PartitionedIndex(tmp_path, MODEL, DIM).partition("acme"))
    np.testing.assert_allclose(again.vectors_of(rids + ids(30, prefix="late")), np.vstack([vecs, extra]), atol=1e-6)


def test_partitions_stay_in_memory_where_files_cannot_be_mapped(tmp_path, monkeypatch):
    monkeypatch.setattr(mapped, "_mmap_calls", lambda: None)
    part, _, _ = built(100, seed=30)
    idx = PartitionedIndex(tmp_path, MODEL, DIM)
    idx.replace("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 100))
    loaded = present(PartitionedIndex(tmp_path, MODEL, DIM).partition("acme"))
    assert not part._vectors.mapped and not loaded._vectors.mapped
    q = unit(1, seed=31)[0]
    assert loaded.search(q, 8, plan="exact") == part.search(q, 8, plan="exact")


def in_memory(part: Partition) -> bool:
    """Whether the partition holds its HNSW graph in memory (not only in its index.hnsw)."""
    return part._index is not None


def test_a_rebuilt_or_loaded_partition_reads_its_graph_back_only_for_a_walk(tmp_path):
    part, rids, _ = built(600, seed=32)
    queries, allowed = unit(5, seed=33), set(rids[::3])
    before = [part.search(q, 8, allowed=allowed, plan="hnsw") for q in queries]
    idx = PartitionedIndex(tmp_path, MODEL, DIM)
    idx.replace("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 600))
    loaded = present(PartitionedIndex(tmp_path, MODEL, DIM).partition("acme"))
    for p in (part, loaded):
        assert not in_memory(p)  # on disk: exact scans never need it
        assert [p.search(q, 8, plan="exact") for q in queries] == [part.search(q, 8, plan="exact") for q in queries]
        assert not in_memory(p)
        assert [p.search(q, 8, allowed=allowed, plan="hnsw") for q in queries] == before  # the same graph
        assert in_memory(p)


def test_rows_added_while_the_graph_is_on_disk_join_it_for_the_next_walk(tmp_path):
    part, rids, vecs = built(300, seed=34)
    PartitionedIndex(tmp_path, MODEL, DIM).replace("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 300))
    loaded = present(PartitionedIndex(tmp_path, MODEL, DIM).partition("acme"))
    extra = unit(40, seed=35)
    loaded.add(ids(40, prefix="late"), extra, num_threads=1)
    assert not in_memory(loaded) and len(loaded) == 340
    for i in (0, 17, 39):
        assert loaded.search(extra[i], 1, plan="hnsw")[0][0] == f"late_{i:05d}"
    assert in_memory(loaded) and loaded._graph().element_count == 340
    assert loaded.search(vecs[5], 1, plan="hnsw")[0][0] == rids[5]
    idx = PartitionedIndex(tmp_path, MODEL, DIM)
    idx.put("acme", loaded, IndexTag(MODEL, DIM, {"facts": 2}, 340))
    again = present(PartitionedIndex(tmp_path, MODEL, DIM).partition("acme"))
    assert again.search(extra[17], 1, plan="hnsw")[0][0] == "late_00017"


def test_a_graph_left_on_disk_is_saved_again_and_survives_its_files_going(tmp_path):
    part, rids, vecs = built(300, seed=36)
    idx = PartitionedIndex(tmp_path, MODEL, DIM)
    idx.replace("acme", part, IndexTag(MODEL, DIM, {"facts": 1}, 300))
    loaded = present(PartitionedIndex(tmp_path, MODEL, DIM).partition("acme"))
    q, allowed = unit(1, seed=37)[0], set(rids[::2])
    before = part.search(q, 8, allowed=allowed, plan="hnsw")
    idx.put("acme", loaded, IndexTag(MODEL, DIM, {"facts": 2}, 300))  # copies the graph file, reads nothing back
    assert not in_memory(loaded) and len(idx.files("acme")) == 6
    assert (
        present(PartitionedIndex(tmp_path, MODEL, DIM).partition("acme")).search(q, 8, allowed=allowed, plan="hnsw")
        == before
    )
    other, _, _ = built(5, seed=38)
    idx.replace("acme", other, IndexTag(MODEL, DIM, {"facts": 3}, 5))  # deletes every file `loaded` came from
    got = loaded.search(q, 8, allowed=allowed, plan="hnsw")  # built again from its float32 copy
    assert len(got) == 8 and {r for r, _ in got} <= allowed
    assert loaded.search(vecs[7], 1, plan="hnsw")[0][0] == rids[7]


def resident_kb(view: np.ndarray) -> int:
    """How much of the map holding *view* is in this process's RSS (its /proc/self/smaps entry)."""
    address = view.__array_interface__["data"][0]
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        span = line.split()[0]
        if "-" in span and all(c in "0123456789abcdef-" for c in span):
            low, high = (int(x, 16) for x in span.split("-"))
            if low <= address < high:
                rss = next(ln for ln in lines[i + 1 :] if ln.startswith("Rss:"))
                return int(rss.split()[1])
    raise AssertionError("no mapping holds the view")


needs_maps = pytest.mark.skipif(
    mapped._mmap_calls() is None or not Path("/proc/self/smaps").exists(), reason="needs mmap and /proc"
)


@needs_maps
def test_releasing_a_maps_pages_takes_them_out_of_rss_and_keeps_its_data(tmp_path):
    rows = unit(4000, 384, seed=49)
    np.save(tmp_path / "rows.npy", rows)
    view = present(mapped.map_npy(tmp_path / "rows.npy", (4000, 384)))
    assert float(np.abs(view).sum()) > 0 and resident_kb(view) >= rows.nbytes // 1024  # every page read
    assert mapped.release_pages(view[10:20])  # any view of the map lets go of the whole map
    assert resident_kb(view) < 64
    assert np.array_equal(view, rows)  # read back from the file as it is touched again
    assert not mapped.release_pages(rows)  # memory that is not one of its maps is never touched
    assert np.array_equal(rows, unit(4000, 384, seed=49))


@needs_maps
def test_only_the_org_read_last_keeps_its_float32_pages_in_rss(tmp_path, monkeypatch):
    """A read of one org lets go of the float32 pages the read before it left mapped in another
    org (by codes or by float32 rows alike), and a second read of the same org keeps its own.
    A scan by codes maps none: it reads its shortlist's float32 rows from the file, as the
    fusion's cosines do where no scan paged the map in (`_Rows.fetch`)."""
    idx = PartitionedIndex(tmp_path, MODEL, 384)
    rids: dict[str, list[str]] = {}
    for seed, org in enumerate(("acme", "globex")):
        part, rids[org], _ = built(4000, dim=384, seed=50 + seed)
        idx.replace(org, part, IndexTag(MODEL, 384, {"facts": 1}, 4000))
    q = unit(1, 384, seed=52)[0]
    for codes_from, by_codes in ((10**9, False), (0, True)):
        monkeypatch.setattr(index_mod, "CODES_FROM", codes_from)
        reopened = PartitionedIndex(tmp_path, MODEL, 384)
        acme, globex = present(reopened.partition("acme")), present(reopened.partition("globex"))
        first = acme.search(q, 8, allowed=set(rids["acme"][:3000]), plan="exact")
        assert (resident_kb(acme._vectors.data) >= 64) is not by_codes
        assert (resident_kb(acme._codes.data) > 0) is by_codes
        globex.search(q, 8, allowed=set(rids["globex"][:3000]), plan="exact")
        assert resident_kb(acme._vectors.data) < 64
        assert (resident_kb(globex._vectors.data) >= 64) is not by_codes
        assert acme.search(q, 8, allowed=set(rids["acme"][:3000]), plan="exact") == first  # let go of, not lost
        globex.search(q, 8, allowed=set(rids["globex"][:3000]), plan="exact")
        globex.search(q, 8, allowed=set(rids["globex"][:2000]), plan="exact")
        kept = resident_kb(globex._vectors.data)
        assert (kept >= 64) is not by_codes
        globex.vectors_of(rids["globex"][:50])  # the fusion's cosines: through the map where a scan paged it in
        assert (resident_kb(globex._vectors.data) >= 64) is not by_codes
        acme.vectors_of(rids["acme"][:50])  # ... and they read an org too
        assert resident_kb(globex._vectors.data) < 64


@pytest.mark.parametrize("size", [0, 1, 4096, 8191, 8192, 8193, 3 * 8192 + 5])
def test_a_files_crc_summed_through_its_map_window_by_window_is_zlibs_over_its_bytes(tmp_path, monkeypatch, size):
    """`_crc32` sums a map in windows, letting each window's pages go: the same CRC as the
    bytes read whole, for a file empty, within one window, on a window's edge or across many."""
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path / "file"
    path.write_bytes(data)
    monkeypatch.setattr(index_mod, "CRC_WINDOW", 8192)  # two pages: the edges are cheap to reach
    assert index_mod._crc32(path) == zlib.crc32(data)


@needs_maps
@given(picked=st.lists(st.integers(0, 999), max_size=80, unique=True))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_rows_read_from_a_maps_file_are_the_rows_of_the_map_and_map_none_of_its_pages(tmp_path, picked):
    """`mapped.read_rows` gives ``view[rows]`` for any ascending rows (runs of neighbours, gaps,
    the first and last), read with pread: none of the map's pages enter this process."""
    path = tmp_path / "rows.npy"
    if not path.exists():
        np.save(path, unit(1000, 384, seed=53))
    view = present(mapped.map_npy(path, (1000, 384)))
    rows = np.array(sorted(picked), dtype=np.int64)
    read = mapped.read_rows(view, path, rows)
    assert read is not None and read.shape == (len(rows), 384)
    assert resident_kb(view) == 0
    assert np.array_equal(read, view[rows])


@needs_maps
def test_rows_are_not_read_from_a_file_that_is_no_longer_the_maps(tmp_path):
    """Where *path* now holds another file (a newer save replaced it), or the array is part of a
    map or no map, `read_rows` reads nothing, and `_Rows.fetch` gathers through the map instead."""
    path = tmp_path / "rows.npy"
    rows = unit(300, 384, seed=54)
    np.save(path, rows)
    view = present(mapped.map_npy(path, (300, 384)))
    wanted = np.array([0, 5, 6, 299])
    assert mapped.read_rows(view[1:], path, wanted[:2]) is None  # part of the map: its rows are elsewhere
    assert mapped.read_rows(rows, path, wanted) is None  # memory, not a map
    with pytest.raises(IndexError):
        mapped.read_rows(view, path, np.array([300]))
    other = tmp_path / "other.npy"
    np.save(other, unit(300, 384, seed=55))
    os.replace(other, path)  # the map keeps the old file; the path names a new one
    assert mapped.read_rows(view, path, wanted) is None
    copy = index_mod._Rows(view)
    copy.path = path
    assert np.array_equal(copy.fetch(wanted), rows[wanted])


@needs_maps
def test_fetching_rows_of_a_map_and_its_tail_gives_what_gathering_them_gives(tmp_path):
    """`_Rows.fetch` reads the map's rows from its file and takes the tail's (rows added since the
    save) from memory: the rows at those labels, in their order, as `_Rows.gather` gives them."""
    path = tmp_path / "rows.npy"
    saved, added = unit(200, 8, seed=56), unit(30, 8, seed=57)
    np.save(path, saved)
    copy = index_mod._Rows(present(mapped.map_npy(path, (200, 8))))
    copy.path = path
    copy.reserve(200, 230, 256)
    copy.block(200, 30)[:] = added
    every = np.concatenate([saved, added])
    labels = np.array([0, 1, 2, 150, 199, 200, 201, 229])
    for some in (labels, labels[:3], labels[-2:]):
        assert np.array_equal(copy.fetch(some), every[some])
        assert np.array_equal(copy.gather(some), every[some])
