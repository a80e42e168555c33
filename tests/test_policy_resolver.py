"""The policy resolver at its boundaries: effective dates, precedence, ties and overlaps.

Pure logic: policies are built directly, as the store would hand them over.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_lakehouse.errors import Escalation, ValidationError
from memory_lakehouse.policy import Decision, effective_at, matches, overlaps, resolve, write_conflicts
from memory_lakehouse.records import Policy
from memory_lakehouse.scope import Scope

ORG = Scope("acme")
SUPPORT = Scope("acme", "support")
TIER2 = Scope("acme", "support", "tier2")
SEPT_1 = datetime(2026, 9, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def t(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


NEW_YEAR = t(2026, 1, 1)  # the default start of a test policy


def pol(
    policy_id,
    conditions,
    *,
    start=NEW_YEAR,
    end=None,
    priority=0,
    scope=ORG,
    overrides=(),
    status="active",
    record_id=None,
    text=None,
    known_since=None,
) -> Policy:
    return Policy(
        policy_id,
        text or f"{policy_id} rule",
        conditions,
        start,
        effective_to=end,
        priority=priority,
        overrides=tuple(overrides),
        scope=scope,
        status=status,
        record_id=record_id or f"pol_{policy_id}_{start:%Y%m%d}",
        known_since=known_since,
        source="returns-policy.pdf",
        approved_by="legal",
    )


RETURNS_30 = pol("returns", {}, end=SEPT_1, text="Orders can be returned within 30 days.")
RETURNS_14 = pol("returns", {}, start=SEPT_1, text="Orders can be returned within 14 days.")
US_14 = pol("returns-us", {"market": "US"}, text="US orders can be returned within 14 days.")
ELECTRONICS_30 = pol(
    "returns-electronics", {"product_class": "electronics"}, text="Electronics can be returned within 30 days."
)
FINAL_SALE = pol(
    "final-sale-electronics",
    {"product_class": "electronics", "sale_type": "final"},
    priority=10,
    text="Final-sale electronics cannot be returned.",
)
ORDER = {"market": "US", "product_class": "electronics", "sale_type": "regular", "order_id": "o-1"}
PLACED = t(2026, 9, 2)


# --------------------------------------------------------------------------- effective dates


def test_an_order_one_second_before_september_first_gets_the_30_day_version():
    at = SEPT_1 - SECOND
    assert effective_at(RETURNS_30, at) and not effective_at(RETURNS_14, at)
    assert resolve([RETURNS_30, RETURNS_14], ORDER, at).policy is RETURNS_30


def test_an_order_one_second_after_september_first_gets_the_14_day_version():
    at = SEPT_1 + SECOND
    assert effective_at(RETURNS_14, at) and not effective_at(RETURNS_30, at)
    assert resolve([RETURNS_30, RETURNS_14], ORDER, at).policy is RETURNS_14


def test_an_order_exactly_at_the_boundary_gets_the_new_version_because_ranges_are_half_open():
    assert effective_at(RETURNS_14, SEPT_1) and not effective_at(RETURNS_30, SEPT_1)
    dec = resolve([RETURNS_30, RETURNS_14], ORDER, SEPT_1)
    assert dec.policy is RETURNS_14 and dec.rule == "only match"
    assert dec.candidates[0].status.startswith("not effective")


def test_a_policy_is_not_effective_before_it_starts():
    assert not effective_at(RETURNS_30, t(2026, 1, 1) - SECOND)
    assert effective_at(RETURNS_30, t(2026, 1, 1))


def test_an_open_ended_old_version_is_superseded_from_the_new_versions_start():
    open_30 = pol("returns", {}, text="30 days", record_id="v1")
    assert resolve([open_30, RETURNS_14], ORDER, SEPT_1 - SECOND).policy is open_30
    dec = resolve([open_30, RETURNS_14], ORDER, SEPT_1)
    assert dec.policy is RETURNS_14 and dec.rule == "only match"
    assert dec.losers[0].status.startswith("lost: superseded by version")


def test_two_versions_of_one_policy_starting_together_escalate():
    v1 = pol("returns", {}, start=SEPT_1, record_id="v1", text="14 days")
    v2 = pol("returns", {}, start=SEPT_1, record_id="v2", text="7 days")
    with pytest.raises(Escalation) as err:
        resolve([v1, v2], ORDER, PLACED)
    assert {c.policy.record_id for c in err.value.candidates} == {"v1", "v2"}


def test_a_naive_decision_time_is_rejected():
    with pytest.raises(ValidationError):
        resolve([US_14], ORDER, datetime(2026, 9, 2))
    with pytest.raises(ValidationError):
        effective_at(US_14, datetime(2026, 9, 2))


# --------------------------------------------------------------------------- precedence


def test_us_and_electronics_policies_with_equal_precedence_escalate_naming_both():
    with pytest.raises(Escalation) as err:
        resolve([US_14, ELECTRONICS_30], ORDER, PLACED)
    assert {c.policy.policy_id for c in err.value.candidates} == {"returns-us", "returns-electronics"}
    assert all(c.state == "tied" for c in err.value.candidates)
    assert "returns-us" in str(err.value) and "returns-electronics" in str(err.value)


def test_a_priority_gap_resolves_the_us_versus_electronics_tie():
    electronics = pol("returns-electronics", {"product_class": "electronics"}, priority=5)
    dec = resolve([US_14, electronics], ORDER, PLACED)
    assert dec.policy is electronics and dec.rule == "priority"
    (loser,) = dec.losers
    assert loser.policy is US_14 and loser.status.startswith("lost: priority")


def test_final_sale_electronics_wins_by_priority_over_market_and_category_rules():
    order = {**ORDER, "sale_type": "final"}
    dec = resolve([US_14, ELECTRONICS_30, FINAL_SALE], order, PLACED)
    assert dec.policy is FINAL_SALE and dec.rule == "priority"
    assert dec.matched == {"product_class": "electronics", "sale_type": "final"}
    assert {c.policy.policy_id: c.state for c in dec.losers} == {"returns-us": "lost", "returns-electronics": "lost"}


def test_the_final_sale_rule_does_not_apply_to_a_regular_sale():
    with pytest.raises(Escalation):  # falls back to the US/electronics tie
        resolve([US_14, ELECTRONICS_30, FINAL_SALE], ORDER, PLACED)
    dec = resolve([US_14, FINAL_SALE], ORDER, PLACED)
    assert dec.policy is US_14 and dec.rule == "only match"
    assert dec.losers[0].status == "not matching: sale_type is 'regular', needs 'final'"


def test_more_matched_fields_win_at_equal_priority():
    us_electronics = pol("us-electronics", {"market": "US", "product_class": "electronics"})
    dec = resolve([ELECTRONICS_30, us_electronics], ORDER, PLACED)
    assert dec.policy is us_electronics and dec.rule == "specificity"
    assert dec.losers[0].status.startswith("lost: specificity (1 matched field(s) < 2")


def test_a_team_policy_beats_an_org_policy_of_equal_priority_and_specificity():
    team = pol("tier2-us", {"market": "US"}, scope=TIER2)
    dec = resolve([US_14, team], ORDER, PLACED)
    assert dec.policy is team and dec.rule == "scope"
    assert dec.losers[0].status.startswith("lost: scope (scope depth 1 < 3")


def test_a_declared_override_wins_before_priority_is_compared():
    holiday = pol("holiday-extension", {"market": "US"}, priority=0, overrides=["returns-us"])
    strong_us = pol("returns-us", {"market": "US"}, priority=50)
    dec = resolve([strong_us, holiday], ORDER, PLACED)
    assert dec.policy is holiday and dec.rule == "overrides"
    assert dec.losers[0].status == "lost: overrides (overridden by holiday-extension)"


def test_policies_overriding_each_other_escalate():
    a = pol("a", {}, overrides=["b"])
    b = pol("b", {}, overrides=["a"])
    with pytest.raises(Escalation, match="override each other"):
        resolve([a, b], ORDER, PLACED)


def test_an_override_from_a_policy_that_does_not_match_has_no_effect():
    ca = pol("holiday-ca", {"market": "CA"}, overrides=["returns-us"], priority=9)
    dec = resolve([US_14, ca], ORDER, PLACED)
    assert dec.policy is US_14 and dec.rule == "only match"


def test_no_matching_policy_returns_no_decision_and_says_why_each_was_rejected():
    ca = pol("returns-ca", {"market": "CA"})
    dec = resolve([ca, RETURNS_30], ORDER, PLACED)
    assert dec.policy is None and dec.rule == "no match" and dec.effective is None and dec.matched == {}
    assert [c.state for c in dec.candidates] == ["not matching", "not effective"]
    assert "returns-ca" in dec.explanation and "market is 'US', needs 'CA'" in dec.explanation
    assert "not an authorization" in dec.explanation


def test_no_policies_at_all_is_no_match():
    dec = resolve([], ORDER, PLACED)
    assert dec.policy is None and dec.rule == "no match" and dec.candidates == ()


def test_a_proposed_or_not_yet_known_policy_never_decides():
    proposed = pol("loyal-exception", {"market": "US"}, priority=99, status="proposed")
    late = pol("late-14", {"market": "US"}, priority=99, known_since=t(2026, 9, 10))
    dec = resolve([US_14, proposed, late], ORDER, t(2026, 9, 5), known_at=t(2026, 9, 5))
    assert dec.policy is US_14
    assert [c.state for c in dec.losers] == ["not active", "not known"]
    assert resolve([US_14, late], ORDER, t(2026, 9, 5), known_at=t(2026, 9, 11)).policy is late


# --------------------------------------------------------------------------- the decision itself


def test_the_decision_names_version_fields_range_rule_and_losers():
    electronics = pol(
        "returns-electronics",
        {"product_class": "electronics"},
        priority=5,
        start=t(2026, 3, 1),
        end=t(2027, 1, 1),
        record_id="pol_e2",
    )
    ca = pol("returns-ca", {"market": "CA"})
    dec = resolve([US_14, electronics, ca], ORDER, PLACED, known_at=t(2026, 9, 3))
    assert isinstance(dec, Decision) and dec.policy is not None
    assert dec.policy.record_id == "pol_e2"
    assert dec.matched == {"product_class": "electronics"}
    assert dec.effective == (t(2026, 3, 1), t(2027, 1, 1))
    assert dec.rule == "priority" and dec.at == PLACED and dec.known_at == t(2026, 9, 3)
    assert [c.policy.policy_id for c in dec.candidates] == ["returns-us", "returns-electronics", "returns-ca"]
    assert [c.state for c in dec.candidates] == ["lost", "winner", "not matching"]
    assert dec.losers[0].matched == {"market": "US"}
    for needle in (
        "returns-electronics",
        "pol_e2",
        "priority",
        "2026-03-01",
        "2027-01-01",
        "product_class",
        "returns-us",
        "not an authorization",
    ):
        assert needle in dec.explanation
    json.dumps(dec.to_dict())


# --------------------------------------------------------------------------- matching


def test_matching_is_exact_case_sensitive_and_a_missing_fact_never_matches():
    us = pol("us", {"market": "US"})
    assert matches(us, {"market": "US"}) == (True, {"market": "US"}, None)
    assert matches(us, {"market": "us"})[0] is False
    ok, matched, reason = matches(pol("x", {"market": "US", "sale_type": "final"}), {"market": "US"})
    assert not ok and matched == {"market": "US"} and reason == "not matching: sale_type missing from the facts"


def test_numbers_and_booleans_match_their_rendered_form():
    assert matches(pol("n", {"store": 10}), {"store": "10"})[0]
    assert matches(pol("n", {"store": 10}), {"store": 10.0})[0]
    assert matches(pol("b", {"gift": True}), {"gift": "true"})[0]
    assert not matches(pol("b", {"gift": True}), {"gift": 1})[0]


def test_a_policy_without_conditions_matches_everything():
    assert matches(pol("all", {}), {}) == (True, {}, None)


# --------------------------------------------------------------------------- write-time overlaps


def test_equal_priority_compatible_conditions_same_scope_and_intersecting_ranges_conflict():
    assert overlaps(ELECTRONICS_30, [US_14]) == [US_14]
    assert overlaps(pol("us-2", {"market": "US", "sale_type": "final"}), [US_14]) == [US_14]


@pytest.mark.parametrize(
    "new",
    [
        pol("tier2-us", {"market": "US"}, scope=TIER2),  # another scope
        pol("us-priority", {"market": "US"}, priority=1),  # a priority gap
        pol("returns-ca", {"market": "CA"}),  # disjoint conditions
        pol("old-us", {"market": "US"}, start=t(2025, 1, 1), end=t(2026, 1, 1)),  # ends where US_14 starts
        pol("holiday", {"market": "US"}, overrides=["returns-us"]),  # declared relationship
        pol("returns-us", {"market": "US"}, start=SEPT_1, record_id="v2"),  # a new version
    ],
)
def test_no_conflict_when_scope_priority_conditions_or_ranges_separate_them(new):
    assert overlaps(new, [US_14]) == []


def test_no_conflict_when_the_existing_policy_declares_it_overrides_the_new_one():
    existing = pol("holiday", {"market": "US"}, overrides=["returns-us"])
    assert overlaps(US_14, [existing]) == []


def test_only_active_policies_count_as_overlaps():
    assert overlaps(ELECTRONICS_30, [pol("returns-us", {"market": "US"}, status="proposed")]) == []


# --------------------------------------------------------------------------- properties

KEYS = ("market", "product_class", "sale_type")
VALUES = ("a", "b")
BASE = t(2026, 1, 1)
conditions_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
facts_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
scope_st = st.sampled_from([ORG, SUPPORT, TIER2])


@st.composite
def policy_sets(draw):
    n = draw(st.integers(0, 6))
    ids = [f"p{i}" for i in range(n)]
    out = []
    for pid in ids:
        start = BASE + timedelta(days=draw(st.integers(0, 10)))
        length = draw(st.none() | st.integers(1, 10))
        others = [o for o in ids if o != pid]
        overrides = draw(st.lists(st.sampled_from(others), max_size=1)) if others and draw(st.booleans()) else []
        out.append(
            pol(
                pid,
                draw(conditions_st),
                start=start,
                end=None if length is None else start + timedelta(days=length),
                priority=draw(st.integers(0, 2)),
                scope=draw(scope_st),
                overrides=overrides,
            )
        )
    return out


def _key(p: Policy) -> tuple[int, int, int]:
    assert p.scope is not None  # the strategy gives every policy a scope
    return p.priority, len(p.conditions), p.scope.depth


@settings(max_examples=300, deadline=None)
@given(policy_sets(), facts_st, st.integers(0, 24 * 22))
def test_the_winner_matches_is_effective_and_is_strictly_maximal(policies, facts, hours):
    at = BASE + timedelta(hours=hours)
    applicable = [p for p in policies if matches(p, facts)[0] and effective_at(p, at)]
    contenders = [p for p in applicable if not any(o is not p and p.policy_id in o.overrides for o in applicable)]
    try:
        dec = resolve(policies, facts, at)
    except Escalation as err:
        tied = [c.policy for c in err.candidates]
        assert len(tied) >= 2 and all(p in applicable for p in tied)
        if contenders:  # otherwise every applicable policy was overridden: a cycle
            best = max(map(_key, contenders))
            assert all(_key(p) == best for p in tied)
            assert sum(_key(p) == best for p in contenders) >= 2
        return
    if dec.policy is None:
        assert applicable == [] and dec.rule == "no match"
        return
    assert matches(dec.policy, facts)[0] and effective_at(dec.policy, at)
    assert dec.policy in contenders
    assert all(_key(dec.policy) > _key(p) for p in contenders if p is not dec.policy)
    assert len(dec.candidates) == len(policies)


@settings(max_examples=200, deadline=None)
@given(
    conditions_st,
    conditions_st,
    st.integers(0, 1),
    st.integers(0, 1),
    scope_st,
    scope_st,
    st.integers(0, 5),
    st.integers(0, 5),
    st.none() | st.integers(1, 5),
    st.none() | st.integers(1, 5),
)
def test_overlap_without_declared_overrides_is_symmetric(c1, c2, p1, p2, s1, s2, d1, d2, l1, l2):
    def mk(pid, c, p, s, d, ln):
        start = BASE + timedelta(days=d)
        return pol(pid, c, priority=p, scope=s, start=start, end=None if ln is None else start + timedelta(days=ln))

    a, b = mk("a", c1, p1, s1, d1, l1), mk("b", c2, p2, s2, d2, l2)
    assert bool(overlaps(a, [b])) == bool(overlaps(b, [a]))


def test_two_policies_that_each_declare_overriding_the_other_still_conflict():
    a = pol("a", {"market": "US"}, overrides=["b"])
    b = pol("b", {"market": "US"}, overrides=["a"])
    assert overlaps(a, [b]) == [b] and overlaps(b, [a]) == [a]


# --------------------------------------------------------------------------- write_conflicts


def _stored(*policies):
    """An in_force lookup over fixed stored heads (one per policy_id), as the store provides."""

    def in_force(scope, at):
        heads = {}
        for p in sorted(policies, key=lambda p: p.effective_from):
            if p.scope == scope and p.effective_from <= at:
                heads[p.policy_id] = p
        return [p for p in heads.values() if effective_at(p, at)]

    return in_force, [p.effective_from for p in policies]


def test_write_conflicts_finds_a_stored_policy_that_starts_inside_the_new_range():
    later = pol("later-us", {"market": "US"}, start=t(2026, 10, 1))
    in_force, starts = _stored(later)
    ((new, old, at),) = write_conflicts([US_14], in_force, starts)
    assert (new, old, at) == (US_14, later, t(2026, 10, 1))


def test_write_conflicts_ignores_a_version_superseded_before_the_new_policy_starts():
    v1 = pol("returns", {}, record_id="v1")
    v2 = pol("returns", {"market": "CA"}, start=SEPT_1, record_id="v2")
    in_force, starts = _stored(v1, v2)
    new = pol("returns-us", {"market": "US"}, start=SEPT_1)
    assert write_conflicts([new], in_force, starts) == []
    early = pol("returns-us", {"market": "US"})
    assert [(o.record_id, at) for _, o, at in write_conflicts([early], in_force, starts)] == [("v1", t(2026, 1, 1))]


def test_write_conflicts_overlays_the_batch_on_the_store_and_checks_it_against_itself():
    catch_all = pol("returns", {})
    in_force, starts = _stored(catch_all)
    ended = pol("returns", {}, end=SEPT_1)
    successor = pol("returns-v2", {}, start=SEPT_1)
    assert write_conflicts([ended, successor], in_force, starts) == []
    assert len(write_conflicts([successor], in_force, starts)) == 1  # without the ended version it clashes
    pair = write_conflicts([US_14, ELECTRONICS_30], *_stored())
    assert [(n.policy_id, o.policy_id) for n, o, _ in pair] == [("returns-us", "returns-electronics")]


def test_only_the_policies_on_an_override_cycle_tie_and_the_one_they_override_loses():
    a = pol("a", {}, overrides=["b", "base"])
    b = pol("b", {}, overrides=["a"])
    base = pol("base", {})
    with pytest.raises(Escalation, match="policies a@pol_a_20260101, b@pol_b_20260101 override each other") as err:
        resolve([base, a, b], ORDER, PLACED)
    assert {c.policy.policy_id: c.state for c in err.value.candidates} == {"a": "tied", "b": "tied"}


def test_a_three_way_override_cycle_escalates_naming_all_three():
    a, b, c = pol("a", {}, overrides=["b"]), pol("b", {}, overrides=["c"]), pol("c", {}, overrides=["a"])
    with pytest.raises(Escalation) as err:
        resolve([a, b, c], ORDER, PLACED)
    assert sorted(c.policy.policy_id for c in err.value.candidates) == ["a", "b", "c"]


@settings(max_examples=200, deadline=None)
@given(policy_sets(), conditions_st, st.integers(0, 1), scope_st, st.integers(0, 12), st.none() | st.integers(1, 6))
def test_write_conflicts_finds_exactly_the_pairwise_overlaps_when_each_policy_has_one_version(
    stored, conditions, priority, scope, start_day, length
):
    start = BASE + timedelta(days=start_day)
    new = pol(
        "new",
        conditions,
        priority=priority,
        scope=scope,
        start=start,
        end=None if length is None else start + timedelta(days=length),
    )
    in_force, starts = _stored(*stored)
    found = {o.policy_id for _, o, _ in write_conflicts([new], in_force, starts)}
    assert found == {p.policy_id for p in overlaps(new, stored)}
