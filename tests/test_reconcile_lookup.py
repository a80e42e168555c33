"""The write path's reconcile lookup (`Visibility.slot_versions`) and its look-up of a record
by id (`Visibility.by_ids`) answer as the one query over the mirror.

`slot_versions` finds a batch's slots by position in the Arrow snapshot and asks
which of those rows the rule turns away of them alone (`Visibility._turned_away`:
the mirror's ``hidden`` and ``retracted_since`` computed over the slots' rows);
`_slot_versions_sql` is the rule as one query over the mirror. On random stores — supersessions at several scopes, proposals, retractions,
forgotten subjects, ended and expiring versions — both give the same rows in the same order.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml
from memory_lakehouse.query import Forgotten, forgotten_sql
from memory_lakehouse.records import SPECS

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCOPES = [ml.Scope("acme"), ml.Scope("acme", "support", "t1"), ml.Scope("acme", "support", "t1", "ann")]
CURATOR = ml.Principal("lead", ml.Scope("acme"), role="curator")
STEWARD = ml.Principal("dpo", ml.Scope("acme"), role="steward")
AGENT = ml.Principal("bot", ml.Scope("acme", "support", "t1", "bot"), role="agent")


class _Clock:
    def __init__(self) -> None:
        self.now = T0 + timedelta(days=400)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def _lineages(store: ml.MemoryStore, kind: str) -> list[str]:
    """Every lineage id with a row in the kind's snapshot."""
    return sorted(set(store.lake.all_rows(kind).column("lineage_id").to_pylist()))


def _lookups_agree(store: ml.MemoryStore, kind: str) -> int:
    lineages = _lineages(store, kind)
    vis = store.vis
    fast = vis.slot_versions(kind, lineages)
    with vis._lock:
        slow = vis._slot_versions_sql(kind, vis._register(kind), lineages)
    assert fast.column_names == slow.column_names
    assert fast.to_pylist() == slow.to_pylist()
    some = lineages[::3]
    assert vis.slot_versions(kind, some).to_pylist() == vis._slot_versions_sql(kind, f"rows_{kind}", some).to_pylist()
    # one slot at a time: the ledger can hide rows of some slots and none of others (`Forgotten.may_hide`)
    for lineage in lineages:
        by_sql = vis._slot_versions_sql(kind, f"rows_{kind}", [lineage]).to_pylist()
        assert vis.slot_versions(kind, [lineage]).to_pylist() == by_sql
    _by_ids_agree(store, kind)
    return fast.num_rows


def _by_ids_agree(store: ml.MemoryStore, kind: str) -> None:
    """`by_ids` (the rows whose id hashes alike, their ids checked; the ledger asked only when
    it may hide one) finds the rows the query over the mirror finds: every stored id at once (proposals,
    retractions, forgotten rows, an id twice, one never stored), then one at a time."""
    vis = store.vis
    ids = store.lake.all_rows(kind).column("record_id").to_pylist()
    asked = [*ids, ids[0], "fac_" + "0" * 32]
    store.lake.refresh()
    with vis._lock:
        slow = vis._id_positions_sql(kind, asked).tolist()
        assert vis._id_positions(kind, asked).tolist() == slow
        for record_id in ids[::2]:
            assert vis._id_positions(kind, [record_id]).tolist() == vis._id_positions_sql(kind, [record_id]).tolist()
    assert vis.by_ids(kind, asked).column("record_id").to_pylist() == [ids[p] for p in slow]


@pytest.mark.parametrize("seed", range(6))
def test_reconcile_lookup_by_position_equals_the_query_over_the_mirror(tmp_path, seed):
    rng = random.Random(seed)
    store = ml.open(tmp_path / "s", clock=_Clock(), embedder=ml.HashingEmbedder())
    written: list[str] = []
    for step in range(12):
        facts = []
        for _ in range(rng.randrange(1, 25)):
            start = T0 + timedelta(days=rng.randrange(300))
            ends = start + timedelta(days=rng.randrange(1, 60)) if rng.random() < 0.2 else None
            expires = start + timedelta(days=rng.randrange(1, 90)) if rng.random() < 0.2 else None
            facts.append(
                ml.Fact(
                    f"user:{rng.randrange(8)}",
                    rng.choice(["plan", "region", "seats"]),
                    rng.choice(["a", "b", "c"]),
                    start,
                    valid_to=ends,
                    expires_at=expires,
                    source="test",
                    scope=rng.choice(SCOPES),
                )
            )
        written += [r.record_id for r in store.write_many(facts, by=CURATOR) if r.action != "duplicate"]
        roll = rng.random()
        if roll < 0.3:
            fact = ml.Fact(f"user:{rng.randrange(8)}", "plan", "proposed", T0, source="bot", scope=AGENT.scope)
            store.propose(fact, by=AGENT)
        elif roll < 0.55 and written:
            target = written.pop(rng.randrange(len(written)))
            try:
                store.retract(target, by=CURATOR, reason="wrong")
            except ml.ValidationError:
                pass  # already retracted, or no longer stored
        elif roll < 0.65:
            store.forget(f"user:{rng.randrange(8)}", by=STEWARD, reason="erasure request")
        elif roll < 0.7:
            store.forget("ann", by=STEWARD, reason="erasure request")  # an actor: rows scoped to her
        if step % 4 == 3:
            _lookups_agree(store, "fact")
    assert _lookups_agree(store, "fact") > 0
    store.close()


