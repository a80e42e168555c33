"""Reading what is there: get by id, a subject's listing, a slot's history, the review queue,
the audit window and the context's items — all within what the reader may see."""

from __future__ import annotations

from datetime import timedelta

import pytest
from _support import (
    AGENT,
    CURATOR,
    MEMBER,
    SIBLING,
    STEWARD,
    TIER2,
    SimClock,
    day,
    examples,
    fact,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml

EMBEDDER = ml.HashingEmbedder(dim=64)


@pytest.fixture
def store(tmp_path, clock):
    return ml.open(tmp_path / "store", clock=clock, embedder=EMBEDDER)


def plan_story(store, clock):
    """Free from day 1, Pro from day 14 (learned on day 15), a correction of day 14 learned on day 16."""
    clock.set(day(2))
    free = store.write(fact("user:42", "plan", "Free", day(1)), by=MEMBER)
    clock.set(day(15))
    pro = store.write(fact("user:42", "plan", "Pro", day(14)), by=MEMBER)
    clock.set(day(16))
    fixed = store.write(fact("user:42", "plan", "Pro Plus", day(14)), by=MEMBER)
    return free, pro, fixed


# ---------------------------------------------------------------- get


def test_get_returns_a_record_by_id_even_once_superseded(store, clock):
    free, pro, _ = plan_story(store, clock)
    assert store.get(free.record_id, by=MEMBER).value == "Free"
    assert store.get(pro.record_id, by=MEMBER).value == "Pro"


def test_get_never_returns_a_sibling_scopes_record(store, clock):
    free, _, _ = plan_story(store, clock)
    assert store.get(free.record_id, by=SIBLING) is None


def test_get_does_not_see_a_record_before_the_store_knew_it(store, clock):
    _, pro, _ = plan_story(store, clock)
    assert store.get(pro.record_id, by=MEMBER, known_at=day(14)) is None
    assert store.get(pro.record_id, by=MEMBER, known_at=day(15)) is not None


def test_get_of_a_forgotten_subject_is_none(store, clock):
    free, _, _ = plan_story(store, clock)
    store.forget("user:42", by=STEWARD, reason="erasure")
    assert store.get(free.record_id, by=MEMBER) is None


def test_get_rejects_what_is_not_a_record_id(store):
    with pytest.raises(ml.ValidationError):
        store.get("nonsense", by=MEMBER)


# ---------------------------------------------------------------- list


def test_list_gives_the_subjects_current_memories_only(store, clock):
    plan_story(store, clock)
    store.write(fact("user:42", "seats", 5, day(3)), by=MEMBER)
    store.write(fact("user:7", "plan", "Free", day(3)), by=MEMBER)
    listing = store.list("user:42", by=MEMBER, kinds=["fact"])
    assert sorted((r.attribute, r.value) for r in listing) == [("plan", "Pro Plus"), ("seats", 5)]
    assert sorted(
        (r.attribute, r.value) for r in store.list("user:42", by=MEMBER, kinds=["fact"], valid_at=day(5))
    ) == [("plan", "Free"), ("seats", 5)]


def test_list_matches_get_fact_for_every_slot(store, clock):
    plan_story(store, clock)
    for record in store.list("user:42", by=MEMBER):
        assert store.get_fact("user:42", record.attribute, by=MEMBER).record_id == record.record_id


def test_list_to_arrow_has_one_row_per_record(store, clock):
    plan_story(store, clock)
    table = store.list("user:42", by=MEMBER).to_arrow()
    assert table.num_rows == 1 and table.column("text").to_pylist() == ['user:42 plan: "Pro Plus"']


def test_list_to_polars_gives_a_dataframe(store, clock):
    pl = pytest.importorskip("polars")
    plan_story(store, clock)
    frame = store.list("user:42", by=MEMBER).to_polars()
    assert isinstance(frame, pl.DataFrame) and frame.height == 1


# ---------------------------------------------------------------- history


def test_history_gives_every_version_with_valid_and_known_intervals(store, clock):
    free, pro, fixed = plan_story(store, clock)
    hist = store.history("user:42", "plan", by=MEMBER)
    assert [v.record_id for v in hist] == [free.record_id, pro.record_id, fixed.record_id]
    first, second, third = hist
    assert (first.valid_from, first.valid_to, first.known_from, first.known_to) == (day(1), day(14), day(2), None)
    # the day-16 correction of the same valid time replaced "Pro" in the store's belief
    assert (second.valid_from, second.known_from, second.known_to) == (day(14), day(15), day(16))
    assert second.superseded_by == fixed.record_id and third.supersedes == pro.record_id
    assert (third.valid_to, third.known_to) == (None, None)


def test_history_as_known_earlier_holds_only_what_was_known(store, clock):
    free, _, _ = plan_story(store, clock)
    assert [v.record_id for v in store.history("user:42", "plan", by=MEMBER, known_at=day(10))] == [free.record_id]


def test_history_shows_a_retraction_and_its_reason(store, clock):
    free, pro, fixed = plan_story(store, clock)
    clock.advance(days=1)
    store.retract(fixed.record_id, by=MEMBER, reason="typed the wrong plan")
    last = store.history("user:42", "plan", by=MEMBER)[-1]
    assert last.retracted and last.retraction_reason == "typed the wrong plan" and last.known_to == clock.now


def test_history_of_a_forgotten_subject_is_empty(store, clock):
    plan_story(store, clock)
    store.forget("user:42", by=STEWARD, reason="erasure")
    assert len(store.history("user:42", "plan", by=MEMBER)) == 0


def test_history_never_shows_a_sibling_scopes_versions(store, clock):
    plan_story(store, clock)
    store.write(fact("user:42", "plan", "Bob's guess", day(20)), by=SIBLING)
    assert "Bob's guess" not in [v.record.value for v in store.history("user:42", "plan", by=MEMBER)]
    assert [v.record.value for v in store.history("user:42", "plan", by=SIBLING)] == ["Bob's guess"]


def test_history_by_lineage_is_the_same_slot(store, clock):
    plan_story(store, clock)
    lineage = store.get_fact("user:42", "plan", by=MEMBER).lineage_id
    by_slot = [v.record_id for v in store.history("user:42", "plan", by=MEMBER)]
    assert [v.record_id for v in store.history(lineage=lineage, by=MEMBER)] == by_slot


def test_history_to_arrow_has_the_intervals(store, clock):
    plan_story(store, clock)
    table = store.history("user:42", "plan", by=MEMBER).to_arrow()
    assert table.num_rows == 3 and {"valid_from", "valid_to", "known_from", "known_to"} <= set(table.column_names)


OPS = st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["a", "b", "c"]), st.booleans()), min_size=1, max_size=8)


