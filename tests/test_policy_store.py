"""Policy memory against a real store: the article's boundary cases, end to end.

Every test opens a fresh store in a temporary directory on a simulated clock (its
reading is each commit's system time), writes policies through the one write path and
asks ``store.resolve_policy`` — no index, no fixtures shared between tests.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from _support import present
from deltalake import DeltaTable

import memory_lakehouse as ml

SECOND = timedelta(seconds=1)


def t(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


JAN_1, SEPT_1, SEPT_5, SEPT_10 = t(2026, 1, 1), t(2026, 9, 1), t(2026, 9, 5), t(2026, 9, 10)

ORG = ml.Scope("acme")
TIER1 = ml.Scope("acme", "support", "tier1")
TIER2 = ml.Scope("acme", "support", "tier2")
LEGAL = ml.Principal("legal", ORG, role="curator")
TIER2_LEAD = ml.Principal("tier2-lead", TIER2, role="curator")
DPO = ml.Principal("dpo", ORG, role="steward")
ALICE = ml.Principal("alice", ml.Scope("acme", "support", "tier2", "alice"), role="member")
BOB = ml.Principal("bob", ml.Scope("acme", "support", "tier1", "bob"), role="member")
BOT = ml.Principal("triage-bot", ml.Scope("acme", "support", "tier2", "bot"), role="agent")

US_ORDER = {"market": "US", "product_class": "apparel", "sale_type": "regular", "customer_segment": "regular"}
US_ELECTRONICS = {**US_ORDER, "product_class": "electronics"}
FINAL_SALE_ELECTRONICS = {**US_ELECTRONICS, "sale_type": "final"}


def policy(policy_id: str, text: str, conditions: dict, start: datetime, **kw) -> ml.Policy:
    kw.setdefault("source", "returns-policy.pdf")
    return ml.Policy(policy_id, text, conditions, start, **kw)


RETURNS_30 = policy("returns-us", "US orders can be returned within 30 days.", {"market": "US"}, JAN_1)
RETURNS_14 = policy("returns-us", "US orders can be returned within 14 days.", {"market": "US"}, SEPT_1)
ELECTRONICS_30 = policy(
    "returns-electronics",
    "Electronics can be returned within 30 days.",
    {"product_class": "electronics"},
    JAN_1,
    priority=5,
)
FINAL_SALE = policy(
    "final-sale-electronics",
    "Final-sale electronics cannot be returned.",
    {"product_class": "electronics", "sale_type": "final"},
    JAN_1,
    priority=10,
)


class Shop:
    """A store on a clock the test moves by hand."""

    def __init__(self, path) -> None:
        self.path = path
        self.now = JAN_1
        self.store = ml.open(path, clock=lambda: self.now)

    def at(self, when: datetime) -> Shop:
        assert when >= self.now, "the simulated clock only moves forward"
        self.now = when
        return self

    def resolve(self, facts: dict, at: datetime, by: ml.Principal = ALICE, **kw) -> ml.Decision:
        return self.store.resolve_policy(facts, at=at, by=by, **kw)

    def policy_table_version(self) -> int:
        return DeltaTable(str(self.path / "policy")).version()


@pytest.fixture
def shop(tmp_path) -> Shop:
    return Shop(tmp_path / "store")


# --------------------------------------------------------------------------- effective dates


def test_an_order_one_second_before_september_first_gets_the_30_day_version(shop):
    shop.store.write(RETURNS_30, by=LEGAL)
    shop.at(t(2026, 8, 20)).store.write(RETURNS_14, by=LEGAL)
    dec = shop.resolve(US_ORDER, SEPT_1 - SECOND)
    assert dec.policy.text == RETURNS_30.text
    assert dec.effective == (JAN_1, None) and dec.matched == {"market": "US"} and dec.rule == "only match"


def test_an_order_one_second_after_september_first_gets_the_14_day_version(shop):
    shop.store.write(RETURNS_30, by=LEGAL)
    new = shop.at(t(2026, 8, 20)).store.write(RETURNS_14, by=LEGAL)
    dec = shop.resolve(US_ORDER, SEPT_1 + SECOND)
    assert dec.policy.text == RETURNS_14.text and dec.policy.record_id == new.record_id
    assert new.action == "superseded"  # same policy_id: a new version, the old one kept for history
    assert shop.resolve(US_ORDER, SEPT_1).policy.text == RETURNS_14.text  # half-open: the new version owns Sept 1


def test_the_late_recorded_14_day_policy_answers_both_clocks_differently(shop):
    """Recorded Sept 10, effective Sept 1: the same Sept-5 order, two questions."""
    shop.store.write(RETURNS_30, by=LEGAL)
    shop.at(SEPT_10).store.write(RETURNS_14, by=LEGAL)
    shop.at(t(2026, 9, 20))

    applies = shop.resolve(US_ORDER, SEPT_5)  # which policy applies to the Sept-5 order (known now)?
    knew = shop.resolve(US_ORDER, SEPT_5, known_at=SEPT_5)  # which policy did the agent know on Sept 5?
    assert applies.policy.text == RETURNS_14.text and applies.known_at == t(2026, 9, 20)
    assert knew.policy.text == RETURNS_30.text and knew.known_at == SEPT_5
    assert applies.policy.known_since == SEPT_10 and applies.policy.effective_from == SEPT_1
    assert "2026-09-05" in knew.explanation and "known by 2026-09-05" in knew.explanation
    # the instant it was recorded, it is known
    assert shop.resolve(US_ORDER, SEPT_5, known_at=SEPT_10).policy.text == RETURNS_14.text
    assert shop.resolve(US_ORDER, SEPT_5, known_at=SEPT_10 - SECOND).policy.text == RETURNS_30.text


def test_a_naive_order_time_is_rejected(shop):
    with pytest.raises(ml.ValidationError, match="at"):
        shop.resolve(US_ORDER, datetime(2026, 9, 5))


# --------------------------------------------------------------------------- scope and precedence


def test_us_electronics_and_final_sale_rules_resolve_by_precedence_naming_the_winning_rule(shop):
    shop.store.write_many([RETURNS_30, ELECTRONICS_30, FINAL_SALE], by=LEGAL)
    at = t(2026, 3, 2)

    us = shop.resolve(US_ORDER, at)
    assert us.policy.policy_id == "returns-us" and us.rule == "only match"

    electronics = shop.resolve(US_ELECTRONICS, at)
    assert electronics.policy.policy_id == "returns-electronics" and electronics.rule == "priority"
    assert {c.policy.policy_id: c.state for c in electronics.losers} == {
        "returns-us": "lost",
        "final-sale-electronics": "not matching",
    }
    assert "won by priority" in electronics.explanation

    final = shop.resolve(FINAL_SALE_ELECTRONICS, at)
    assert final.policy.policy_id == "final-sale-electronics" and final.rule == "priority"
    assert final.matched == {"product_class": "electronics", "sale_type": "final"}
    assert all(c.state == "lost" for c in final.losers)
    assert "Final-sale electronics cannot be returned" in final.explanation


def test_a_team_policy_is_served_to_that_team_only(shop):
    shop.store.write(RETURNS_30, by=LEGAL)
    tier2_only = policy(
        "tier2-us-goodwill", "Tier 2 may accept US returns within 45 days.", {"market": "US"}, JAN_1, scope=TIER2
    )
    gift = policy(
        "tier2-gifts",
        "Gift orders can be returned within 60 days.",
        {"sale_type": "gift"},
        JAN_1,
        scope=TIER2,
        priority=1,
    )
    shop.store.write_many([tier2_only, gift], by=TIER2_LEAD)
    at = t(2026, 3, 2)

    mine = shop.resolve(US_ORDER, at, by=ALICE)
    assert mine.policy.policy_id == "tier2-us-goodwill" and mine.rule == "scope"
    other = shop.resolve(US_ORDER, at, by=BOB)  # tier1: a sibling team never sees tier2's policies
    assert other.policy.policy_id == "returns-us" and other.rule == "only match"
    assert {c.policy.policy_id for c in other.candidates} == {"returns-us"}
    gift_order = {**US_ORDER, "market": "CA", "sale_type": "gift"}
    assert shop.resolve(gift_order, at, by=ALICE).policy.policy_id == "tier2-gifts"
    nothing = shop.resolve(gift_order, at, by=BOB)
    assert nothing.policy is None and nothing.rule == "no match"


# --------------------------------------------------------------------------- write-time overlap checks


def test_an_equal_priority_overlap_is_refused_at_write_time_and_nothing_is_written(shop):
    shop.store.write(RETURNS_30, by=LEGAL)
    version = shop.policy_table_version()
    clash = policy(
        "returns-electronics", "Electronics can be returned within 30 days.", {"product_class": "electronics"}, JAN_1
    )  # priority 0, like returns-us

    with pytest.raises(ml.ValidationError, match="returns-electronics overlaps returns-us") as err:
        shop.store.write(clash, by=LEGAL)
    assert err.value.field == "priority" and "overrides=['returns-us']" in str(err.value)
    assert shop.policy_table_version() == version
    assert shop.store.audit(subject="policy:returns-electronics", by=DPO) == []
    assert shop.resolve(US_ELECTRONICS, t(2026, 3, 2)).policy.policy_id == "returns-us"

    # an intentional relationship is accepted: a priority gap, or a one-way overrides
    assert shop.store.write(ELECTRONICS_30, by=LEGAL).action == "inserted"
    holiday = policy(
        "holiday-us",
        "US holiday orders can be returned within 60 days.",
        {"market": "US"},
        JAN_1,
        overrides=("returns-us",),
    )
    assert shop.store.write(holiday, by=LEGAL).action == "inserted"


def test_a_policy_that_starts_after_the_new_one_is_still_an_overlap(shop):
    shop.store.write(policy("returns-us-2027", "US orders: 21 days.", {"market": "US"}, t(2027, 1, 1)), by=LEGAL)
    with pytest.raises(ml.ValidationError, match="from 2027-01-01"):
        shop.store.write(policy("returns-us-open", "US orders: 30 days.", {"market": "US"}, JAN_1), by=LEGAL)
    ended = policy("returns-us-2026", "US orders: 30 days.", {"market": "US"}, JAN_1, effective_to=t(2027, 1, 1))
    assert shop.store.write(ended, by=LEGAL).action == "inserted"  # ends where the other starts


def test_a_superseded_version_no_longer_counts_as_an_overlap(shop):
    shop.store.write(policy("returns", "All orders: 30 days.", {}, JAN_1), by=LEGAL)
    shop.store.write(policy("returns", "Non-US orders: 30 days.", {"market": "EU"}, SEPT_1), by=LEGAL)
    with pytest.raises(ml.ValidationError) as err:  # before Sept 1 the catch-all version still covers the US
        shop.store.write(policy("returns-us", "US: 14 days.", {"market": "US"}, JAN_1), by=LEGAL)
    assert str(err.value).count("overlaps") == 1 and "from 2026-01-01" in str(err.value)
    assert shop.store.write(policy("returns-us", "US: 14 days.", {"market": "US"}, SEPT_1), by=LEGAL)


def test_overlaps_inside_one_batch_are_refused_and_the_batch_is_not_written(shop):
    version = shop.policy_table_version()
    with pytest.raises(ml.ValidationError, match="returns-us overlaps returns-electronics"):
        shop.store.write_many(
            [RETURNS_30, policy("returns-electronics", "30 days.", {"product_class": "electronics"}, JAN_1)], by=LEGAL
        )
    assert shop.policy_table_version() == version


def test_a_batch_may_end_a_policy_and_start_its_successor(shop):
    shop.store.write(policy("returns", "All orders: 30 days.", {}, JAN_1), by=LEGAL)
    ended = policy("returns", "All orders: 30 days.", {}, JAN_1, effective_to=SEPT_1)
    successor = policy("returns-v2", "All orders: 14 days.", {}, SEPT_1)
    assert [r.action for r in shop.store.write_many([ended, successor], by=LEGAL)] == ["superseded", "inserted"]
    assert shop.resolve(US_ORDER, SEPT_1 - SECOND).policy.text == "All orders: 30 days."
    assert shop.resolve(US_ORDER, SEPT_1).policy.policy_id == "returns-v2"


def test_two_policies_declaring_that_each_overrides_the_other_are_refused(shop):
    shop.store.write(policy("a", "A.", {"market": "US"}, JAN_1, overrides=("b",)), by=LEGAL)
    with pytest.raises(ml.ValidationError, match="each declare that they override the other"):
        shop.store.write(policy("b", "B.", {"market": "US"}, JAN_1, overrides=("a",)), by=LEGAL)


def test_contradictory_overrides_across_scopes_escalate_instead_of_guessing(shop):
    """The honest tie: two curators, two scopes, each declaring that their policy wins.

    The write-time check governs one scope (equal priority on the same scope), because
    across scopes the resolver already has an order: the narrower scope wins. So legal
    may publish an org-wide holiday rule that overrides tier 2's goodwill rule, and tier
    2's lead may publish that goodwill rule declaring it overrides the holiday rule;
    neither write overlaps anything on its own scope. At read time the declared
    overrides come first and contradict each other, so a tier-2 principal's question
    escalates to a person instead of letting scope depth silently decide. A tier-1
    principal, who sees only the org rule, gets an answer.
    """
    holiday = policy(
        "holiday-us",
        "US holiday orders can be returned within 60 days.",
        {"market": "US"},
        JAN_1,
        overrides=("tier2-us-goodwill",),
    )
    goodwill = policy(
        "tier2-us-goodwill",
        "Tier 2 may accept US returns within 45 days.",
        {"market": "US"},
        JAN_1,
        scope=TIER2,
        overrides=("holiday-us",),
    )
    shop.store.write(holiday, by=LEGAL)
    shop.store.write(goodwill, by=TIER2_LEAD)

    with pytest.raises(ml.Escalation, match="override each other") as err:
        shop.resolve(US_ORDER, t(2026, 3, 2), by=ALICE)
    assert {c.policy.policy_id for c in err.value.candidates} == {"holiday-us", "tier2-us-goodwill"}
    assert all(c.state == "tied" for c in err.value.candidates)
    assert shop.resolve(US_ORDER, t(2026, 3, 2), by=BOB).policy.policy_id == "holiday-us"


# --------------------------------------------------------------------------- approval


def test_a_proposed_policy_is_ignored_until_a_curator_approves_it(shop):
    shop.store.write(RETURNS_30, by=LEGAL)
    loyal = policy(
        "loyal-exception",
        "Loyal customers may return orders after 30 days.",
        {"customer_segment": "loyal"},
        JAN_1,
        priority=20,
        source="summariser@v3",
        evidence="chat:support-2291",
    )
    prop = shop.at(t(2026, 2, 1)).store.propose(loyal, by=BOT, scope=ORG)
    order = {**US_ORDER, "customer_segment": "loyal"}

    dec = shop.resolve(order, t(2026, 3, 2))
    assert dec.policy.policy_id == "returns-us"
    assert "loyal-exception" not in {c.policy.policy_id for c in dec.candidates}
    with pytest.raises(ml.PermissionDenied):
        shop.store.approve(prop.record_id, by=BOT)
    with pytest.raises(ml.PermissionDenied):
        shop.store.approve(prop.record_id, by=ALICE)

    approved = shop.at(t(2026, 3, 1)).store.approve(prop.record_id, by=LEGAL)
    dec = shop.resolve(order, t(2026, 3, 2))
    assert dec.policy.record_id == approved.record_id and dec.rule == "priority"
    assert dec.policy.approved_by == "legal" and dec.policy.authority == "published_policy"
    # before the approval was recorded, the agent did not know it
    assert shop.resolve(order, t(2026, 3, 2), known_at=t(2026, 2, 15)).policy.policy_id == "returns-us"


def test_a_proposal_cannot_carry_its_own_approval(shop):
    forged = policy(
        "loyal-exception",
        "Loyal customers may return after 30 days.",
        {"customer_segment": "loyal"},
        JAN_1,
        approved_by="legal",
    )
    with pytest.raises(ml.ValidationError, match="approved_by"):
        shop.store.propose(forged, by=BOT, scope=ORG)


def test_a_members_direct_policy_write_is_refused(shop):
    version = shop.policy_table_version()
    mine = policy("alice-rule", "My customers can return within 90 days.", {"market": "US"}, JAN_1, priority=50)
    with pytest.raises(ml.PermissionDenied, match="only a curator or steward may write a policy"):
        shop.store.write(mine, by=ALICE)  # at its own scope, where a member may write other memory
    with pytest.raises(ml.PermissionDenied):
        shop.store.write(mine, by=BOT)
    assert shop.policy_table_version() == version
    assert shop.store.propose(mine, by=ALICE).action == "inserted"  # members propose, like agents
    assert shop.resolve(US_ORDER, t(2026, 3, 2)).policy is None


def test_a_curators_direct_write_is_recorded_as_its_approval(shop):
    shop.store.write(RETURNS_30, by=LEGAL)
    dec = shop.resolve(US_ORDER, t(2026, 3, 2))
    assert dec.policy.approved_by == "legal" and dec.policy.authority == "published_policy"


def test_only_a_curator_retracts_a_policy(shop):
    res = shop.store.write(RETURNS_30, by=LEGAL)
    with pytest.raises(ml.PermissionDenied):
        shop.store.retract(res.record_id, by=ALICE, reason="I disagree")
    shop.store.retract(res.record_id, by=LEGAL, reason="published in error")
    assert shop.resolve(US_ORDER, t(2026, 3, 2)).policy is None


# --------------------------------------------------------------------------- read-your-writes


def test_a_published_policy_is_served_by_the_very_next_read(shop):
    shop.store.write(RETURNS_30, by=LEGAL)
    other_handle = ml.open(shop.path, clock=lambda: shop.now)  # another process's view of the same store
    assert shop.resolve(US_ORDER, SEPT_5).policy.text == RETURNS_30.text
    assert present(other_handle.resolve_policy(US_ORDER, at=SEPT_5, by=ALICE).policy).text == RETURNS_30.text

    shop.at(t(2026, 8, 20)).store.write(RETURNS_14, by=LEGAL)
    assert shop.resolve(US_ORDER, SEPT_5).policy.text == RETURNS_14.text
    assert present(other_handle.resolve_policy(US_ORDER, at=SEPT_5, by=ALICE).policy).text == RETURNS_14.text
