"""Erased history stays erased: the write path refuses records a forget erased.

A record about a subject forgotten (inside the forget's subtree) at or after the
record's ``valid_from`` is never written, before or after a purge (the ledger survives
it): `write_many` drops and reports it and writes the rest; `write`, `propose` and
`approve` raise `StaleGeneration`. Memory valid after the forget is a new life of the
subject: written, served, and hidden again by the next forget.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pyarrow as pa
import pytest
from _forgetting import canary, files_holding, open_store
from _support import CURATOR, MEMBER, STEWARD, SimClock, day, fact, snapshot

import memory_lakehouse as ml
from memory_lakehouse.cli import main

SUBJECT = "customer:17"


def _backfill(can: str) -> list[ml.Fact]:
    """A backfill of three customers' plans, valid from day 0..2."""
    return [
        fact("customer:16", "plan", "Basic", day(0)),
        fact(SUBJECT, "plan", f"{can} Platinum", day(1)),
        fact("customer:18", "plan", "Gold", day(2)),
    ]


@pytest.fixture
def world(tmp_path):
    clock = SimClock(day(10))
    store = open_store(tmp_path / "store", clock=clock)
    return store, clock, canary(), tmp_path / "store"


@pytest.mark.parametrize("purged", [False, True])
def test_a_rerun_backfill_does_not_resurrect_a_forgotten_subject(world, purged):
    store, clock, can, root = world
    first = store.write_many(_backfill(can), by=CURATOR)
    assert first.counts["inserted"] == 3
    clock.advance(days=1)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    if purged:
        assert store.purge(by=STEWARD).verified
    clock.advance(days=1)

    again = store.write_many(_backfill(can), by=CURATOR)

    assert [r.action for r in again] == ["duplicate", "forgotten", "duplicate"]
    assert again.counts == {"inserted": 0, "superseded": 0, "duplicate": 2, "forgotten": 1}
    assert again.dropped == (1,) and again[1].record_id == ""
    assert store.get_fact(SUBJECT, "plan", by=MEMBER) is None
    assert store.get_fact(SUBJECT, "plan", by=MEMBER, valid_at=day(1)) is None
    assert store.get_fact("customer:16", "plan", by=MEMBER).value == "Basic"
    if purged:
        assert files_holding([root], [can]) == {}  # its bytes are not back on disk


def test_the_rest_of_the_batch_is_written(world):
    store, clock, can, _ = world
    store.write(fact(SUBJECT, "plan", f"{can} Platinum", day(1)), by=CURATOR)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    clock.advance(days=1)
    batch = store.write_many(
        [fact("customer:16", "plan", "Basic", day(0)), fact(SUBJECT, "plan", f"{can} Platinum", day(1))], by=CURATOR
    )
    assert [r.action for r in batch] == ["inserted", "forgotten"]
    assert batch.txn_id is not None
    assert store.get_fact("customer:16", "plan", by=MEMBER).value == "Basic"


def test_a_batch_of_only_erased_history_writes_nothing(world):
    store, clock, can, root = world
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    clock.advance(days=1)
    before = snapshot(root)
    batch = store.write_many([fact(SUBJECT, "plan", f"{can} Platinum", day(1))], by=CURATOR)
    assert (batch.counts["forgotten"], batch.txn_id) == (1, None)
    assert snapshot(root) == before


@pytest.mark.parametrize("how", ["write", "propose", "approve"])
def test_one_record_of_erased_history_raises_and_changes_no_file(world, how):
    store, clock, can, root = world
    agent = ml.Principal("triage-bot", ml.Scope("acme", "support", "tier2", "bot"), role="agent")
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")  # at day 10
    clock.advance(days=1)
    # a proposal of the subject's new life (valid after the forget) is accepted
    pending = store.propose(fact(SUBJECT, "plan", "Platinum", day(20)), by=agent) if how == "approve" else None
    old = fact(SUBJECT, "plan", f"{can} Platinum", day(1))
    before = snapshot(root)
    with pytest.raises(ml.StaleGeneration) as err:
        if how == "write":
            store.write(old, by=CURATOR)
        elif how == "propose":
            store.propose(old, by=agent)
        else:  # an approval that moves the proposal's valid_from back before the forget
            assert pending is not None
            store.approve(pending.record_id, by=CURATOR, valid_from=day(1))
    assert SUBJECT not in str(err.value)  # the error names no subject
    assert snapshot(root) == before
    assert store.get_fact(SUBJECT, "plan", by=CURATOR, valid_at=day(1)) is None