@settings(max_examples=examples(12), deadline=None)
@given(ops=OPS)
def test_every_version_get_fact_serves_is_in_history_and_served_at_its_own_basis(tmp_path_factory, ops):
    """History derives from the same rules as get_fact: at each version's (known_from, valid_from)
    get_fact serves that very version, and whatever get_fact serves at any basis is in history."""
    clock = SimClock(day(0))
    store = ml.open(tmp_path_factory.mktemp("h") / "s", clock=clock, embedder=EMBEDDER)
    ids = []
    for valid_day, value, retract in ops:
        clock.advance(hours=7)
        res = store.write(fact("u:1", "x", value, day(valid_day)), by=MEMBER)
        if res.action != "duplicate":
            ids.append(res.record_id)
        if retract and ids and res.action != "duplicate":
            clock.advance(hours=1)
            store.retract(res.record_id, by=MEMBER, reason="oops")
    hist = store.history("u:1", "x", by=MEMBER)
    in_history = {v.record_id for v in hist}
    for v in hist:
        served = store.get_fact("u:1", "x", by=MEMBER, known_at=v.known_from, valid_at=v.valid_from)
        assert served is not None and served.record_id == v.record_id
    for k in range(0, 60, 6):
        for valid in range(0, 32, 8):
            served = store.get_fact("u:1", "x", by=MEMBER, known_at=day(0, hours=7 * k), valid_at=day(valid))
            assert served is None or served.record_id in in_history
    store.close()


