"""Article 000: the T-4812 replay must not read the answer key out of memory.

Ticket T-4812 opened 2026-03-03 09:14. Memory holds m-17 (a preference), m-23 (a fact)
and m-31 — the resolution the summariser wrote two days later — plus a row about
something that happened before the ticket but was learned an hour after it. Replaying
the decision must see m-17 and m-23 only; the naive query sees the future.
"""

from _scenario import UTC, Checks, SimClock, datetime, parse_store, timedelta

import memory_lakehouse as ml

path = parse_store(__doc__.splitlines()[0])
clock = SimClock(datetime(2026, 2, 11, 16, 2, tzinfo=UTC))
store = ml.open(path, clock=clock)
check = Checks("scenario 000 (ticket replay)")

acme = ml.Scope("acme-corp")
summariser = ml.Principal("summariser", ml.Scope("acme-corp", "support"), role="curator")
triage = ml.Principal("triage-bot", ml.Scope("acme-corp", "support", "tier2", "triage-bot"), role="agent")
subject = "user:acme-corp"

m17 = store.write(
    ml.Preference(
        subject,
        "response_style",
        "Prefers responses with CLI commands, not UI steps",
        clock.now,
        source="summariser@v3",
        evidence="session:s-201",
    ),
    by=summariser,
)
clock.set(datetime(2026, 2, 27, 10, 40, tzinfo=UTC))
m23 = store.write(
    ml.Fact(
        subject,
        "sso_plugin",
        "Runs plugin v2.4 on self-hosted SSO",
        clock.now,
        source="summariser@v3",
        evidence="session:s-233",
    ),
    by=summariser,
)
opened = datetime(2026, 3, 3, 9, 14, tzinfo=UTC)
# happened at 08:50, but the summariser only recorded it at 10:14 — an hour after the decision
clock.set(opened + timedelta(hours=1))
late = store.write(
    ml.Fact(
        subject,
        "sso_cert",
        "SSO signing certificate rotated this morning",
        datetime(2026, 3, 3, 8, 50, tzinfo=UTC),
        source="summariser@v3",
        evidence="session:s-240",
    ),
    by=summariser,
)
clock.set(datetime(2026, 3, 5, 18, 22, tzinfo=UTC))
m31 = store.write(
    ml.Episode(
        "sso",
        "prod",
        "T-4812: login loop after SSO redirect",
        "downgrade plugin to v2.3 (SSO metadata URL misconfigured)",
        "fixed",
        clock.now,
        evidence="https://tickets.example/T-4812",
        source="summariser@v3",
        subject=subject,
        version_from="v2.4",
        version_to="v2.4",
    ),
    by=summariser,
)
clock.set(datetime(2026, 3, 10, tzinfo=UTC))

print(f"store: {path}")
print("Replaying T-4812 as of", opened.isoformat())
rep = store.replay([("T-4812", triage, "SSO login loop after upgrade", subject, opened)])
seen = set(rep.visible.column("record_id").to_pylist())
check("the decision sees m-17 and m-23", {m17.record_id, m23.record_id} <= seen)
check("it never sees the resolution written two days later (m-31)", m31.record_id not in seen)
check("nor the row learned an hour after the decision", late.record_id not in seen)
check("leakage rate is 0", rep.leakage_rate == 0.0, f"{rep.leakage_rate:.0%}")
naive = store.replay([("T-4812", triage, "SSO login loop after upgrade", subject, opened)], naive=True)
check("the naive time-blind query leaks (for comparison)", naive.leakage_rate == 1.0, f"{naive.leakage_rate:.0%}")

hits = store.recall("SSO login loop after plugin upgrade", by=triage, subject=subject, as_of=opened)
ids = {h.record_id for h in hits}
check(
    "recall as of the decision returns the same two rows",
    ids == {m17.record_id, m23.record_id},
    ", ".join(h.text[:40] for h in hits),
)
now_hits = {h.record_id for h in store.recall("SSO login loop", by=triage, subject=subject, kinds=["episode"])}
check("today, the resolution is memory like any other", m31.record_id in now_hits)
print("freshness lag (s):", rep.freshness_lag_seconds)
check.finish()