def test_new_facts_about_a_returning_subject_are_a_new_life(world):
    store, clock, can, _ = world
    store.write(fact(SUBJECT, "plan", f"{can} Platinum", day(1)), by=CURATOR)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")  # at day 10
    clock.advance(days=2)
    back = store.write(fact(SUBJECT, "plan", "Basic", day(12)), by=CURATOR)
    assert back.action == "inserted"  # not a supersession of the erased value: nothing before it is left
    assert store.get_fact(SUBJECT, "plan", by=MEMBER).value == "Basic"
    assert store.get_fact(SUBJECT, "plan", by=MEMBER, valid_at=day(5)) is None  # the old life stays erased
    assert store.generation(SUBJECT) == 1
    clock.advance(days=1)
    store.forget(SUBJECT, by=STEWARD, reason="second erasure request")
    assert store.get_fact(SUBJECT, "plan", by=MEMBER) is None
    clock.advance(days=1)
    assert store.write_many([fact(SUBJECT, "plan", "Basic", day(12))], by=CURATOR).counts["forgotten"] == 1


def _session_notes(can: str, session: str = "sess-17") -> list[ml.Note]:
    """Undated notes: no world time of their own, the clock at the write dates them."""
    return [
        ml.Note(session, "scratch", f"{can} call back about the parcel", subject=SUBJECT, ttl=timedelta(days=365)),
        ml.Note("sess-16", "scratch", "call back customer 16", subject="customer:16", ttl=timedelta(days=365)),
    ]


def _notes_of(store, session: str) -> list[str]:
    hits = store.recall("call back about the parcel", by=MEMBER, kinds=["note"], k=20)
    return sorted(h.record.value for h in hits if h.record.session_id == session)


@pytest.mark.parametrize("purged", [False, True])
def test_a_rerun_of_undated_notes_does_not_bring_erased_ones_back(world, purged):
    store, clock, can, root = world
    assert store.write_many(_session_notes(can), by=MEMBER).counts["inserted"] == 2
    clock.advance(days=1)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    if purged:
        assert store.purge(by=STEWARD).verified
    clock.advance(days=1)  # the re-run is dated after the forget: world time cannot tell it from news

    again = store.write_many(_session_notes(can), by=MEMBER)

    assert [r.action for r in again] == ["forgotten", "duplicate"]
    assert _notes_of(store, "sess-17") == []
    with pytest.raises(ml.StaleGeneration):
        store.write(_session_notes(can)[0], by=MEMBER)
    if purged:
        assert files_holding([root], [can]) == {}


def test_a_returning_subjects_new_undated_notes_are_a_new_life(world):
    store, clock, can, _ = world
    store.write_many(_session_notes(can), by=MEMBER)
    clock.advance(days=1)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    clock.advance(days=1)

    new_session = store.write(_session_notes(can, session="sess-99")[0], by=MEMBER)  # same words, a new session
    changed = store.write(ml.Note("sess-17", "scratch", "parcel found", subject=SUBJECT), by=MEMBER)

    assert (new_session.action, changed.action) == ("inserted", "inserted")
    assert _notes_of(store, "sess-99") == [f"{can} call back about the parcel"]
    assert _notes_of(store, "sess-17") == ["parcel found"]