# ---------------------------------------------------------------- pending


def test_pending_lists_proposals_in_the_curators_subtree_until_approved(store, clock):
    prop = store.propose(fact("user:42", "plan", "Team", day(3)), by=AGENT)
    assert [r.record_id for r in store.pending(by=CURATOR)] == [prop.record_id]
    store.approve(prop.record_id, by=CURATOR)
    assert list(store.pending(by=CURATOR)) == []


def test_pending_is_for_curators_only(store):
    store.propose(fact("user:42", "plan", "Team", day(3)), by=AGENT)
    with pytest.raises(ml.PermissionDenied):
        store.pending(by=MEMBER)


def test_pending_does_not_show_another_subtrees_proposals(store):
    store.propose(fact("user:42", "plan", "Team", day(3)), by=SIBLING)
    assert list(store.pending(by=CURATOR)) == []


def test_proposals_are_still_never_served_as_memory(store):
    store.propose(fact("user:42", "plan", "Team", day(3)), by=AGENT)
    assert store.get_fact("user:42", "plan", by=AGENT) is None and list(store.list("user:42", by=AGENT)) == []


# ---------------------------------------------------------------- audit window


def test_audit_over_a_window_answers_who_wrote_what_this_week(store, clock):
    clock.set(day(1))
    store.write(fact("user:1", "plan", "Free", day(1)), by=MEMBER)
    clock.set(day(8))
    store.propose(fact("user:2", "plan", "Pro", day(8)), by=AGENT)
    store.write(fact("user:3", "plan", "Pro", day(8)), by=MEMBER)
    week = store.audit(by=STEWARD, since=day(7), until=day(14))
    assert sorted((e.operation, e.actor) for e in week) == [("propose", "triage-bot"), ("write", "alice")]
    assert [e.operation for e in store.audit(by=STEWARD, since=day(7), actor="triage-bot")] == ["propose"]
    assert store.audit(by=STEWARD, since=day(7)).to_arrow().num_rows == 2


def test_audit_window_needs_an_aware_datetime(store):
    with pytest.raises(ml.ValidationError):
        store.audit(by=STEWARD, since=day(1).replace(tzinfo=None))


def test_audit_window_stays_inside_the_stewards_subtree(store, clock):
    store.write(fact("user:1", "plan", "Free", day(1)), by=SIBLING)
    tier2_steward = ml.Principal("t2dpo", TIER2, role="steward")
    assert list(store.audit(by=tier2_steward, since=day(0))) == []
    assert len(store.audit(by=STEWARD, since=day(0))) == 1


# ---------------------------------------------------------------- context items


def test_context_is_todays_text_with_items_carrying_provenance(store, clock):
    plan_story(store, clock)
    ctx = store.context("what plan", by=MEMBER, budget_tokens=400)
    assert isinstance(ctx, ml.Context) and isinstance(ctx, str) and "Pro Plus" in ctx and str(ctx) == ctx.text
    (item,) = ctx.items
    assert item.record_id == store.get_fact("user:42", "plan", by=MEMBER).record_id
    assert (item.kind, item.source, item.valid_from) == ("fact", "test@v1", day(14))
    assert item.line in ctx.text.splitlines()


def test_context_items_are_exactly_the_lines_that_fit_the_budget(store, clock):
    for i in range(12):
        store.write(fact(f"user:{i}", "note", "a longer value " * 6, day(1)), by=MEMBER)
    ctx = store.context("longer value", by=MEMBER, budget_tokens=120)
    assert [i.line for i in ctx.items] == ctx.text.splitlines()[1:]


def test_a_replay_result_and_its_decisions_are_tables(store, clock):
    plan_story(store, clock)
    rep = store.replay([("d1", MEMBER, "plan", "user:42", day(15) + timedelta(hours=1))])
    assert rep.to_arrow().num_rows == rep.visible.num_rows == 1
    rows = rep.per_decision().to_pylist()
    assert [(r["decision_id"], r["visible_rows"], r["leaked"]) for r in rows] == [("d1", 1, False)]
