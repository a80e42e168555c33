"""Article 004: the return window that changed — policy memory is evidence, the resolver decides.

Legal publishes a 30-day US return policy in January; its 14-day successor, effective
September 1, is recorded late, on September 10. The story asks which policy governs
orders placed on either side of the change and on September 5 (by both clocks), lets
US / electronics / final-sale rules meet, escalates a contradiction, ignores an agent's
proposed "loyal customers" rule that nobody approved, and has authorization refuse the
refunds a decision does not allow. It prints every question and answer and exits 1 if
any answer is wrong.

    .venv/bin/python scripts/scenario_004_return_policy.py [--store PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from typing import Any

from _scenario import attempt

import memory_lakehouse as ml


def t(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# ----------------------------------------------------------------------------- plumbing

failures: list[str] = []


def check(label: str, ok: bool, detail: str = "") -> None:
    print(f"  [{'ok  ' if ok else 'FAIL'}] {label}" + (f" — {detail}" if detail else ""))
    if not ok:
        failures.append(label)


def ask(question: str, facts: dict, *, at: datetime, by: ml.Principal, known_at: datetime | None = None):
    """Ask the resolver and print the question, the answer and its explanation."""
    print(f"\nQ: {question}")
    try:
        dec = store.resolve_policy(facts, at=at, by=by, known_at=known_at)
    except ml.Escalation as err:
        print(f"A: ESCALATE — {err}")
        for c in err.candidates:
            print(f"     {c.policy.policy_id} ({c.policy.scope}): {c.status}")
        return err
    answer = f"{dec.policy.policy_id}: {dec.policy.text!r}" if dec.policy else "no policy applies"
    print(f"A: {answer}  [rule: {dec.rule}]")
    print(f"   why: {dec.explanation}")
    return dec


def text_of(dec) -> str | None:
    return dec.policy.text if isinstance(dec, ml.Decision) and dec.policy else None


def pid_of(dec) -> str | None:
    return dec.policy.policy_id if isinstance(dec, ml.Decision) and dec.policy else None


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--store", help="store path (default: a fresh temporary directory)")
path = parser.parse_args().store or tempfile.mkdtemp(prefix="memlake-scenario-004-")

now = [t(2026, 1, 1)]
store = ml.open(path, clock=lambda: now[0])
print(f"store: {path}")

ORG = ml.Scope("acme")
TIER2 = ml.Scope("acme", "support", "tier2")
legal = ml.Principal("legal", ORG, role="curator")
tier2_lead = ml.Principal("tier2-lead", TIER2, role="curator")
dpo = ml.Principal("dpo", ORG, role="steward")
alice = ml.Principal("alice", ml.Scope("acme", "support", "tier2", "alice"), role="member")
bob = ml.Principal("bob", ml.Scope("acme", "support", "tier1", "bob"), role="member")
bot = ml.Principal("support-bot", ml.Scope("acme", "support", "tier2", "support-bot"), role="agent")

# The commerce system owns the orders; memory never does. The resolver gets these facts.
ORDERS: dict[str, dict[str, Any]] = {
    "A-0831": dict(
        placed=t(2026, 8, 31, 15),
        delivered=t(2026, 9, 2),
        amount=40.0,
        market="US",
        product_class="apparel",
        sale_type="regular",
        customer_segment="regular",
    ),
    "A-0902": dict(
        placed=t(2026, 9, 2, 10),
        delivered=t(2026, 9, 4),
        amount=40.0,
        market="US",
        product_class="apparel",
        sale_type="regular",
        customer_segment="regular",
    ),
    "A-0905": dict(
        placed=t(2026, 9, 5, 12),
        delivered=t(2026, 9, 7),
        amount=35.0,
        market="US",
        product_class="apparel",
        sale_type="regular",
        customer_segment="loyal",
    ),
    "E-0902": dict(
        placed=t(2026, 9, 2, 11),
        delivered=t(2026, 9, 4),
        amount=45.0,
        market="US",
        product_class="electronics",
        sale_type="regular",
        customer_segment="regular",
    ),
    "F-0902": dict(
        placed=t(2026, 9, 2, 12),
        delivered=t(2026, 9, 4),
        amount=45.0,
        market="US",
        product_class="electronics",
        sale_type="final",
        customer_segment="regular",
    ),
    "H-1201": dict(
        placed=t(2026, 12, 1, 9),
        delivered=t(2026, 12, 3),
        amount=30.0,
        market="US",
        product_class="apparel",
        sale_type="regular",
        customer_segment="regular",
        season="holiday",
    ),
}


def facts(order_id: str) -> dict:
    return {k: v for k, v in ORDERS[order_id].items() if k not in ("placed", "delivered", "amount")}


# ----------------------------------------------------------------------------- the story

print("\n== Jan 1: legal publishes the 30-day US return policy")
v1 = store.write(
    ml.Policy(
        "returns-us",
        "US orders can be returned within 30 days.",
        {"market": "US"},
        t(2026, 1, 1),
        source="returns-policy-2026.pdf",
        evidence="https://legal.example/returns/v1",
    ),
    by=legal,
)
check("the 30-day policy is stored as a new policy", v1.action == "inserted")

print("\n== Sep 10: the 14-day successor, effective Sep 1, is recorded late")
now[0] = t(2026, 9, 10, 9)
v2 = store.write(
    ml.Policy(
        "returns-us",
        "US orders can be returned within 14 days.",
        {"market": "US"},
        t(2026, 9, 1),
        source="returns-policy-2026-09.pdf",
        evidence="https://legal.example/returns/v2",
    ),
    by=legal,
)
check(
    "the 14-day policy is a new version of the same policy, superseding v1 from Sep 1",
    v2.action == "superseded" and v2.supersedes == v1.record_id,
)
dec = ask(
    "(read-your-writes) right after publishing: which policy governs an order placed on Sep 2?",
    facts("A-0902"),
    at=ORDERS["A-0902"]["placed"],
    by=alice,
)
check("the very next read serves the 14-day policy", text_of(dec) == "US orders can be returned within 14 days.")

now[0] = t(2026, 9, 20, 9)
print("\n== Sep 20: orders on either side of the change")
dec = ask(
    "Order A-0831 was placed on Aug 31: which return policy applies?",
    facts("A-0831"),
    at=ORDERS["A-0831"]["placed"],
    by=alice,
)
check("Aug 31 gets 30 days", text_of(dec) == "US orders can be returned within 30 days.")
dec = ask(
    "Order A-0902 was placed on Sep 2: which return policy applies?",
    facts("A-0902"),
    at=ORDERS["A-0902"]["placed"],
    by=alice,
)
check("Sep 2 gets 14 days", text_of(dec) == "US orders can be returned within 14 days.")
second = timedelta(seconds=1)
before = store.resolve_policy(facts("A-0902"), at=t(2026, 9, 1) - second, by=alice)
after = store.resolve_policy(facts("A-0902"), at=t(2026, 9, 1) + second, by=alice)
print("\nQ: and one second either side of midnight, Sep 1?")
print(f"A: 23:59:59 Aug 31 -> {text_of(before)!r}; 00:00:01 Sep 1 -> {text_of(after)!r}")
check(
    "one second before Sep 1: 30 days; one second after: 14 days",
    (text_of(before) or "").endswith("30 days.") and (text_of(after) or "").endswith("14 days."),
)

print("\n== The same Sep 5 order, two clocks")
applies = ask(
    "Which policy applies to the Sep 5 order A-0905 (what we know now)?",
    facts("A-0905"),
    at=ORDERS["A-0905"]["placed"],
    by=alice,
)
knew = ask(
    "Which policy did the agent know on Sep 5, when it answered the customer?",
    facts("A-0905"),
    at=ORDERS["A-0905"]["placed"],
    by=alice,
    known_at=ORDERS["A-0905"]["placed"],
)
check("it applies: 14 days (effective Sep 1)", text_of(applies) == "US orders can be returned within 14 days.")
check(
    "the agent knew: 30 days (the 14-day policy was recorded Sep 10)",
    text_of(knew) == "US orders can be returned within 30 days.",
)

print("\n== Precedence: US vs electronics vs final-sale electronics")
equal = ml.Policy(
    "returns-electronics",
    "Electronics can be returned within 30 days.",
    {"product_class": "electronics"},
    t(2026, 1, 1),
    source="returns-policy-2026.pdf",
)
err = attempt(
    "legal publishes the electronics rule at the same priority as the US rule", lambda: store.write(equal, by=legal)
)
check("an equal-priority overlap on the same scope is refused at write time", isinstance(err, ml.ValidationError))
check("and nothing was written", store.audit(subject="policy:returns-electronics", by=dpo) == [])
store.write_many(
    [
        ml.Policy(
            "returns-electronics",
            "Electronics can be returned within 30 days.",
            {"product_class": "electronics"},
            t(2026, 1, 1),
            priority=5,
            source="returns-policy-2026.pdf",
        ),
        ml.Policy(
            "final-sale-electronics",
            "Final-sale electronics cannot be returned.",
            {"product_class": "electronics", "sale_type": "final"},
            t(2026, 1, 1),
            priority=10,
            source="returns-policy-2026.pdf",
        ),
    ],
    by=legal,
)
print("   legal publishes them with an intentional order: electronics priority 5, final sale priority 10")
dec = ask("US apparel order A-0902?", facts("A-0902"), at=ORDERS["A-0902"]["placed"], by=alice)
check("US apparel: returns-us, the only match", pid_of(dec) == "returns-us" and dec.rule == "only match")
dec = ask("US electronics order E-0902?", facts("E-0902"), at=ORDERS["E-0902"]["placed"], by=alice)
check(
    "US electronics: the electronics rule wins by priority",
    pid_of(dec) == "returns-electronics" and dec.rule == "priority",
)
dec = ask("US final-sale electronics order F-0902?", facts("F-0902"), at=ORDERS["F-0902"]["placed"], by=alice)
check(
    "final-sale electronics: no returns, wins by priority",
    pid_of(dec) == "final-sale-electronics"
    and dec.rule == "priority"
    and dec.matched == {"product_class": "electronics", "sale_type": "final"},
)

print("\n== An escalation: two curators each declare that their holiday rule wins")
now[0] = t(2026, 10, 1, 9)
store.write(
    ml.Policy(
        "holiday-us",
        "US holiday orders can be returned within 60 days.",
        {"market": "US", "season": "holiday"},
        t(2026, 11, 15),
        overrides=("returns-us", "tier2-holiday-goodwill"),
        source="holiday-memo.pdf",
    ),
    by=legal,
)
store.write(
    ml.Policy(
        "tier2-holiday-goodwill",
        "Tier 2 may accept US holiday returns within 45 days.",
        {"market": "US", "season": "holiday"},
        t(2026, 11, 15),
        overrides=("holiday-us",),
        scope=TIER2,
        source="tier2-playbook",
    ),
    by=tier2_lead,
)
print("   (the write-time check is per scope, so neither write overlaps anything on its own scope)")
now[0] = t(2026, 12, 5, 9)
dec = ask("Tier 2 asks about holiday order H-1201", facts("H-1201"), at=ORDERS["H-1201"]["placed"], by=alice)
check(
    "the contradictory overrides escalate to a person, naming both policies",
    isinstance(dec, ml.Escalation)
    and {c.policy.policy_id for c in dec.candidates} == {"holiday-us", "tier2-holiday-goodwill"},
)
dec = ask(
    "Tier 1 (which never sees tier 2's rule) asks about the same order",
    facts("H-1201"),
    at=ORDERS["H-1201"]["placed"],
    by=bob,
)
check("tier 1 gets the org's holiday rule", pid_of(dec) == "holiday-us")

print("\n== An agent's summary becomes a proposal, not a policy")
loyal = ml.Policy(
    "loyal-exception",
    "Loyal customers may return orders after 30 days.",
    {"customer_segment": "loyal"},
    t(2026, 1, 1),
    priority=50,
    source="summariser@v3",
    evidence="chat:support-2291 'we usually make exceptions for loyal customers'",
)
err = attempt("the bot writes it as a policy", lambda: store.write(loyal, by=bot, scope=ORG))
check("an agent cannot write a policy", isinstance(err, ml.PermissionDenied))
err = attempt("alice (a member) writes it at her own scope", lambda: store.write(loyal, by=alice))
check("a member cannot write a policy either", isinstance(err, ml.PermissionDenied))
prop = store.propose(loyal, by=bot, scope=ORG)
print(f"   the bot proposes it instead: {prop.record_id} (status proposed)")
err = attempt("the bot approves its own proposal", lambda: store.approve(prop.record_id, by=bot))
check("the bot cannot approve it", isinstance(err, ml.PermissionDenied))
dec = ask(
    "A loyal customer's Sep 5 order A-0905, 40 days after delivery: which policy applies?",
    facts("A-0905"),
    at=ORDERS["A-0905"]["placed"],
    by=alice,
)
check(
    "the unapproved proposal is never applied",
    pid_of(dec) == "returns-us" and "loyal-exception" not in {c.policy.policy_id for c in dec.candidates},
)

print("\n== Decision is not authorization: the refund service checks the action")
limits = {"agent": 50.0, "member": 200.0}  # the refund service's own configuration


def refund(order_id: str, by: ml.Principal, on: datetime, dec) -> object:
    order = ORDERS[order_id]
    elapsed = (on - order["delivered"]) / timedelta(days=1)
    return ml.authorize(
        "refund", principal=by, decision=dec, limits=limits, amount=order["amount"], elapsed_days=elapsed
    )


f_dec = store.resolve_policy(facts("F-0902"), at=ORDERS["F-0902"]["placed"], by=bot)
err = attempt(
    "bot refunds final-sale order F-0902 (3 days after delivery)", lambda: refund("F-0902", bot, t(2026, 9, 7), f_dec)
)
check("the final-sale decision does not allow a return: refused", isinstance(err, ml.PermissionDenied))
a_dec = store.resolve_policy(facts("A-0905"), at=ORDERS["A-0905"]["placed"], by=bot)
err = attempt("bot refunds A-0905 twenty days after delivery", lambda: refund("A-0905", bot, t(2026, 9, 27), a_dec))
check("outside the 14-day window: refused", isinstance(err, ml.PermissionDenied))
err = attempt("bot refunds A-0905 ten days after delivery", lambda: refund("A-0905", bot, t(2026, 9, 17), a_dec))
check("inside the window and the agent's limit: allowed", err is None)
past_case = ml.Episode(
    "refunds",
    "prod",
    "customer asked for a late refund",
    "refunded as a loyalty exception",
    "fixed",
    t(2026, 6, 1),
    evidence="ticket:T-311",
    source="support-log",
)
err = attempt(
    "bot cites a remembered past exception as its permission",
    lambda: ml.authorize(
        "refund",
        principal=bot,
        decision=past_case,  # type: ignore[arg-type]  # on purpose
        limits=limits,
        amount=35,
        elapsed_days=40,
    ),
)
check("a memory is not a decision and grants nothing", isinstance(err, ml.LakehouseError))

print()
if failures:
    print(f"scenario 004 (return policy): {len(failures)} check(s) failed: {'; '.join(failures)}")
    sys.exit(1)
print("scenario 004 (return policy): all checks passed")