def test_reconcile_lookup_of_slots_the_store_never_saw_is_empty(tmp_path):
    store = ml.open(tmp_path / "s", clock=_Clock(), embedder=ml.HashingEmbedder())
    store.write(ml.Fact("user:1", "plan", "Pro", T0, source="crm"), by=CURATOR)
    unknown = SPECS["fact"].slot(ml.Fact("user:2", "plan", "x", T0, source="crm"), CURATOR.scope)
    assert store.vis.slot_versions("fact", [unknown]).num_rows == 0
    assert store.vis.slot_versions("fact", []).num_rows == 0
    store.close()


def test_stored_timestamps_read_for_reconcile_equal_arrows_own_conversion():
    import pyarrow as pa

    from memory_lakehouse.write import _column_values

    values = [T0, None, T0 + timedelta(microseconds=1), datetime(1999, 12, 31, 23, 59, tzinfo=UTC)]
    for tz in ("UTC", "Etc/UTC"):
        column = pa.chunked_array(
            [pa.array(values[:2], pa.timestamp("us", tz=tz)), pa.array(values[2:], pa.timestamp("us", tz=tz))]
        )
        assert _column_values(column) == column.to_pylist() == values
    strings = pa.chunked_array([pa.array(["a", None])])
    assert _column_values(strings) == ["a", None]


def test_record_ids_made_for_a_batch_look_like_single_ones_and_never_repeat():
    import re

    from memory_lakehouse.records import kind_of_record_id, new_record_id
    from memory_lakehouse.write import _new_record_ids

    kinds = ["fact", "preference", "episode"] * 400
    ids = _new_record_ids(kinds)
    assert len(set(ids)) == len(ids)
    shape = re.compile(r"^[a-z]{3}_[0-9a-f]{32}$")
    for kind, record_id in zip(kinds, ids, strict=True):
        assert shape.match(record_id) and record_id[:4] == new_record_id(kind)[:4]
        assert kind_of_record_id(record_id) == kind
    assert [len(i) for i in _new_record_ids(["fact"] * 3)] == [36] * 3