def test_a_ledger_made_before_fingerprints_is_read_and_gains_them(tmp_path):
    from deltalake import DeltaTable, write_deltalake

    from memory_lakehouse.forget import LEDGER_CONFIG, LEDGER_SCHEMA
    from memory_lakehouse.records import subject_key

    old_schema = pa.schema([f for f in LEDGER_SCHEMA if f.name != "fingerprints"])
    ledger = str(tmp_path / "ledger")
    DeltaTable.create(ledger, schema=old_schema, configuration=LEDGER_CONFIG)
    old_entry = {
        "entry_id": "led_old", "op": "forget", "subject_key": subject_key("customer:16"), "generation": 1,
        "record_ids": [], "at": day(5), "by": "dpo", "reason": "erasure request", "scope": "acme", "txn_ids": [],
    }  # fmt: skip
    write_deltalake(ledger, pa.Table.from_pylist([old_entry], schema=old_schema), mode="append")
    clock = SimClock(day(10))

    store = open_store(tmp_path / "store", clock=clock, ledger=ledger)
    assert store.generation("customer:16") == 1  # the old entry is read
    store.write_many(_session_notes("x"), by=MEMBER)
    clock.advance(days=1)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")  # its entry adds the column
    clock.advance(days=1)

    assert "fingerprints" in DeltaTable(ledger).schema().to_arrow().names
    reopened = open_store(tmp_path / "store", clock=clock, ledger=ledger)
    assert reopened.generation("customer:16") == 1
    assert [r.action for r in reopened.write_many(_session_notes("x"), by=MEMBER)] == ["forgotten", "duplicate"]


def test_a_forget_in_another_subtree_refuses_nothing_outside_it(world):
    store, clock, can, _ = world
    sales = ml.Principal("sales-dpo", ml.Scope("acme", "sales"), role="steward")
    store.forget(SUBJECT, by=sales, reason="erasure request (sales)")
    clock.advance(days=1)
    support = ml.Principal("lead", ml.Scope("acme", "support", "tier2"), role="curator")
    assert store.write(fact(SUBJECT, "plan", "Platinum", day(1)), by=support).action == "inserted"
    sales_lead = ml.Principal("sales-lead", ml.Scope("acme", "sales"), role="curator")
    assert store.write_many([fact(SUBJECT, "plan", "Platinum", day(1))], by=sales_lead).counts["forgotten"] == 1


def test_memory_scoped_to_a_forgotten_actor_is_not_written_back(world):
    store, clock, _, _ = world
    alice = ml.Principal("alice", ml.Scope("acme", "support", "tier2", "alice"), role="member")
    store.write(fact("user:42", "plan", "Pro", day(1)), by=alice)
    store.forget("alice", by=STEWARD, reason="employee left")
    clock.advance(days=1)
    assert store.write_many([fact("user:42", "plan", "Pro", day(1))], by=alice).counts["forgotten"] == 1
    assert store.write(fact("user:42", "plan", "Team", day(12)), by=alice).action == "inserted"


def test_the_cli_says_what_a_rerun_backfill_dropped(tmp_path, capsys):
    path = str(tmp_path / "store")
    src = tmp_path / "big.jsonl"
    src.write_text(
        "\n".join(
            json.dumps(
                {
                    "kind": "fact",
                    "subject": s,
                    "attribute": "plan",
                    "value": v,
                    "valid_from": "2026-10-01T00:00:00Z",
                    "source": "crm",
                }
            )
            for s, v in (("customer:16", "Basic"), (SUBJECT, "Platinum"), ("customer:18", "Gold"))
        )
    )
    lead = ["--store", path, "--as", "lead", "--scope", "acme", "--role", "curator"]
    dpo = ["--store", path, "--as", "dpo", "--scope", "acme", "--role", "steward"]
    assert main(["init", "--store", path]) == 0
    assert main(["write", "--file", str(src), *lead]) == 0
    assert main(["forget", SUBJECT, "--reason", "erasure request", *dpo]) == 0
    assert main(["purge", "--yes", *dpo]) == 0
    capsys.readouterr()
    assert main(["write", "--file", str(src), *lead]) == 0
    out = capsys.readouterr().out
    assert "3 record(s): 0 inserted, 0 superseded, 2 duplicate, 1 forgotten" in out
    assert "1 record(s) not written: their subject was forgotten" in out and "lines 2" in out
    assert main(["fact", SUBJECT, "plan", *lead]) == 0
    assert "nothing visible" in capsys.readouterr().out
