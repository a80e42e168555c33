"""Filters narrow what is visible at the basis; they never pick among a slot's versions.

Each slot's head is chosen first (supersession, scope precedence, expiry, forgetting,
status), and only then do the caller's filters keep or drop it. A filter that matches
only a superseded version returns nothing — never that version.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from _support import SimClock

import memory_lakehouse as ml

DAY1 = datetime(2026, 9, 1, tzinfo=UTC)
DAY14 = datetime(2026, 9, 14, tzinfo=UTC)
ALICE = ml.Principal("alice", ml.Scope("acme", "support", "tier2", "alice"), role="member")
LEAD = ml.Principal("dana", ml.Scope("acme", "eng", "sre"), role="curator")
QUERY = "what plan is user:42 on?"


@pytest.fixture
def store(tmp_path) -> ml.MemoryStore:
    return ml.open(tmp_path / "s", clock=SimClock(datetime(2026, 9, 20, tzinfo=UTC)), embedder=ml.HashingEmbedder())


@pytest.fixture
def upgraded(store: ml.MemoryStore) -> tuple[ml.MemoryStore, str, str]:
    """Free Starter (billing_api) superseded by Enterprise Pro (user_explicit)."""
    old = store.write(ml.Fact("user:42", "plan", "Free Starter", DAY1, source="billing_api"), by=ALICE)
    new = store.write(ml.Fact("user:42", "plan", "Enterprise Pro", DAY14, source="user_explicit"), by=ALICE)
    assert new.action == "superseded"
    return store, old.record_id, new.record_id


def _old_version_filters(old_id: str) -> list[dict]:
    return [{"source": "billing_api"}, {"record_id": old_id}, {"value": '"Free Starter"'}]


@pytest.mark.parametrize("subject", [None, "user:42"])
def test_a_filter_never_brings_back_a_superseded_value(upgraded, subject):
    store, old_id, new_id = upgraded
    assert store.get_fact("user:42", "plan", by=ALICE).value == "Enterprise Pro"
    for filters in _old_version_filters(old_id):
        for reader in (store, _fresh(store)):  # with and without remembered visible sets
            hits = reader.recall(QUERY, by=ALICE, subject=subject, filters=filters, k=50)
            assert [h.record.record_id for h in hits] == [], filters
        assert "Free Starter" not in _fresh(store).context(QUERY, by=ALICE, subject=subject, filters=filters)


def _fresh(store: ml.MemoryStore) -> ml.MemoryStore:
    """Another handle on the same store: nothing remembered from earlier reads."""
    return ml.open(store.root, clock=store.clock.peek, embedder=ml.HashingEmbedder(), create=False)


def test_a_filter_matching_the_head_still_returns_it(upgraded):
    store, _, new_id = upgraded
    for filters in ({"source": "user_explicit"}, {"record_id": new_id}, {"value": '"Enterprise Pro"'}):
        assert [h.record.record_id for h in _fresh(store).recall(QUERY, by=ALICE, filters=filters)] == [new_id]


def test_a_filter_at_an_earlier_valid_time_sees_the_version_in_force_then(upgraded):
    store, old_id, _ = upgraded
    hits = store.recall(QUERY, by=ALICE, filters={"source": "billing_api"}, valid_at=DAY1)
    assert [h.record.record_id for h in hits] == [old_id]


def test_a_filter_never_brings_back_a_version_a_more_specific_scope_overrides(store):
    lead = ml.Principal("lead", ml.Scope("acme", "support", "tier2"), role="curator")
    store.write(ml.Fact("user:42", "plan", "Team", DAY1, source="crm"), by=lead)
    mine = store.write(ml.Fact("user:42", "plan", "Enterprise Pro", DAY1, source="user_explicit"), by=ALICE)
    assert store.get_fact("user:42", "plan", by=ALICE).record_id == mine.record_id
    assert store.recall(QUERY, by=ALICE, filters={"source": "crm"}) == []


def test_a_filter_never_brings_back_a_retracted_or_ended_version(store):
    old = store.write(ml.Fact("user:42", "plan", "Free Starter", DAY1, source="billing_api"), by=ALICE)
    store.retract(old.record_id, by=ALICE, reason="wrong customer")
    ended = store.write(ml.Fact("user:42", "seats", 5, DAY1, source="billing_api", valid_to=DAY14), by=ALICE)
    assert store.recall(QUERY, by=ALICE, filters={"record_id": old.record_id}) == []
    assert store.recall(QUERY, by=ALICE, filters={"record_id": ended.record_id}) == []


def _fix(**changes) -> ml.Episode:
    ep = ml.Episode(
        "checkout",
        "prod",
        "p99 above 4s",
        "pool 20 -> 40",
        "fixed",
        DAY1,
        evidence="https://inc/INC-101",
        source="review",
    )
    return ep.replace(**changes) if changes else ep


def test_episodes_never_return_a_version_its_correction_moved_elsewhere(store):
    first = store.write(_fix(), by=LEAD)
    fixed = store.write(_fix(env="staging", action="pool 20 -> 50", supersedes=first.record_id), by=LEAD)
    assert fixed.supersedes == first.record_id
    assert store.episodes(service="checkout", env="prod", by=LEAD) == []
    assert [e.record_id for e in store.episodes(service="checkout", env="staging", by=LEAD)] == [fixed.record_id]


def test_a_subject_never_brings_back_a_version_whose_correction_names_another_subject(store):
    # an episode's slot is the episode, not its subject: the subject narrows after the head is chosen
    first = store.write(_fix(subject="service:checkout"), by=LEAD)
    fixed = store.write(_fix(subject="service:payments", supersedes=first.record_id), by=LEAD)
    assert fixed.action == "superseded"
    assert store.recall("pool", by=LEAD, subject="service:checkout", kinds=["episode"]) == []
    assert [
        h.record.record_id for h in store.recall("pool", by=LEAD, subject="service:payments", kinds=["episode"])
    ] == [fixed.record_id]
    later = datetime(2026, 9, 21, tzinfo=UTC)
    decisions = [("d1", LEAD, "pool", "service:checkout", later), ("d2", LEAD, "pool", "service:payments", later)]
    seen = store.replay(decisions, kinds=["episode"]).visible
    assert sorted(zip(seen.column("decision_id").to_pylist(), seen.column("record_id").to_pylist(), strict=True)) == [
        ("d2", fixed.record_id)
    ]


def test_a_filter_on_a_column_only_some_kinds_have_leaves_the_other_kinds_out(store):
    """A filter must hold for a row to be served: a kind without the filtered column cannot
    match it, so a mixed-kind recall drops that kind rather than ignoring the filter for it."""
    fact = store.write(ml.Fact("service:checkout", "pool", "20", DAY1, source="review"), by=LEAD)
    episode = store.write(_fix(subject="service:checkout"), by=LEAD)
    kinds = ["fact", "episode"]
    for reader in (store, _fresh(store)):
        both = {h.record.record_id for h in reader.recall("checkout pool", by=LEAD, kinds=kinds, filters={})}
        assert both == {fact.record_id, episode.record_id}
        by_service = reader.recall("checkout pool", by=LEAD, kinds=kinds, filters={"service": "checkout"})
        assert [h.record.record_id for h in by_service] == [episode.record_id]
        by_attribute = reader.recall("checkout pool", by=LEAD, kinds=kinds, filters={"attribute": "pool"})
        assert [h.record.record_id for h in by_attribute] == [fact.record_id]
        by_source = reader.recall("checkout pool", by=LEAD, kinds=kinds, filters={"source": "review"})
        assert {h.record.record_id for h in by_source} == both