@pytest.mark.parametrize("seed", range(4))
def test_reconcile_lookup_over_a_lagging_mirror_equals_the_query_over_an_up_to_date_one(tmp_path, seed):
    """`slot_versions` never brings the mirror up to date (the slots' rows are judged on
    their own), and answers as the query over an up-to-date mirror through retractions,
    forgets, proposals and the slots' own new versions."""
    rng = random.Random(seed)
    store = ml.open(tmp_path / "s", clock=_Clock(), embedder=ml.HashingEmbedder())
    vis = store.vis
    written: list[str] = []
    lagged = 0
    for step in range(16):
        facts = [
            ml.Fact(
                f"user:{rng.randrange(40)}",
                rng.choice(["plan", "region"]),
                rng.choice(["a", "b", "c"]),
                T0 + timedelta(days=rng.randrange(300)),
                source="test",
                scope=rng.choice(SCOPES),
            )
            for _ in range(rng.randrange(1, 6))
        ]
        written += [r.record_id for r in store.write_many(facts, by=CURATOR) if r.action != "duplicate"]
        roll = rng.random()
        if roll < 0.2 and written:
            try:
                store.retract(written.pop(rng.randrange(len(written))), by=CURATOR, reason="wrong")
            except ml.ValidationError:
                pass
        elif roll < 0.3:
            store.forget(f"user:{rng.randrange(40)}", by=STEWARD, reason="erasure request")
        elif roll < 0.4:
            store.propose(
                ml.Fact(f"user:{rng.randrange(40)}", "plan", "p", T0, source="bot", scope=AGENT.scope), by=AGENT
            )
        store.lake.refresh()
        lineages = _lineages(store, "fact")
        asked = rng.sample(lineages, max(1, len(lineages) // 4))
        before = vis._mirrored.get("fact")
        fast = vis.slot_versions("fact", asked)
        lagged += vis._mirrored.get("fact") == before and before is not None
        with vis._lock:
            slow = vis._slot_versions_sql("fact", vis._register("fact"), asked)
        assert fast.to_pylist() == slow.to_pylist(), step
    assert lagged  # lookups left the mirror lagging
    store.close()


def test_reconcile_lookup_over_a_lagging_mirror_sees_a_forget_another_process_made(tmp_path):
    """The ledger moved under the mirror (another store forgot a subject): the mirror's
    ``hidden`` is stale, so the lookup brings it up to date before asking it."""
    ours = ml.open(tmp_path / "s", clock=_Clock(), embedder=ml.HashingEmbedder())
    theirs = ml.open(tmp_path / "s", clock=_Clock(), embedder=ml.HashingEmbedder())
    ours.write_many([ml.Fact(f"user:{i}", "plan", "Pro", T0, source="crm") for i in range(4)], by=CURATOR)
    slot = SPECS["fact"].slot(ml.Fact("user:1", "plan", "x", T0, source="crm"), CURATOR.scope)
    assert ours.vis.slot_versions("fact", [slot]).num_rows == 1
    theirs.forget("user:1", by=STEWARD, reason="erasure request")
    ours._sync_ledger()  # what a write does first: take in the other process's ledger
    assert ours.vis.slot_versions("fact", [slot]).num_rows == 0
    ours.close()
    theirs.close()


_KEYS = ["user:1", "user:2", "ann"]
_IDS = ["fact-1", "fact-2", "fact-3"]


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {
                "record_id": st.sampled_from(_IDS),
                "subject_key": st.sampled_from(_KEYS),
                "actor_key": st.none() | st.sampled_from(_KEYS),
                "derived_from": st.lists(st.sampled_from(_IDS), max_size=2),
                "generation": st.integers(0, 2),
                "known_since": st.sampled_from([T0, T0 + timedelta(days=2)]),
                "org": st.just("acme"),
                "division": st.none() | st.just("support"),
                "team": st.none() | st.just("t1"),
            }
        ),
        min_size=1,
        max_size=4,
    ),
    tombstones=st.lists(
        st.tuples(
            st.sampled_from(_KEYS),
            st.integers(0, 3),
            st.just(T0 + timedelta(days=1)),
            st.none() | st.just("acme"),
            st.none() | st.just("support"),
            st.none(),
        ),
        max_size=2,
    ),
    forgotten_ids=st.frozensets(st.sampled_from(_IDS), max_size=2),
)
def test_a_ledger_that_may_not_hide_any_of_some_rows_hides_none_of_them(rows, tombstones, forgotten_ids):
    """`Forgotten.may_hide` answers False only for rows `forgotten_sql` hides none of: the
    write path then skips the ledger's query (each of its conditions is needed by some row)."""
    ledger = Forgotten(tombstones=tuple(tombstones), record_ids=forgotten_ids)
    table = pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [
                ("record_id", pa.string()),
                ("subject_key", pa.string()),
                ("actor_key", pa.string()),
                ("derived_from", pa.list_(pa.string())),
                ("generation", pa.int64()),
                ("known_since", pa.timestamp("us", tz="UTC")),
                ("org", pa.string()),
                ("division", pa.string()),
                ("team", pa.string()),
            ]
        ),
    )
    con = duckdb.connect()
    subjects, records = ledger.as_tables()
    con.register("forgotten_subjects", subjects)
    con.register("forgotten_records", records)
    con.register("t", table)
    hidden = con.sql(f"SELECT NOT ({forgotten_sql('t')}) AS hidden FROM t").to_arrow_table().column(0).to_pylist()
    con.close()
    for i, is_hidden in enumerate(hidden):
        if is_hidden:
            assert ledger.may_hide(table.slice(i, 1))
    tombstoned = {t[0] for t in tombstones}
    for i, r in enumerate(rows):  # and it is no constant True: a row matching no key, id or derived id is not flagged
        if not (
            {r["subject_key"], r["actor_key"]} & tombstoned or {r["record_id"], *r["derived_from"]} & forgotten_ids
        ):
            assert not ledger.may_hide(table.slice(i, 1))
