"""Article 001: the subscription upgrade — only the current plan reaches the prompt.

Day 1 the user is on Free Starter; day 14 they upgrade to Enterprise Pro. On day 20
they ask whether they can invite 50 members: memory must hold only the upgrade. As of
day 10, memory held the old plan (and that is what a replay of day 10 must see).
"""

from _scenario import UTC, Checks, SimClock, datetime, parse_store, timedelta

import memory_lakehouse as ml

path = parse_store(__doc__.splitlines()[0])
day1 = datetime(2026, 9, 1, 9, tzinfo=UTC)
clock = SimClock(day1)
store = ml.open(path, clock=clock)
check = Checks("scenario 001 (subscription upgrade)")
alice = ml.Principal("usr_42", ml.Scope("cust_acme_corp", "accounts", "team-a", "usr_42"), role="member")

first = store.write(
    ml.Fact(
        "usr_42",
        "subscription_tier",
        "Free Starter",
        day1,
        source="user_explicit",
        evidence="evt_session_turn_17",
        confidence=0.95,
    ),
    by=alice,
)
clock.set(day1 + timedelta(days=13))
upgrade = store.write(
    ml.Fact(
        "usr_42",
        "subscription_tier",
        "Enterprise Pro",
        clock.now,
        source="user_explicit",
        evidence="evt_session_turn_812",
        confidence=0.98,
    ),
    by=alice,
)
again = store.write(
    ml.Fact(
        "usr_42",
        "subscription_tier",
        "Enterprise Pro",
        clock.now,
        source="summariser@v3",
        evidence="evt_session_turn_813",
    ),
    by=alice,
)
check(
    "the upgrade supersedes the old plan with a pointer",
    upgrade.action == "superseded" and upgrade.supersedes == first.record_id,
)
check("restating the same plan is a duplicate, not a new version", again.action == "duplicate")

clock.set(day1 + timedelta(days=19))
print(f"store: {path}")
print("Day 20: 'Can I invite 50 team members to my organization?'")
hits = store.recall("Can I invite 50 team members to my organization?", by=alice, subject="usr_42")
values = [
    h.record.value
    for h in hits
    if isinstance(h.record, (ml.Fact, ml.Preference)) and h.record.attribute == "subscription_tier"
]
check("the day-20 question sees only the upgrade", values == ["Enterprise Pro"], str(values))
fact = store.get_fact("usr_42", "subscription_tier", by=alice)
check("get_fact answers Enterprise Pro", fact is not None and fact.value == "Enterprise Pro")
past = store.get_fact("usr_42", "subscription_tier", by=alice, as_of=day1 + timedelta(days=9))
check("as of day 10 it sees the old plan", past is not None and past.value == "Free Starter")
old_hits = store.recall(
    "subscription plan and member limits", by=alice, subject="usr_42", as_of=day1 + timedelta(days=9)
)
old_values = [h.record.value if isinstance(h.record, (ml.Fact, ml.Preference)) else h.record.kind for h in old_hits]
check("recall as of day 10 sees only Free Starter", old_values == ["Free Starter"], str(old_values))
other = ml.Principal("usr_7", ml.Scope("cust_acme_corp", "accounts", "team-a", "usr_7"), role="member")
check("a sibling actor never sees usr_42's memory", store.get_fact("usr_42", "subscription_tier", by=other) is None)
check.finish()
