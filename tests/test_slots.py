"""`SlotRows` finds a slot's rows where a scan of the lineage column finds them, and `IdRows`
with `lake.Lake.id_positions` a record's rows where a scan of the id column finds them.

The write path's reconcile reads every stored version of a batch's slots through it
(`lake.Lake.slot_positions`), so for any sequence of appended chunks (a slot's versions
spread over them, repeated within one) its positions must be exactly the rows whose
lineage id is asked for, in ascending order, and its membership the ids with a row.
`IdRows` only names candidates (rows whose id hashes alike); the lake keeps those whose id
is asked for, so its answer is the scan's even when every hash collides.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml
from memory_lakehouse import slots as slots_module
from memory_lakehouse.codes import hashes
from memory_lakehouse.records import Fact
from memory_lakehouse.slots import IdRows, SlotRows

ids = st.sampled_from([f"fact:{i:02d}" for i in range(12)] + ["", "fact:\x00", "fäct:é"])
chunks = st.lists(st.lists(ids, min_size=0, max_size=9), max_size=7)


def _taken(index, chunks, chunked, asked):
    """*index* (`SlotRows`, `IdRows`) extended by each of *chunks* (as two Arrow chunks if
    *chunked*), every id in order, and the positions a scan finds *asked* at."""
    for chunk in chunks:
        column = pa.array(chunk, pa.string())
        index.extend(pa.chunked_array([column[: len(chunk) // 2], column[len(chunk) // 2 :]]) if chunked else column)
    everything = pa.array([rid for chunk in chunks for rid in chunk], pa.string())
    scanned = pc.indices_nonzero(pc.is_in(everything, value_set=pa.array(asked, pa.string()))).to_numpy()
    return index, everything, scanned


@settings(max_examples=200, deadline=None)
@given(chunks=chunks, asked=st.lists(ids, max_size=6), chunked=st.booleans())
def test_positions_are_the_rows_a_scan_of_the_lineage_column_finds(chunks, asked, chunked):
    slots, everything, scanned = _taken(SlotRows(), chunks, chunked, asked)
    assert slots.positions(asked).tolist() == scanned.tolist()
    assert slots.rows == len(everything)
    assert len(slots) == len(set(everything.to_pylist()))
    assert slots.held(asked) == set(asked) & set(everything.to_pylist())
    assert all((rid in slots) == (rid in set(everything.to_pylist())) for rid in asked)


def test_a_slot_written_in_every_chunk_lists_each_of_its_rows_once():
    slots = SlotRows()
    for _ in range(50):
        slots.extend(pa.array(["a", "b", "a"]))
    assert slots.positions(["a"]).tolist() == [i for i in range(150) if i % 3 != 1]
    assert slots.positions(["a", "a", "missing"]).dtype == np.int64


@settings(max_examples=200, deadline=None)
@given(chunks=chunks, asked=st.lists(ids, max_size=6), chunked=st.booleans())
def test_id_candidates_include_every_row_a_scan_of_the_id_column_finds(chunks, asked, chunked):
    rows, everything, scanned = _taken(IdRows(), chunks, chunked, asked)
    found = rows.candidates(asked)
    assert rows.rows == len(everything)
    assert set(scanned.tolist()) <= set(found.tolist())
    assert found.tolist() == sorted(found.tolist())
    # distinct ids of this alphabet hash apart: nothing else is a candidate
    assert found.tolist() == scanned.tolist()


def test_ids_hashed_a_slice_at_a_time_are_hashed_as_all_at_once(monkeypatch):
    monkeypatch.setattr(slots_module, "HASHED_AT_ONCE", 3)
    column = pa.array([f"fac_{i:0{1 + i % 3}d}" for i in range(10)], pa.string())
    rows = IdRows()
    rows.extend(column)
    assert rows._hashes[: rows.rows].tolist() == hashes(column).tolist()
    assert rows.candidates(["fac_07", "fac_04", "fac_4"]).tolist() == [4, 7]


def test_an_ids_hash_is_the_same_whatever_it_is_hashed_with():
    # chunks of ids of different lengths are hashed apart, then compared: a value's hash must
    # not depend on the widest value beside it
    alone = hashes(pa.array(["fac_1"], pa.string()))
    beside_longer = hashes(pa.array(["fac_1", "fac_" + "9" * 40, ""], pa.string()))
    assert alone[0] == beside_longer[0]
    assert len(set(beside_longer.tolist())) == 3
    rows = IdRows()
    rows.extend(pa.array(["x" * 30, "fac_1"], pa.string()))
    rows.extend(pa.array(["fac_1"], pa.string()))
    assert rows.candidates(["fac_1"]).tolist() == [1, 2]


def _store_with_facts(tmp_path, n: int) -> tuple[ml.MemoryStore, list[str]]:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    store = ml.open(tmp_path / "store", clock=lambda: t0 + timedelta(days=30))
    written = []
    for i in range(n):  # two orgs in turn: a compaction groups each org's rows, so positions move
        org = ("acme", "globex")[i % 2]
        fact = Fact(f"user:{i % 4}", f"attr{i}", f"v{i}", t0 + timedelta(minutes=i), source="test", scope=ml.Scope(org))
        written.append(store.write(fact, by=ml.Principal(f"lead-{org}", ml.Scope(org), role="curator")).record_id)
    return store, written


def _scanned(store: ml.MemoryStore, asked: list[str]) -> list[int]:
    store.lake.refresh()  # as `Visibility.by_ids` does first
    column = store.lake.all_rows("fact").column("record_id")
    return pc.indices_nonzero(pc.is_in(column, value_set=pa.array(asked, pa.string()))).to_numpy().tolist()


def test_id_positions_are_the_scans_when_every_hash_collides(tmp_path, monkeypatch):
    store, written = _store_with_facts(tmp_path, 6)
    monkeypatch.setattr(slots_module, "hashes", lambda values: np.zeros(len(values), dtype=np.uint64))
    store.lake.views["fact"].followers.pop("record_id", None)  # hashed anew, every row a candidate
    for asked in ([written[2]], written[1::2], ["fac_" + "0" * 32], []):
        assert store.lake.id_positions("fact", asked).tolist() == _scanned(store, asked)
    store.close()


def test_id_positions_follow_appends_and_a_rewrite(tmp_path):
    store, written = _store_with_facts(tmp_path, 8)
    lead = ml.Principal("lead", ml.Scope("acme"), role="curator")
    assert store.lake.id_positions("fact", [written[3]]).tolist() == _scanned(store, [written[3]])
    more = store.write(Fact("user:9", "later", "v", datetime(2026, 1, 2, tzinfo=UTC), source="test"), by=lead)
    asked = [written[0], more.record_id]
    assert store.lake.id_positions("fact", asked).tolist() == _scanned(store, asked)
    before = [_scanned(store, [rid]) for rid in written]
    steward = ml.Principal("dpo", ml.Scope("acme"), role="steward")
    store.forget("user:0", by=steward, reason="test")
    store.purge(by=steward)  # rewrites the table: a new epoch, the rows after an erased one move
    assert store.vis.by_ids("fact", [written[0]]).num_rows == 0
    assert [_scanned(store, [rid]) for rid in written] != before
    for asked in ([written[5]], [written[7]], written[::3] + [more.record_id]):
        assert store.lake.id_positions("fact", asked).tolist() == _scanned(store, asked)
    store.close()
