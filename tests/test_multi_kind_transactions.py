"""A transaction over several kinds (a `write_many` or a capture mixing facts and
preferences) is known once its last part lands. When every part lands within one
refresh, its rows get their system time where they were appended, and what reads built
from the tables is advanced, not rebuilt; when a reader met a part before the last one
landed, the tables start a new epoch (`lake.Lake._complete_pending`). Either way a
reader is served what a store opened afresh serves."""

from datetime import UTC, datetime, timedelta

import pyarrow as pa
from deltalake import CommitProperties, write_deltalake

import memory_lakehouse as ml
from memory_lakehouse.lake import commit_metadata, new_txn_id

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEAD = ml.Principal("lead", ml.Scope("acme"), role="steward")
ANN = ml.Principal("ann", ml.Scope("acme", "support", "t1", "ann"), role="member")
KINDS = ("fact", "preference")


def _store(path, now):
    return ml.open(path, clock=lambda: now[0], embedder=ml.HashingEmbedder())


def _fact(subject, value):
    return ml.Fact(subject, "plan", value, T0, source="crm", scope=ml.Scope("acme", "support"))


def _preference(subject, value):
    return ml.Preference(subject, "tone", value, T0, source="chat", scope=ml.Scope("acme", "support"))


def _served(store):
    """What ANN is served of both kinds: recall (by content) and each slot's value."""
    hits = sorted((h.kind, h.record.subject, h.record.value) for h in store.recall("plan tone", by=ANN, k=20))
    values = {
        (kind, s): getattr(store.get_fact(s, attr, by=ANN, kind=kind), "value", None)
        for kind, attr in (("fact", "plan"), ("preference", "tone"))
        for s in ("user:1", "user:2")
    }
    return hits, values


def _system_time(store, kind):
    """Each row's system time as the store holds it: (record id, known_since, commit_version)."""
    rows = store.lake.all_rows(kind).select(["record_id", "known_since", "commit_version"])
    return sorted(zip(*(rows.column(c).to_pylist() for c in rows.column_names), strict=True))


def _seeded(path, now):
    store = _store(path, now)
    store.write_many([_fact("user:1", "Free"), _preference("user:1", "formal")], by=LEAD)
    _served(store)  # reads build the org's heads, index partition and BM25 model
    return store


def test_a_transaction_over_two_kinds_written_here_is_advanced_into_what_reads_built(tmp_path):
    now = [T0 + timedelta(days=3)]
    store = _seeded(tmp_path / "s", now)
    epochs = {kind: store.lake.views[kind].epoch for kind in KINDS}
    now[0] += timedelta(hours=1)
    written: list[str] = []
    with store.tracer(written.append):
        store.write_many([_fact("user:1", "Pro"), _preference("user:2", "casual")], by=LEAD)
    assert {kind: store.lake.views[kind].epoch for kind in KINDS} == epochs
    for kind in KINDS:  # each kind's heads advanced by its new row, not picked again
        assert any(f"heads of {kind} in acme" in line and "by the write" in line for line in written), written
    now[0] += timedelta(minutes=5)
    read: list[str] = []
    with store.tracer(read.append):
        hits, values = _served(store)
    assert values[("fact", "user:1")] == "Pro" and values[("preference", "user:2")] == "casual"
    assert not any("read by one query" in line for line in read), read
    fresh = _store(tmp_path / "s", now)
    assert _served(fresh) == (hits, values)
    for kind in KINDS:  # the system time given in place is what a store opened afresh computes
        assert _system_time(store, kind) == _system_time(fresh, kind)
        assert all(known is not None for _, known, _ in _system_time(store, kind))


def test_a_part_a_reader_met_before_the_last_part_landed_starts_a_new_epoch(tmp_path):
    """One part committed by hand and read while the other is missing: the reads built
    on it saw its rows unknown, so completing the transaction must not keep them."""
    now = [T0 + timedelta(days=3)]
    store = _seeded(tmp_path / "s", now)
    now[0] += timedelta(hours=1)
    txn = new_txn_id()
    parts = {}
    for kind, record in (("fact", _fact("user:2", "Team")), ("preference", _preference("user:2", "terse"))):
        # rows built by the writer, then committed by hand one part at a time
        own = store.writer._table(
            kind,
            [(record, store.writer._reconcile([(record, ())], "active", True)[0][1])],
            txn,
            "active",
            {},
        )
        parts[kind] = own
    meta = commit_metadata(
        txn_id=txn,
        committed_at=now[0],
        op="write",
        actor="lead",
        reason=None,
        writers=["crm"],
        kinds=list(KINDS),
        records=2,
    )
    root = tmp_path / "s"

    def commit(kind: str) -> None:
        write_deltalake(
            str(root / kind), parts[kind], mode="append", commit_properties=CommitProperties(custom_metadata=meta)
        )

    def rows_of(kind: str) -> pa.Table:
        return store.lake.all_rows(kind)

    commit("preference")
    now[0] += timedelta(minutes=1)
    store.lake.refresh(force=True)
    # the preference's row is in its table, unknown: a reader meets it and is not served it
    assert rows_of("preference").num_rows == 2
    _, values = _served(store)
    assert values[("preference", "user:2")] is None and values[("fact", "user:2")] is None
    waiting = parts["preference"].column("record_id")[0].as_py()
    assert store.vis.by_ids("preference", [waiting]).num_rows == 0  # not known: approve/retract cannot find it
    epoch = store.lake.views["preference"].epoch
    commit("fact")
    now[0] += timedelta(minutes=1)
    _, values = _served(store)
    assert values[("preference", "user:2")] == "terse" and values[("fact", "user:2")] == "Team"
    assert store.lake.views["preference"].epoch == epoch + 1
    assert store.vis.by_ids("preference", [waiting]).column("record_id").to_pylist() == [waiting]
    fresh = _store(root, now)
    assert _served(store) == _served(fresh)
    for kind in KINDS:
        assert _system_time(store, kind) == _system_time(fresh, kind)
