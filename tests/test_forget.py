"""Forgetting, the logical half: a tombstone hides the subject from every read path at once.

DESIGN.md § Forgetting and seed 004's four-part deletion: (1) a tombstone and a deletion
generation stop every read path serving the subject immediately — at every basis, in
this process and in any other that opens the store; (2) a worker that carries an older
generation cannot write the subject back. Physical erasure is `test_purge.py`.
"""

from __future__ import annotations

import multiprocessing
import tempfile
from datetime import timedelta
from typing import Any

import pytest
from _forgetting import (
    OTHER,
    SUBJECT,
    append_raw,
    canary,
    child_leaks,
    child_reads_across_a_forget,
    files_holding,
    leaks,
    open_store,
    steward_of,
    stored_row,
    write_others,
    write_subject,
)
from _support import (
    AGENT,
    ALICE,
    BOB,
    CURATOR,
    MEMBER,
    ORG,
    SALES,
    STEWARD,
    SUPPORT,
    TIER1,
    TIER2,
    SimClock,
    day,
    examples,
    fact,
    present,
    snapshot,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml

#: Past instants of the story in `write_subject`: after each batch of writes.
TIMES = [day(1, 1), day(2, 1), day(3, 1)]


@pytest.fixture
def world(tmp_path):
    """A store with a ledger kept apart, the subject's memory and another subject's."""
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock, ledger=tmp_path / "ledger")
    can = canary()
    ids = write_subject(store, clock, can)
    write_others(store, clock)
    clock.advance(days=1)
    return store, clock, can, ids, tmp_path


def test_a_forgotten_subject_is_served_by_no_read_path_at_any_basis(world):
    store, clock, can, ids, _ = world
    assert leaks(store, subject=SUBJECT, needles=[can], times=TIMES), "the probe must see the subject first"
    before_other = store.get_fact(OTHER, "plan", by=MEMBER)

    report = store.forget(SUBJECT, by=STEWARD, reason="erasure request")

    assert report.generation == 1
    assert set(ids.values()) <= set(report.record_ids)
    assert leaks(store, subject=SUBJECT, needles=[can], times=TIMES) == []
    assert store.get_fact(OTHER, "plan", by=MEMBER) == before_other  # nobody else is touched


def test_a_new_process_that_opens_the_store_serves_nothing_of_the_subject(world):
    store, clock, can, _, tmp = world
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        found = pool.apply(child_leaks, (str(tmp / "store"), str(tmp / "ledger"), SUBJECT, [can], TIMES, clock.now))
    assert found == []


@pytest.mark.integration
def test_a_process_already_serving_stops_at_the_next_read_after_a_forget_elsewhere(world):
    store, clock, can, _, tmp = world
    ctx = multiprocessing.get_context("spawn")
    opened, forgotten, out = ctx.Event(), ctx.Event(), ctx.Queue()
    child = ctx.Process(
        target=child_reads_across_a_forget,
        args=(str(tmp / "store"), str(tmp / "ledger"), SUBJECT, [can], TIMES, clock.now, opened, forgotten, out),
    )
    child.start()
    try:
        assert opened.wait(120), "the reader never opened the store"
        store.forget(SUBJECT, by=STEWARD, reason="erasure request")
        forgotten.set()
        seen_before, seen_after = out.get(timeout=120)
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    assert seen_before > 0
    assert seen_after == []


def test_records_derived_from_a_forgotten_record_are_forgotten_with_it(world):
    store, clock, can, ids, _ = world
    unrelated = store.get_fact("segment:vip", "size", by=MEMBER)

    report = store.forget(SUBJECT, by=STEWARD, reason="erasure request")

    assert {ids["derived"], ids["derived2"]} <= set(report.record_ids)  # a digest of a digest goes too
    assert store.get_fact("segment:vip", "digest", by=MEMBER) is None
    assert store.get_fact("segment:vip", "digest_of_digest", by=MEMBER) is None
    assert store.get_fact("segment:vip", "digest", by=MEMBER, as_of=day(3, 1)) is None
    assert store.get_fact("segment:vip", "size", by=MEMBER) == unrelated
    assert not [h for h in store.recall("digest", by=MEMBER, subject="segment:vip", k=20) if can in h.text]


