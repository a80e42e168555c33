"""The audit trail by record id: every commit that wrote the record or acted on it.

`store.audit(record_id=X)` answers "who wrote X, who changed, approved or retracted it,
when and why" from the commit log: the commit that added X, and the commits of the rows
that point back at X (``supersedes``). Most rows point at nothing (``supersedes`` is
null), and that must not hide them.
"""

from __future__ import annotations

import pytest
from _support import AGENT, CURATOR, MEMBER, STEWARD, day, fact

import memory_lakehouse as ml


def _trail(store, record_id, **kw):
    return [(e.operation, e.actor, e.reason, e.record_ids) for e in store.audit(record_id=record_id, by=STEWARD, **kw)]


def test_audit_by_record_id_finds_the_write_of_a_plain_record(store, clock):
    res = store.write(fact("user:42", "plan", "Starter", day(0)), by=MEMBER, reason="signup form")

    events = store.audit(record_id=res.record_id, by=STEWARD)

    assert [(e.operation, e.actor, e.reason, e.record_ids) for e in events] == [
        ("write", "alice", "signup form", (res.record_id,))
    ]
    assert (events[0].txn_id, events[0].committed_at) == (res.txn_id, res.known_since)


def test_audit_by_record_id_shows_a_superseded_record_and_the_write_that_superseded_it(store, clock):
    old = store.write(fact("user:42", "plan", "Starter", day(0)), by=MEMBER)
    clock.advance(days=1)
    new = store.write(fact("user:42", "plan", "Enterprise Pro", day(1)), by=MEMBER, reason="upgrade invoice 2231")
    assert new.supersedes == old.record_id

    assert _trail(store, old.record_id) == [
        ("write", "alice", None, (old.record_id,)),
        ("write", "alice", "upgrade invoice 2231", (new.record_id,)),
    ]
    assert _trail(store, new.record_id) == [("write", "alice", "upgrade invoice 2231", (new.record_id,))]


def test_audit_by_record_id_follows_a_proposal_and_its_approval(store, clock):
    prop = store.propose(fact("user:42", "region", "EU", day(0)), by=AGENT, reason="agent turn 7")
    clock.advance(hours=1)
    approved = store.approve(prop.record_id, by=CURATOR)

    assert _trail(store, prop.record_id) == [
        ("propose", "triage-bot", "agent turn 7", (prop.record_id,)),
        ("approve", "lead", f"approved proposal {prop.record_id}", (approved.record_id,)),
    ]
    assert _trail(store, approved.record_id) == [
        ("approve", "lead", f"approved proposal {prop.record_id}", (approved.record_id,))
    ]


def test_audit_by_record_id_shows_a_retraction_with_its_reason(store, clock):
    res = store.write(fact("user:42", "plan", "Starter", day(0)), by=MEMBER)
    clock.advance(hours=1)
    gone = store.retract(res.record_id, by=MEMBER, reason="typo in the CRM import")

    assert _trail(store, res.record_id) == [
        ("write", "alice", None, (res.record_id,)),
        ("retract", "alice", "typo in the CRM import", (gone.record_id,)),
    ]


def test_audit_by_subject_and_record_id_needs_both_to_match(store, clock):
    res = store.write(fact("user:42", "plan", "Starter", day(0)), by=MEMBER)
    store.write(fact("user:43", "plan", "Starter", day(0)), by=MEMBER)

    assert [e.record_ids for e in store.audit(subject="user:42", record_id=res.record_id, by=STEWARD)] == [
        (res.record_id,)
    ]
    assert store.audit(subject="user:43", record_id=res.record_id, by=STEWARD) == []


def test_audit_by_record_id_stays_inside_the_stewards_subtree(store, clock):
    res = store.write(fact("user:42", "plan", "Starter", day(0)), by=MEMBER)
    sales_steward = ml.Principal("sales-dpo", ml.Scope("acme", "sales"), role="steward")

    assert store.audit(record_id=res.record_id, by=sales_steward) == []
    with pytest.raises(ml.PermissionDenied):
        store.audit(record_id=res.record_id, by=MEMBER)
