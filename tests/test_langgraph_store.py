"""The LangGraph adapter behaves as LangGraph's own `InMemoryStore` on the same operations
(get, put, delete, search with filters and paging, list_namespaces, batch and abatch), and
adds what a governed store owes: scope isolation, history on overwrite, as-of reads."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph")

from _support import MEMBER, SIBLING, SimClock, day, examples, present
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, Op, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

import memory_lakehouse as ml
from memory_lakehouse.integrations.langgraph import LakehouseStore, decode_label, encode_label

EMBEDDER = ml.HashingEmbedder(dim=64)


@pytest.fixture
def clock():
    return SimClock(day(0))


@pytest.fixture
def lake(tmp_path, clock):
    store = ml.open(tmp_path / "store", clock=clock, embedder=EMBEDDER)
    yield store
    store.close()


@pytest.fixture
def lg(lake, clock):
    return Ticking(LakehouseStore(lake, by=MEMBER), clock)


class Ticking:
    """Moves the simulated clock before each call, as wall time would."""

    def __init__(self, inner, clock):
        self.inner, self.clock = inner, clock

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*a, **kw):
            self.clock.advance(minutes=1)
            return attr(*a, **kw)

        return call


def same(items):
    """What an item is, without its timestamps (each store stamps its own clock)."""
    if items is None:
        return None
    if isinstance(items, list):
        return sorted((tuple(i.namespace), i.key, json.dumps(i.value, sort_keys=True)) for i in items)
    return (tuple(items.namespace), items.key, items.value)


def test_labels_round_trip_through_the_escaping():
    for label in ("User", "a/b", "^", "^s", " edge ", "ÉCOLE", "straße", "x.y", "日本"):
        assert decode_label(encode_label(label)) == label
    assert encode_label("Key") != encode_label("key")


def test_put_then_get_returns_the_value(lg):
    lg.put(("memories", "u1"), "food", {"likes": "pizza", "n": 3})
    item = lg.get(("memories", "u1"), "food")
    assert item.value == {"likes": "pizza", "n": 3} and item.key == "food" and item.namespace == ("memories", "u1")
    assert item.created_at is not None and item.created_at.tzinfo is not None


def test_keys_and_namespaces_are_case_sensitive_as_in_langgraph(lg):
    lg.put(("Docs",), "Key", {"v": 1})
    lg.put(("docs",), "key", {"v": 2})
    assert lg.get(("Docs",), "Key").value == {"v": 1} and lg.get(("docs",), "key").value == {"v": 2}


def test_an_overwrite_supersedes_and_history_keeps_the_old_value(lg, lake):
    lg.put(("memories", "u1"), "food", {"likes": "pizza"})
    lg.put(("memories", "u1"), "food", {"likes": "sushi"})
    assert lg.get(("memories", "u1"), "food").value == {"likes": "sushi"}
    hist = lake.history(lg.subject_of(("memories", "u1")), encode_label("food"), by=MEMBER)
    assert [v.record.value for v in hist] == [{"likes": "pizza"}, {"likes": "sushi"}]


def test_delete_is_a_retraction_and_no_older_value_comes_back(lg, lake):
    lg.put(("m",), "k", {"v": 1})
    lg.put(("m",), "k", {"v": 2})
    lg.delete(("m",), "k")
    assert lg.get(("m",), "k") is None
    assert all(v.retracted for v in lake.history(lg.subject_of(("m",)), encode_label("k"), by=MEMBER))
    lg.put(("m",), "k", {"v": 3})
    assert lg.get(("m",), "k").value == {"v": 3}


def test_a_sibling_scope_never_sees_another_scopes_items(lg, lake, clock):
    lg.put(("memories", "u1"), "food", {"likes": "pizza"})
    bob = LakehouseStore(lake, by=SIBLING)
    assert bob.get(("memories", "u1"), "food") is None
    assert bob.search(("memories",)) == [] and bob.list_namespaces() == []


def test_search_as_of_reads_what_the_store_knew_then(lg, clock):
    lg.put(("m",), "k", {"v": 1})
    then = clock.now
    lg.put(("m",), "k", {"v": 2})
    assert [i.value for i in lg.inner.search(("m",), as_of=then)] == [{"v": 1}]
    assert lg.inner.get(("m",), "k", as_of=then).value == {"v": 1}


def test_search_with_a_query_ranks_the_matching_item_first(lg):
    lg.put(("notes",), "a", {"text": "the user prefers dark mode in the editor"})
    lg.put(("notes",), "b", {"text": "quarterly invoice sent to accounting"})
    lg.put(("other",), "c", {"text": "dark mode everywhere"})
    hits = lg.search(("notes",), query="dark mode editor")
    assert [h.key for h in hits][0] == "a" and {h.key for h in hits} == {"a", "b"}
    assert hits[0].score is not None


def test_scope_levels_map_the_leading_labels_to_the_scope(lake, clock):
    lead = ml.Principal("lead", ml.Scope("acme", "support"), role="curator")
    lg = LakehouseStore(lake, by=lead, scope_levels=2)
    lg.put(("acme", "support", "prefs"), "theme", {"v": "dark"})
    assert present(lg.get(("acme", "support", "prefs"), "theme")).value == {"v": "dark"}
    record = lake.get_fact(lg.subject_of(("acme", "support", "prefs")), encode_label("theme"), by=lead)
    assert record.scope == ml.Scope("acme", "support")
    with pytest.raises(ml.PermissionDenied):  # a member writes only at its own scope
        LakehouseStore(lake, by=MEMBER, scope_levels=2).put(("acme", "support", "prefs"), "theme", {"v": "x"})


def test_async_batch_runs_the_same_operations(lg):
    async def go():
        await lg.inner.aput(("a",), "k", {"v": 1})
        got = await lg.inner.aget(("a",), "k")
        found = await lg.inner.asearch(("a",))
        spaces = await lg.inner.alist_namespaces()
        await lg.inner.adelete(("a",), "k")
        gone = await lg.inner.aget(("a",), "k")
        return got, found, spaces, gone

    got, found, spaces, gone = asyncio.run(go())
    assert got.value == {"v": 1} and [f.key for f in found] == ["k"] and spaces == [("a",)] and gone is None


# ---------------------------------------------------------------- against InMemoryStore

NAMESPACES = [("docs",), ("docs", "u1"), ("docs", "u2"), ("users", "u1", "prefs"), ("Users",)]
KEYS = ["a", "B", "c"]
VALUES = st.fixed_dictionaries({"n": st.integers(0, 5), "tag": st.sampled_from(["red", "blue"])})
OP = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS), VALUES),
    st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
)


def _reads() -> list[Op]:
    return [
        *(GetOp(ns, k) for ns in NAMESPACES for k in KEYS),
        SearchOp(("docs",), limit=100),
        SearchOp(("docs",), filter={"tag": "red"}, limit=100),
        SearchOp((), filter={"n": {"$gte": 3}}, limit=100),
        SearchOp(("users",), limit=100),
        ListNamespacesOp(),
        ListNamespacesOp(max_depth=1),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("docs", "*")),)),
        ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("prefs",)),)),
    ]


@settings(max_examples=examples(10), deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(ops=st.lists(OP, min_size=1, max_size=10))
def test_the_adapter_answers_as_in_memory_store_does_on_the_same_operations(tmp_path_factory, ops):
    clock = SimClock(day(0))
    lake = ml.open(tmp_path_factory.mktemp("lg") / "s", clock=clock, embedder=EMBEDDER)
    ours, theirs = LakehouseStore(lake, by=MEMBER), InMemoryStore()
    try:
        for op in ops:
            clock.advance(minutes=1)
            put = PutOp(op[1], op[2], op[3] if op[0] == "put" else None)
            ours.batch([put])
            theirs.batch([put])
        # InMemoryStore's defaultdict lists a namespace once anything read or deleted in it, even
        # with no item left; compare namespaces against a copy holding only its items
        held = InMemoryStore()
        for item in theirs.search((), limit=10_000):
            held.put(item.namespace, item.key, item.value)
        reads = _reads()
        refs = [(held if isinstance(op, ListNamespacesOp) else theirs).batch([op])[0] for op in reads]
        for mine, ref, op in zip(ours.batch(reads), refs, reads, strict=True):
            if isinstance(op, ListNamespacesOp):
                assert mine == ref, op
            else:
                assert same(mine) == same(ref), (op, mine, ref)
    finally:
        lake.close()


def test_paging_matches_in_memory_store_on_counts(lg):
    ref = InMemoryStore()
    for i in range(7):
        for s in (lg, ref):
            s.put(("p",), f"k{i}", {"i": i})
    for offset, limit in ((0, 3), (3, 3), (6, 3), (7, 3)):
        assert len(lg.search(("p",), limit=limit, offset=offset)) == len(ref.search(("p",), limit=limit, offset=offset))
    pages = [i.key for o in (0, 3, 6) for i in lg.search(("p",), limit=3, offset=o)]
    assert sorted(pages) == sorted(f"k{i}" for i in range(7))