def test_a_late_summary_of_a_forgotten_record_is_refused(world):
    store, clock, can, ids, tmp = world
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    before = snapshot(tmp)
    late = fact("segment:vip", "digest", f"late digest {can}", day(4), derived_from=(ids["fact_v1"],))
    with pytest.raises(ml.StaleGeneration):
        store.write(late, by=CURATOR)
    with pytest.raises(ml.StaleGeneration):  # all or nothing: the innocent record is not written either
        store.write_many([fact(OTHER, "region", "eu-west", day(4)), late], by=CURATOR)
    assert snapshot(tmp) == before
    assert store.get_fact(OTHER, "region", by=MEMBER) is None


def test_a_stale_generation_write_raises_and_changes_no_file(world):
    store, clock, can, _, tmp = world
    started_at = store.generation(SUBJECT)  # a worker reads the generation, then is delayed
    assert started_at == 0
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    assert store.generation(SUBJECT) == 1
    before = snapshot(tmp)  # the store and the ledger kept apart

    with pytest.raises(ml.StaleGeneration) as err:
        store.write(
            fact(SUBJECT, "shipping_note", f"{can} recreated by a late job", day(0)), by=CURATOR, generation=started_at
        )
    assert err.value.args and "customer-728" not in str(err.value)  # the error names the key, not the subject
    with pytest.raises(ml.StaleGeneration):
        store.write_many(
            [fact(OTHER, "region", "eu-west", day(4)), fact(SUBJECT, "embedding_job", f"{can} vector", day(0))],
            by=CURATOR,
            generation=started_at,
        )

    assert snapshot(tmp) == before
    assert store.get_fact(SUBJECT, "shipping_note", by=MEMBER) is None
    assert store.get_fact(OTHER, "region", by=MEMBER) is None


def test_a_worker_holding_the_current_generation_may_write_new_memory(world):
    store, clock, can, _, _ = world
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    clock.advance(days=1)
    store.write(
        fact(SUBJECT, "plan", "re-subscribed after the erasure", day(5)),
        by=CURATOR,
        generation=store.generation(SUBJECT),
    )
    assert store.get_fact(SUBJECT, "plan", by=MEMBER).value == "re-subscribed after the erasure"
    assert store.get_fact(SUBJECT, "shipping_note", by=MEMBER) is None  # the old memory stays forgotten
    store.forget(SUBJECT, by=STEWARD, reason="second erasure request")
    assert store.generation(SUBJECT) == 2
    assert store.get_fact(SUBJECT, "plan", by=MEMBER) is None


def test_forgetting_an_actor_hides_what_was_scoped_to_that_actor(tmp_path):
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock)
    can = canary()
    own = [
        store.write(fact(f"ticket:T-{n}", "note", f"{can} private note {n}", day(0)), by=MEMBER).record_id
        for n in range(3)
    ]
    store.write(ml.Note("s-9", "draft", f"{can} draft reply", ttl=timedelta(days=30)), by=MEMBER)
    team = store.write(fact("ticket:T-1", "status", "escalated to tier 3", day(0)), by=CURATOR)
    bot = store.propose(fact("ticket:T-2", "status", "bot note", day(0)), by=AGENT)
    clock.advance(days=1)

    report = store.forget("alice", by=STEWARD, reason="employee left; personal notes erased")

    assert set(own) <= set(report.record_ids)
    assert team.record_id not in report.record_ids and bot.record_id not in report.record_ids
    for n in range(3):
        assert store.get_fact(f"ticket:T-{n}", "note", by=MEMBER) is None
        assert store.get_fact(f"ticket:T-{n}", "note", by=MEMBER, as_of=day(1, 1)) is None
    assert not [
        h for h in store.recall("private note draft reply", by=MEMBER, kinds=["fact", "note"], k=20) if can in h.text
    ]
    assert present(store.get_fact("ticket:T-1", "status", by=MEMBER)).value == "escalated to tier 3"
    # rows written at that scope after the forget are new memory, served again
    clock.advance(days=1)
    store.write(fact("ticket:T-7", "note", "written after the forget", day(3)), by=MEMBER)
    assert present(store.get_fact("ticket:T-7", "note", by=MEMBER)).value == "written after the forget"


