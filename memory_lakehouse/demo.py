"""`memlake demo`: the product in one minute, on a fresh embedded store.

A support-triage story over three simulated weeks: memory that knows when it learned
something (replay without leakage), supersession (only the current plan reaches the
prompt), scope (a sibling team sees nothing), policy decisions by effective date, and
forgetting for real (tombstone, purge, byte-verified).
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .embed import Embedder, HashingEmbedder


def _value(record: object) -> object:
    return getattr(record, "value", None)


def run_demo(path: str, *, embedder: Embedder | None = None) -> None:
    import memory_lakehouse as ml

    if Path(path).exists():
        shutil.rmtree(path)
    now = [datetime(2026, 9, 1, 9, tzinfo=UTC)]
    store = ml.open(path, clock=lambda: now[0], embedder=embedder)
    tier2 = ml.Scope("acme", "support", "tier2")
    lead = ml.Principal("lead", tier2, role="curator")
    alice = ml.Principal("alice", ml.Scope("acme", "support", "tier2", "alice"), role="member")
    bot = ml.Principal("triage-bot", ml.Scope("acme", "support", "tier2", "bot"), role="agent")
    tier1 = ml.Principal("tier1-agent", ml.Scope("acme", "support", "tier1", "t1"), role="member")
    dpo = ml.Principal("dpo", ml.Scope("acme"), role="steward")

    def say(text: str) -> None:
        print(f"\n== {text}")

    say(f"store at {store.root}  (Delta tables, one per kind; system time = the commit log)")
    store.write(
        ml.Fact("user:42", "plan", "Free Starter", now[0], source="user_explicit", evidence="chat:17", scope=tier2),
        by=lead,
    )
    now[0] += timedelta(days=13)
    res = store.write(
        ml.Fact("user:42", "plan", "Enterprise Pro", now[0], source="user_explicit", evidence="chat:812", scope=tier2),
        by=lead,
    )
    print(f"day 14: plan -> Enterprise Pro ({res.action}, supersedes {res.supersedes})")
    decided = now[0] + timedelta(hours=2)
    now[0] += timedelta(days=2)
    store.write(
        ml.Episode(
            "sso",
            "prod",
            "login loop after SSO redirect",
            "downgrade plugin to v2.3",
            "fixed",
            now[0],
            evidence="https://tickets.example/T-4812",
            source="summariser@v3",
            subject="user:42",
            scope=tier2,
        ),
        by=lead,
    )
    now[0] += timedelta(days=4)

    say("day 20: 'Can I invite 50 members?' — only the current plan reaches the prompt")
    print(store.context("Can I invite 50 team members?", by=alice, subject="user:42", budget_tokens=200))

    say("as of day 10 the store knew the old plan; a replay of day 14's decision sees no later row")
    print("as of day 10:", _value(store.get_fact("user:42", "plan", by=alice, as_of=now[0] - timedelta(days=10))))
    rep = store.replay([("D-1", bot, "sso login loop", "user:42", decided)])
    naive = store.replay([("D-1", bot, "sso login loop", "user:42", decided)], naive=True)
    print(f"replay leakage: {rep.leakage_rate:.0%}   (naive time-blind query: {naive.leakage_rate:.0%})")

    say("scope is enforced by the store: tier 1 sees none of tier 2's memory")
    print("tier1 recall:", store.recall("plan", by=tier1, subject="user:42") or "nothing")

    say("agents propose, curators approve")
    prop = store.propose(
        ml.Fact("user:42", "sso_plugin", "v2.4", now[0], source="triage-bot@v1", evidence="log:991"),
        by=bot,
        scope=tier2,
    )
    print(
        "recalled before approval:",
        any(h.record_id == prop.record_id for h in store.recall("sso plugin", by=alice, subject="user:42")),
    )
    store.approve(prop.record_id, by=lead)
    print("after approval:", _value(store.get_fact("user:42", "sso_plugin", by=alice)))

    say("policy by effective date: the 30-day window still governs orders placed before Sept 1")
    legal = ml.Principal("legal", ml.Scope("acme"), role="curator")
    store.write(
        ml.Policy(
            "returns",
            "Orders can be returned within 30 days.",
            {"market": "US"},
            datetime(2026, 1, 1, tzinfo=UTC),
            source="policy-doc@v1",
        ),
        by=legal,
    )
    store.write(
        ml.Policy(
            "returns",
            "Orders can be returned within 14 days.",
            {"market": "US"},
            datetime(2026, 9, 1, tzinfo=UTC),
            source="policy-doc@v2",
        ),
        by=legal,
    )
    for placed in (datetime(2026, 8, 31, tzinfo=UTC), datetime(2026, 9, 2, tzinfo=UTC)):
        dec = store.resolve_policy({"market": "US"}, at=placed, by=alice)
        print(f"order placed {placed:%b %d}: {dec.policy.text if dec.policy else None}  [{dec.rule}]")

    say("forgetting is real: tombstone now, bytes gone after purge")
    store.write(
        ml.Fact("customer-728", "email", "jane.doe-canary@example.com", now[0], source="crm", scope=tier2), by=lead
    )
    report = store.forget("customer-728", by=dpo, reason="erasure request")
    print(
        f"forgot customer-728 (generation {report.generation}); served now:",
        store.get_fact("customer-728", "email", by=alice),
    )
    print(store.purge(by=dpo).summary())
    events = store.audit(subject="customer-728", by=dpo)
    print("audit:", ", ".join(f"{e.operation} by {e.actor}" for e in events))


def main() -> None:  # `python -m memory_lakehouse.demo` without the CLI
    run_demo("data/store", embedder=HashingEmbedder())


if __name__ == "__main__":
    main()
