"""Authorization controls the action: a policy decision or a memory never grants a refund."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import memory_lakehouse as ml
from memory_lakehouse.authz import return_window
from memory_lakehouse.policy import resolve

START = datetime(2026, 1, 1, tzinfo=UTC)
PLACED = datetime(2026, 9, 2, tzinfo=UTC)
ORG = ml.Scope("acme")
BOT = ml.Principal("triage-bot", ml.Scope("acme", "support", "tier2", "bot"), role="agent")
ALICE = ml.Principal("alice", ml.Scope("acme", "support", "tier2", "alice"), role="member")
LIMITS = {"agent": 50.0, "member": 200.0}
ORDER = {"market": "US", "product_class": "apparel", "sale_type": "regular"}


def decision_for(text: str, conditions=None, facts=ORDER) -> ml.Decision:
    p = ml.Policy(
        "returns-us",
        text,
        conditions or {"market": "US"},
        START,
        scope=ORG,
        source="doc",
        approved_by="legal",
        record_id="pol_v2",
    )
    return resolve([p], facts, PLACED)


FOURTEEN_DAYS = decision_for("US orders can be returned within 14 days.")


def test_a_refund_inside_the_window_and_the_roles_limit_is_authorized():
    grant = ml.authorize("refund", principal=BOT, decision=FOURTEEN_DAYS, limits=LIMITS, amount=30, elapsed_days=10)
    assert isinstance(grant, ml.Authorization)
    assert (grant.action, grant.principal, grant.amount, grant.policy_id, grant.record_id) == (
        "refund",
        "triage-bot",
        30.0,
        "returns-us",
        "pol_v2",
    )
    assert "within 14 days" in grant.reason


def test_a_refund_after_the_window_is_refused_even_though_a_policy_applies():
    with pytest.raises(ml.PermissionDenied, match="within 14 days; this one is 21 days in"):
        ml.authorize("refund", principal=BOT, decision=FOURTEEN_DAYS, limits=LIMITS, amount=30, elapsed_days=21)


def test_a_policy_that_forbids_returns_refuses_every_refund():
    final = decision_for("Final-sale electronics cannot be returned.")
    with pytest.raises(ml.PermissionDenied, match="does not allow returns"):
        ml.authorize("refund", principal=ALICE, decision=final, limits=LIMITS, amount=1, elapsed_days=0)


def test_a_refund_over_the_roles_limit_or_by_a_role_without_a_limit_is_refused():
    with pytest.raises(ml.PermissionDenied, match="may refund up to 50, not 80"):
        ml.authorize("refund", principal=BOT, decision=FOURTEEN_DAYS, limits=LIMITS, amount=80, elapsed_days=1)
    assert (
        ml.authorize("refund", principal=ALICE, decision=FOURTEEN_DAYS, limits=LIMITS, amount=80, elapsed_days=1).amount
        == 80
    )
    with pytest.raises(ml.PermissionDenied, match="may not issue refunds"):
        ml.authorize("refund", principal=BOT, decision=FOURTEEN_DAYS, limits={"member": 200}, amount=1, elapsed_days=1)


def test_no_applicable_policy_means_a_person_decides():
    none = decision_for("US orders can be returned within 14 days.", facts={**ORDER, "market": "CA"})
    assert none.policy is None
    with pytest.raises(ml.PermissionDenied, match="no policy applies"):
        ml.authorize("refund", principal=ALICE, decision=none, limits=LIMITS, amount=1, elapsed_days=1)


def test_a_remembered_past_refund_is_not_a_decision_and_grants_nothing():
    memory = ml.Episode(
        "refunds",
        "prod",
        "customer asked for a late refund",
        "refunded 80 as an exception",
        "fixed",
        START,
        evidence="ticket:T-1",
        source="support-log",
    )
    with pytest.raises(ml.ValidationError, match="Decision"):
        ml.authorize(
            "refund",
            principal=BOT,
            decision=memory,  # type: ignore[arg-type]  # the point of the test
            limits=LIMITS,
            amount=30,
            elapsed_days=40,
        )


def test_unknown_actions_are_refused_by_default():
    with pytest.raises(ml.PermissionDenied, match="no rule authorizes 'cancel_subscription'"):
        ml.authorize(
            "cancel_subscription", principal=ALICE, decision=FOURTEEN_DAYS, limits=LIMITS, amount=0, elapsed_days=0
        )


@pytest.mark.parametrize(
    "text",
    [
        "Loyal customers may return orders after 30 days.",  # no window
        "Orders can be returned within 30 days, electronics within 14 days.",  # two windows
    ],
)
def test_unreadable_terms_fail_closed(text):
    with pytest.raises(ml.PermissionDenied, match="a person must decide"):
        ml.authorize("refund", principal=ALICE, decision=decision_for(text), limits=LIMITS, amount=1, elapsed_days=1)


def test_return_window_reads_one_strict_pattern():
    def p(text):
        return ml.Policy("x", text, {}, START, source="doc")

    assert return_window(p("Electronics can be returned within 30 days.")) == 30
    assert return_window(p("Returns within 1 day of delivery.")) == 1
    assert return_window(p("Final-sale items cannot be returned.")) == 0
    assert return_window(p("No returns on gift cards.")) == 0


@pytest.mark.parametrize("field,value", [("amount", -1), ("elapsed_days", "3"), ("amount", True)])
def test_bad_request_numbers_are_validation_errors(field, value):
    kw = {"amount": 1, "elapsed_days": 1, field: value}
    with pytest.raises(ml.ValidationError):
        ml.authorize("refund", principal=ALICE, decision=FOURTEEN_DAYS, limits=LIMITS, **kw)