def test_a_forget_covers_only_the_stewards_subtree(tmp_path):
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock)
    seller = ml.Principal("sam", ml.Scope("acme", "sales", "emea", "sam"), role="member")
    sales_lead = ml.Principal("sales-lead", SALES, role="curator")
    store.write(fact(SUBJECT, "plan", "support's view", day(0)), by=CURATOR)
    store.write(fact(SUBJECT, "plan", "sales' view", day(0)), by=sales_lead)
    clock.advance(hours=1)

    store.forget(SUBJECT, by=steward_of(SUPPORT, "support-dpo"), reason="erasure request (support data)")

    assert store.get_fact(SUBJECT, "plan", by=MEMBER) is None
    assert present(store.get_fact(SUBJECT, "plan", by=seller)).value == "sales' view"
    assert present(store.get_fact(SUBJECT, "plan", by=seller, as_of=day(1, 1))).value == "sales' view"


def test_a_row_appended_at_the_subjects_old_generation_after_a_forget_stays_hidden(tmp_path):
    """A writer that skips the write path's generation check (an old backfill job, another
    engine appending to the table) re-appends the subject's row as it was: the ledger
    hides it, on every read path and at every basis, because it carries an older
    generation than the tombstone."""
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock)
    old = store.write(fact(SUBJECT, "plan", "enterprise", day(0)), by=CURATOR)
    stale = stored_row(store, "fact", old.record_id)
    clock.advance(hours=1)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    clock.advance(hours=1)
    assert store.get_fact(SUBJECT, "plan", by=MEMBER) is None

    append_raw(store, stale, record_id="rerun-1")
    clock.advance(hours=1)
    bases: tuple[dict[str, Any], ...] = ({}, {"as_of": clock.now - timedelta(minutes=30)})
    for basis in bases:
        assert store.get_fact(SUBJECT, "plan", by=MEMBER, **basis) is None, basis
        assert len(store.history(SUBJECT, "plan", by=MEMBER, **basis)) == 0, basis
    assert not store.recall("enterprise plan", by=MEMBER, kinds=["fact"])
    store.vis.use_heads = False  # the per-reader query agrees
    assert store.get_fact(SUBJECT, "plan", by=MEMBER) is None


def test_forgetting_a_subject_in_one_org_leaves_its_rows_in_another(tmp_path):
    """The tombstone's scope is the steward's subtree: another org's rows about the same
    subject, or scoped to an actor of the same name, are that org's memory."""
    clock = SimClock(day(1))
    store = open_store(tmp_path / "store", clock=clock)
    globex_lead = ml.Principal("g-lead", ml.Scope("globex"), role="curator")
    globex_alice = ml.Principal("alice", ml.Scope("globex", "support", "t1", "alice"), role="member")
    theirs = store.write(fact(SUBJECT, "plan", "globex plan", day(0), scope=ml.Scope("globex")), by=globex_lead)
    note = store.write(fact("ticket:G-1", "note", "globex note", day(0)), by=globex_alice)
    ours = store.write(fact("ticket:A-1", "note", "acme note", day(0)), by=MEMBER)
    stale = stored_row(store, "fact", theirs.record_id)
    clock.advance(hours=1)
    store.forget(SUBJECT, by=STEWARD, reason="erasure request")
    store.forget("alice", by=STEWARD, reason="employee left")
    clock.advance(hours=1)
    append_raw(store, stale, record_id="globex-rerun")  # globex's own row again: not under the tombstone
    clock.advance(hours=1)

    assert store.get_fact("ticket:A-1", "note", by=MEMBER) is None and ours.record_id
    assert present(store.get_fact("ticket:G-1", "note", by=globex_alice)).record_id == note.record_id
    assert present(store.get_fact(SUBJECT, "plan", by=globex_alice)).value == "globex plan"
    listed = {r.record_id for r in store.list(None, by=globex_alice, kinds=["fact"])}
    assert listed == {note.record_id, "globex-rerun"}  # the re-run is the slot's newest version


