"""Policy: which rule governs an order — boundaries, precedence, late arrival both ways, ties (seed 004).

A shop's return policies at the org and at one team: a standard policy whose second
version (effective Sep 1) was only recorded on Sep 10, a US-electronics rule that ends
on Dec 1, a US holiday rule recorded five days after it took effect, team rules that win
by specificity and by scope, and a team goodwill rule that overrides the holiday rule
while the holiday rule overrides it (a tie: a person must decide). Generated orders land
on random dates and on every boundary instant, asked by a reader in that team or in
another, each asked two ways: as known now, and as known when the order was placed (what
the agent could have applied then).

The expected answer comes from this module's own statement of the rules
(`expected`), not from the library: in effect ``effective_from <= at < effective_to``;
known ``recorded <= known_at``; the latest version of a policy_id in effect supersedes
the others; then overrides, priority, matched conditions, scope depth; a tie escalates.
The naive memory answers with the most similar policy text; it cannot escalate.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import memory_lakehouse as ml

from .core import UTC, Context, EvalResult, Gate, Metric, SimClock, naive_item, rate

NAME = "policy"
ORG = ml.Scope("shop")
TEAM = ml.Scope("shop", "support", "emea")
LEGAL = ml.Principal("legal", ORG, role="curator")
TEAM_LEAD = ml.Principal("emea-lead", TEAM, role="curator")
READERS = (
    ml.Principal("ana", ml.Scope("shop", "support", "emea", "ana"), role="member"),
    ml.Principal("kenji", ml.Scope("shop", "support", "apac", "kenji"), role="member"),
)
ESCALATE = "ESCALATE"


def t(year: int, month: int, day: int, hour: int = 0) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


@dataclass(frozen=True)
class Spec:
    policy_id: str
    text: str
    conditions: dict[str, str]
    effective_from: datetime
    recorded: datetime
    scope: ml.Scope
    effective_to: datetime | None = None
    priority: int = 0
    overrides: tuple[str, ...] = field(default=())


SPECS: tuple[Spec, ...] = (
    Spec("returns-standard", "Standard returns: within 30 days.", {}, t(2026, 1, 1), t(2026, 1, 1), ORG),
    Spec("returns-standard", "Standard returns: within 14 days.", {}, t(2026, 9, 1), t(2026, 9, 10), ORG),
    Spec(
        "electronics-us",
        "US electronics: within 15 days.",
        {"market": "US", "product_class": "electronics"},
        t(2026, 1, 1),
        t(2026, 1, 1, 1),
        ORG,
        effective_to=t(2026, 12, 1),
        priority=1,
    ),
    Spec(
        "returns-uk", "UK orders: within 28 days.", {"market": "UK"}, t(2026, 1, 1), t(2026, 1, 1, 2), ORG, priority=1
    ),
    Spec(
        "holiday-us",
        "US holiday orders: within 60 days.",
        {"market": "US", "season": "holiday"},
        t(2026, 11, 15),
        t(2026, 11, 20),
        ORG,
        effective_to=t(2027, 1, 15),
        priority=2,
        overrides=("goodwill-emea", "returns-standard", "electronics-us"),
    ),
    Spec("emea-eu", "EMEA team, EU orders: within 21 days.", {"market": "EU"}, t(2026, 1, 1), t(2026, 1, 2), TEAM),
    Spec(
        "emea-uk",
        "EMEA team, UK orders: within 35 days.",
        {"market": "UK"},
        t(2026, 1, 1),
        t(2026, 1, 2, 1),
        TEAM,
        priority=1,
    ),
    Spec(
        "goodwill-emea",
        "EMEA goodwill, US holiday orders: within 45 days.",
        {"market": "US", "season": "holiday"},
        t(2026, 11, 15),
        t(2026, 11, 16),
        TEAM,
        effective_to=t(2027, 1, 15),
        priority=2,
        overrides=("holiday-us", "returns-standard", "electronics-us"),
    ),
)
BOUNDARIES = sorted({s.effective_from for s in SPECS} | {s.effective_to for s in SPECS if s.effective_to})
NOW = t(2027, 2, 1)
#: Where a policy was in effect before it was recorded (and the holiday tie, once both are known).
LATE_WINDOWS = ((t(2026, 9, 1), t(2026, 9, 10)), (t(2026, 11, 15), t(2026, 11, 20)), (t(2026, 11, 20), t(2027, 1, 15)))


def expected(order: dict[str, str], at: datetime, reader: ml.Principal, known_at: datetime) -> str | None:
    """The text of the policy that governs, ESCALATE on a tie, None when nothing applies."""
    live = [
        s
        for s in SPECS
        if s.recorded <= known_at
        and reader.can_read(s.scope)
        and s.effective_from <= at
        and (s.effective_to is None or at < s.effective_to)
        and all(order.get(k) == v for k, v in s.conditions.items())
    ]
    latest: dict[str, Spec] = {}
    for s in sorted(live, key=lambda s: s.effective_from):
        latest[s.policy_id] = s
    live = list(latest.values())
    if not live:
        return None
    ids = {s.policy_id for s in live}
    overridden = [s for s in live if any(s.policy_id in o.overrides for o in live if o is not s)]
    if len(live) > 1 and len(overridden) == len(live):
        return ESCALATE
    live = [s for s in live if s not in overridden] if ids else live
    for key in (lambda s: s.priority, lambda s: len(s.conditions), lambda s: s.scope.depth):
        best = max(key(s) for s in live)
        live = [s for s in live if key(s) == best]
    return live[0].text if len(live) == 1 else ESCALATE


def orders(seed: int, n: int) -> list[tuple[str, dict[str, str], datetime, ml.Principal]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        order = {
            "market": rng.choice(("US", "EU", "UK")),
            "product_class": rng.choice(("electronics", "apparel", "grocery")),
            "season": rng.choice(("holiday", "regular")),
        }
        if i % 3 == 0:  # on a boundary instant, or the microsecond before it
            at = rng.choice(BOUNDARIES) - rng.choice((timedelta(0), timedelta(microseconds=1)))
        elif i % 3 == 1:  # in force before the store knew it: placed in a window of late arrival
            start, end = rng.choice(LATE_WINDOWS)
            at = start + (end - start) * rng.random()
            if rng.random() < 0.6:
                order.update(market="US", season="holiday")
        else:
            at = t(2026, 1, 1) + timedelta(seconds=rng.uniform(0, 400 * 86400))
        out.append((f"order-{i:04d}", order, at, rng.choice(READERS)))
    return out


def category(order: dict[str, str], at: datetime, reader: ml.Principal, asked: str) -> list[str]:
    cats = []
    if at in BOUNDARIES or at + timedelta(microseconds=1) in BOUNDARIES:
        cats.append("boundary dates")
    if expected(order, at, reader, at) != expected(order, at, reader, NOW):
        cats.append(f"late arrival, asked as known {asked}")
    want = expected(order, at, reader, at if asked == "then" else NOW)
    if want == ESCALATE:
        cats.append("ties escalated")
    elif (
        sum(
            1
            for s in SPECS
            if reader.can_read(s.scope)
            and all(order.get(k) == v for k, v in s.conditions.items())
            and s.effective_from <= at
            and (s.effective_to is None or at < s.effective_to)
        )
        > 1
    ):
        cats.append("precedence")
    return cats


def run(ctx: Context) -> EvalResult:
    seed = ctx.seed(NAME)
    n = ctx.size("policy.orders", 40, 300)
    clock = SimClock(t(2025, 12, 31))
    store = ctx.open_store(NAME, clock)
    naive = ctx.naive()
    for s in sorted(SPECS, key=lambda s: s.recorded):
        clock.set(s.recorded)
        record = ml.Policy(
            s.policy_id,
            s.text,
            s.conditions,
            s.effective_from,
            effective_to=s.effective_to,
            priority=s.priority,
            overrides=s.overrides,
            source="returns-handbook@2026",
            evidence=f"https://legal.example/{s.policy_id}",
        )
        by = LEGAL if s.scope == ORG else TEAM_LEAD
        res = store.write(record, by=by, scope=s.scope)
        naive.add([naive_item(record, res.record_id, s.scope, s.recorded)])
    clock.set(NOW)

    tally: dict[str, dict[str, int]] = {}
    right = {"ours": 0, "naive": 0}
    asked_total = 0
    cases = orders(seed, n)
    for i, (_oid, order, at, reader) in enumerate(cases):
        for asked, known in (("now", None), ("then", at)):
            want = expected(order, at, reader, NOW if known is None else known)
            try:
                got: str | None = store.resolve_policy(order, at=at, by=reader, known_at=known).policy.text
            except ml.Escalation:
                got = ESCALATE
            except AttributeError:  # a decision without a policy (nothing applies)
                got = None
            query = f"return policy for a {order['market']} {order['product_class']} order, {order['season']} season"
            top = naive.search(query, org="shop", kinds=["policy"], k=1)
            naive_got = str(top[0].item.payload.get("text", top[0].item.text)) if top else None
            asked_total += 1
            right["ours"] += got == want
            right["naive"] += naive_got == want
            for cat in ["all", *category(order, at, reader, asked)]:
                row = tally.setdefault(cat, {"n": 0, "ours": 0, "naive": 0})
                row["n"] += 1
                row["ours"] += got == want
                row["naive"] += naive_got == want
        ctx.tick(NAME, i + 1, len(cases))
    metrics = [
        Metric(
            "resolution accuracy, every order asked both ways",
            rate(right["ours"], asked_total),
            rate(right["naive"], asked_total),
            (Gate("ours", "==", 1),),
            unit="score",
            short="resolution accuracy",
        )
    ]
    for cat in (
        "boundary dates",
        "precedence",
        "late arrival, asked as known then",
        "late arrival, asked as known now",
        "ties escalated",
    ):
        row = tally.get(cat, {"n": 0, "ours": 0, "naive": 0})
        metrics.append(
            Metric(
                f"accuracy: {cat} ({row['n']} questions)",
                rate(row["ours"], row["n"]) if row["n"] else None,
                rate(row["naive"], row["n"]) if row["n"] else None,
                (Gate("ours", "==", 1),) if row["n"] else (),
                unit="score",
                short=cat,
            )
        )
    details: dict[str, Any] = {
        "orders": len(cases),
        "questions": asked_total,
        "per_category": {k: v for k, v in sorted(tally.items())},
    }
    return EvalResult(NAME, f"generated orders (seed {seed}, {len(cases)} orders)", metrics, details)
