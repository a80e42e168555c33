"""Contradiction: two served items must not disagree on one slot, or on one service and action (seed 002).

Generated memory where disagreement is easy to serve: account slots that changed
over time and that some teams override (the most specific scope wins), and on-call
episodes in which one action failed on an old release (a failure is evidence about one
version, and expires after 90 days) and fixed the same symptom on the current one. Each
question is asked of both memories; a contradiction is a question whose served items
hold two different values of one slot, or two different outcomes of one service and
action for the release asked about.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import memory_lakehouse as ml

from .core import Context, EvalResult, Event, Gate, Metric, SimClock, day, ingest, rate

NAME = "contradiction"
ORG = ml.Scope("acme")
TEAMS = (ml.Scope("acme", "support", "emea"), ml.Scope("acme", "support", "apac"))
STEWARD = ml.Principal("acme-steward", ORG, role="steward")
READERS = tuple(ml.Principal(f"bot-{s.team}", ml.Scope(s.org, s.division, s.team, "bot"), role="agent") for s in TEAMS)
SERVICES = ("checkout", "payments", "search", "inventory")
ACTIONS = ("restart the pods", "roll back the release", "flush the CDN cache", "raise the pool size")


def generate(seed: int, accounts: int) -> tuple[list[Event], list[tuple[str, str, str]]]:
    rng = random.Random(seed)
    events: list[Event] = []
    for n in range(accounts):
        subject = f"account:{n:03d}"
        t = day(rng.uniform(0, 5))
        for v in range(rng.randint(2, 4)):  # the org's value changes over time
            events.append(
                Event(
                    t,
                    STEWARD,
                    ml.Fact(
                        subject,
                        "sla_tier",
                        f"SLA tier {rng.choice('ABCDE')}{v}",
                        t,
                        source="contracts@v1",
                        evidence=f"contract:{subject}/{v}",
                    ),
                    scope=ORG,
                )
            )
            t += timedelta(days=rng.uniform(5, 30))
        if rng.random() < 0.6:  # a team's own value for the slot
            team = rng.choice(TEAMS)
            events.append(
                Event(
                    t,
                    STEWARD,
                    ml.Fact(
                        subject,
                        "sla_tier",
                        f"{team.team} SLA tier override",
                        t,
                        source="contracts@v1",
                        evidence=f"contract:{subject}/team",
                    ),
                    scope=team,
                )
            )
    # episodes: on each service an action failed on v1.x (long ago) and fixed on v2.x; both on v2.x sometimes
    releases: list[tuple[str, str, str]] = []
    for service in SERVICES:
        for action in rng.sample(ACTIONS, 2):
            old = day(rng.uniform(0, 10))
            events.append(
                Event(
                    old,
                    STEWARD,
                    ml.Episode(
                        service,
                        "prod",
                        f"{service} 5xx spike",
                        action,
                        "failed",
                        old,
                        version_from="v1.0",
                        version_to="v1.9",
                        evidence=f"https://incidents.example/{service}-{action[:6]}-old",
                        source="oncall@v3",
                    ),
                    scope=ORG,
                )
            )
            new = day(rng.uniform(150, 170))
            events.append(
                Event(
                    new,
                    STEWARD,
                    ml.Episode(
                        service,
                        "prod",
                        f"{service} 5xx spike",
                        action,
                        "fixed",
                        new,
                        version_from="v2.0",
                        evidence=f"https://incidents.example/{service}-{action[:6]}-new",
                        source="oncall@v3",
                    ),
                    scope=ORG,
                )
            )
            releases.append((service, action, "v2.3"))
    return events, releases


def slot_conflicts(items: Iterable[tuple[str, str, str]]) -> bool:
    """Two items on one (subject, attribute) with different values."""
    values: dict[tuple[str, str], set[str]] = defaultdict(set)
    for subject, attribute, value in items:
        values[(subject, attribute)].add(value)
    return any(len(v) > 1 for v in values.values())


def outcome_conflicts(items: Iterable[tuple[str, str, str]]) -> bool:
    """Two items on one (service, action) with different outcomes."""
    outcomes: dict[tuple[str, str], set[str]] = defaultdict(set)
    for service, action, outcome in items:
        outcomes[(service, action)].add(outcome)
    return any(len(v) > 1 for v in outcomes.values())


def run(ctx: Context) -> EvalResult:
    seed = ctx.seed(NAME)
    accounts = ctx.size("contradiction.accounts", 10, 80)
    events, releases = generate(seed, accounts)
    clock = SimClock(day(-1))
    store = ctx.open_store(NAME, clock)
    naive = ctx.naive()
    ingest(events, store, naive, clock)
    clock.set(day(200))

    asked = {"slot": 0, "episode": 0}
    conflicts = {"ours": {"slot": 0, "episode": 0}, "naive": {"slot": 0, "episode": 0}}
    total = accounts * len(READERS) + len(SERVICES) * len(READERS)
    n = 0
    for reader in READERS:
        for a in range(accounts):
            subject = f"account:{a:03d}"
            question = f"what SLA tier does {subject} have"
            hits = store.recall(question, by=reader, subject=subject, kinds=["fact"], k=8)
            ours = [
                (h.record.subject_name, str(getattr(h.record, "attribute", "")), str(getattr(h.record, "value", "")))
                for h in hits
            ]
            fact = store.get_fact(subject, "sla_tier", by=reader)
            if fact is not None:
                ours.append((subject, "sla_tier", str(fact.value)))
            theirs = [
                (h.item.entity, str(h.item.payload.get("attribute")), str(h.item.payload.get("value")))
                for h in naive.search(question, org="acme", entity=subject, kinds=["fact"], k=8)
            ]
            asked["slot"] += 1
            conflicts["ours"]["slot"] += slot_conflicts(ours)
            conflicts["naive"]["slot"] += slot_conflicts(theirs)
            n += 1
            ctx.tick(NAME, n, total)
        for service in SERVICES:
            version = "v2.3"
            eps = store.episodes(service=service, env="prod", by=reader, version=version, k=10)
            ours_e = [(e.service, e.action, e.outcome) for e in eps]
            hits = store.recall(
                f"{service} 5xx spike: what worked", by=reader, kinds=["episode"], filters={"service": service}, k=10
            )
            ours_e += [(h.record.service, h.record.action, h.record.outcome) for h in hits]
            theirs_e = [
                (str(h.item.payload["service"]), str(h.item.payload["action"]), str(h.item.payload["outcome"]))
                for h in naive.search(
                    f"{service} 5xx spike: what worked", org="acme", kinds=["episode"], where={"service": service}, k=10
                )
            ]
            asked["episode"] += 1
            conflicts["ours"]["episode"] += outcome_conflicts(ours_e)
            conflicts["naive"]["episode"] += outcome_conflicts(theirs_e)
            n += 1
            ctx.tick(NAME, n, total)
    metrics = [
        Metric(
            "questions whose served items disagree on one slot",
            rate(conflicts["ours"]["slot"], asked["slot"]),
            rate(conflicts["naive"]["slot"], asked["slot"]),
            (Gate("ours", "==", 0),),
            short="slot contradictions",
        ),
        Metric(
            "questions whose served episodes disagree on one service and action (release v2.3)",
            rate(conflicts["ours"]["episode"], asked["episode"]),
            rate(conflicts["naive"]["episode"], asked["episode"]),
            (Gate("ours", "==", 0),),
            short="service+action contradictions",
        ),
    ]
    details: dict[str, Any] = {
        "slot_questions": asked["slot"],
        "episode_questions": asked["episode"],
        "releases_asked": sorted({r[2] for r in releases}),
    }
    return EvalResult(NAME, f"generated accounts and incidents (seed {seed}, {accounts} accounts)", metrics, details)