def test_only_a_steward_forgets_and_always_with_a_reason(store):
    store.write(fact(SUBJECT, "plan", "starter", day(0)), by=CURATOR)
    for who in (MEMBER, CURATOR, AGENT):
        with pytest.raises(ml.PermissionDenied):
            store.forget(SUBJECT, by=who, reason="erasure request")
    for reason in ("", "   ", None):
        with pytest.raises(ml.ValidationError):
            store.forget(SUBJECT, by=STEWARD, reason=reason)
    assert store.generation(SUBJECT) == 0
    assert store.get_fact(SUBJECT, "plan", by=MEMBER).value == "starter"


def test_the_ledger_and_the_audit_trail_hold_no_content(world):
    store, clock, can, ids, tmp = world
    report = store.forget(SUBJECT, by=STEWARD, reason=f"erasure request from {SUBJECT} (ticket 5521)")

    assert files_holding([tmp / "ledger"], [can, SUBJECT]) == {}
    events = [e for e in store.audit(subject=SUBJECT, by=STEWARD) if e.operation == "forget"]
    assert len(events) == 1
    event = events[0]
    assert (event.actor, event.committed_at) == ("dpo", report.at)
    assert "erasure request" in event.reason and "ticket 5521" in event.reason
    assert SUBJECT not in event.reason
    assert set(ids.values()) <= set(event.record_ids)
    assert can not in repr(store.audit(subject=SUBJECT, by=STEWARD))


def test_a_forget_reason_loses_the_subjects_name_in_any_case_and_only_whole(store, clock):
    store.write(fact("customer-7", "plan", "starter", day(0)), by=CURATOR)
    store.forget("customer-7", by=STEWARD, reason="CUSTOMER-7 asked by mail; customer-77 is someone else")

    [event] = [e for e in store.audit(subject="customer-7", by=STEWARD) if e.operation == "forget"]
    assert event.reason == "<subject> asked by mail; customer-77 is someone else"


SAM = ml.Scope("acme", "sales", "emea", "sam")
TREE = [ORG, SUPPORT, SALES, TIER1, TIER2, ALICE, BOB, ml.Scope("acme", "sales", "emea"), SAM]
READERS = [ml.Principal(str(s.actor), s, role="member") for s in (ALICE, BOB, SAM)]


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["customer-1", "customer-2"]), st.sampled_from(TREE)), min_size=1, max_size=8
    ),
    steward_at=st.sampled_from([ORG, SUPPORT, SALES, TIER2, ml.Scope("acme", "sales", "emea")]),
)
def test_a_forget_hides_exactly_the_subjects_rows_inside_the_stewards_subtree(rows, steward_at):
    """One scope away from the steward's subtree, and one subject away, nothing changes."""
    with tempfile.TemporaryDirectory() as root:
        clock = SimClock(day(1))
        store = open_store(root, clock=clock)
        writer = ml.Principal("backfill", ORG, role="curator")
        written = store.write_many(
            [fact(subject, f"a{i}", f"value {i}", day(0), scope=scope) for i, (subject, scope) in enumerate(rows)],
            by=writer,
        )
        clock.advance(hours=1)
        store.forget("customer-1", by=steward_of(steward_at), reason="erasure request")
        for reader in READERS:
            for i, ((subject, scope), res) in enumerate(zip(rows, written, strict=True)):
                forgotten = subject == "customer-1" and steward_at.contains(scope)
                expected = None if forgotten or not scope.contains(reader.scope) else res.record_id
                bases: tuple[dict[str, Any], ...] = ({}, {"as_of": day(1, 0.5)})
                for basis in bases:
                    got = store.get_fact(subject, f"a{i}", by=reader, **basis)
                    assert getattr(got, "record_id", None) == expected, (reader.id, scope, steward_at, basis)
