"""Scope isolation: no principal is ever served another scope's memory, whatever it asks (seed 003).

Two tenants, each an org with divisions, teams and actors. Memory lives at every
level: account discount ceilings at the org with overrides at some divisions and teams
(the most specific readable scope wins the slot), team runbook episodes, and each
actor's private call notes about customers. Random principals (members, agents and
curators at random places in the tree) ask random questions with random filters — a
subject, kinds, an attribute, a basis in the past, and filters on scope columns (which
the store must refuse, never widen). A cross-scope item is a served record the asker may
not read (neither its own scope nor an ancestor). Also scored: slot questions answered
from the most specific readable scope.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import memory_lakehouse as ml

from .core import Context, EvalResult, Event, Gate, Metric, SimClock, day, ingest, rate

NAME = "scope"
ORGS = ("globex", "initech")


def tree(org: str) -> list[ml.Scope]:
    out = [ml.Scope(org)]
    for d in ("sales", "support"):
        out.append(ml.Scope(org, d))
        for t in ("emea", "apac"):
            out.append(ml.Scope(org, d, t))
            for a in ("ana", "ben"):
                out.append(ml.Scope(org, d, t, a))
    return out


def generate(seed: int, accounts: int, customers: int) -> tuple[list[Event], list[ml.Principal]]:
    rng = random.Random(seed)
    events: list[Event] = []
    for org in ORGS:
        scopes = tree(org)
        shared = [s for s in scopes if s.actor is None]
        actors = [s for s in scopes if s.actor is not None]
        steward = ml.Principal(f"{org}-steward", ml.Scope(org), role="steward")
        for n in range(accounts):
            subject = f"account:{org}-{n}"
            at = day(n * 0.1)
            events.append(
                Event(
                    at,
                    steward,
                    ml.Fact(
                        subject,
                        "discount_ceiling",
                        f"{org} ceiling 10% for {subject}",
                        at,
                        source="pricing@v1",
                        evidence=f"wiki:{org}/pricing",
                    ),
                    scope=ml.Scope(org),
                    label=f"{subject}@{org}",
                )
            )
            for s in rng.sample(shared[1:], 3):  # overrides at some divisions and teams
                events.append(
                    Event(
                        at + timedelta(hours=1),
                        steward,
                        ml.Fact(
                            subject,
                            "discount_ceiling",
                            f"{s.path} ceiling {rng.randrange(11, 30)}% for {subject}",
                            at,
                            source="pricing@v1",
                            evidence=f"wiki:{s.path}/pricing",
                        ),
                        scope=s,
                        label=f"{subject}@{s.path}",
                    )
                )
        for s in shared[1:]:
            if s.team is not None:
                events.append(
                    Event(
                        day(1),
                        steward,
                        ml.Episode(
                            "crm",
                            "prod",
                            f"{s.path} team: quote tool froze on large orders",
                            "cleared the quote cache",
                            "fixed",
                            day(1),
                            evidence=f"https://tickets.example/{s.path}",
                            source="support-log@v2",
                        ),
                        scope=s,
                        label=f"episode@{s.path}",
                    )
                )
        for n in range(customers):
            owner = rng.choice(actors)
            subject = f"customer:{org}-{n}"
            events.append(
                Event(
                    day(2 + n * 0.05),
                    steward,
                    ml.Fact(
                        subject,
                        "call_notes",
                        f"{owner.actor} private call notes on {subject}: budget frozen until Q3",
                        day(2),
                        source="crm@v2",
                        evidence=f"crm:{subject}",
                    ),
                    scope=owner,
                    label=f"{subject}@{owner.path}",
                )
            )
    principals = []
    for org in ORGS:
        for s in tree(org):
            if s.actor is not None:
                principals += [
                    ml.Principal(f"{s.actor}-{s.team}", s, role="member"),
                    ml.Principal(f"bot-{s.team}", s, role="agent"),
                ]
            elif s.team is not None:
                principals.append(ml.Principal(f"lead-{s.team}", s, role="curator"))
    return events, principals


def most_specific(events: list[Event], subject: str, reader: ml.Principal) -> str | None:
    """The label of the slot's value at the most specific scope the reader may read."""
    best: tuple[int, str] | None = None
    for e in events:
        if e.record.subject_name == subject and getattr(e.record, "attribute", None) == "discount_ceiling":
            scope = e.scope or e.by.scope
            if reader.can_read(scope) and (best is None or scope.depth > best[0]):
                best = (scope.depth, e.label)
    return best[1] if best else None


def run(ctx: Context) -> EvalResult:
    seed = ctx.seed(NAME)
    accounts = ctx.size("scope.accounts", 3, 15)
    customers = ctx.size("scope.customers", 8, 40)
    questions = ctx.size("scope.questions", 30, 300)
    events, principals = generate(seed, accounts, customers)
    clock = SimClock(day(-1))
    store = ctx.open_store(NAME, clock)
    naive = ctx.naive()
    ids = ingest(events, store, naive, clock)
    clock.set(day(10))
    scope_of = {ids[e.label]: (e.scope or e.by.scope) for e in events}
    rng = random.Random(seed + 1)

    served = {"ours": 0, "naive": 0}
    cross = {"ours": 0, "naive": 0}
    refused = 0
    for n in range(questions):
        who = rng.choice(principals)
        org = who.scope.org
        kind = rng.choice(("account", "customer", "episode", "any"))
        subject = None
        kwargs: dict[str, Any] = {"k": rng.choice((5, 10, 20))}
        if kind == "account":
            subject = f"account:{org}-{rng.randrange(accounts)}"
            text = f"discount ceiling for {subject}"
            kwargs["filters"] = {"attribute": "discount_ceiling"} if rng.random() < 0.5 else None
            kwargs["kinds"] = ["fact"]
        elif kind == "customer":
            subject = f"customer:{org}-{rng.randrange(customers)}"
            text = f"call notes budget for {subject}"
        elif kind == "episode":
            text = "quote tool froze on large orders"
            kwargs["kinds"] = ["episode"]
        else:
            text = rng.choice(("private call notes budget frozen", "ceiling discount", "quote cache"))
        if subject is not None and rng.random() < 0.8:
            kwargs["subject"] = subject
        if rng.random() < 0.3:
            kwargs["as_of"] = day(rng.uniform(0, 10))
        if rng.random() < 0.15:  # a filter on a scope column: must be refused, never widen
            kwargs["filters"] = {rng.choice(("team", "actor", "division")): rng.choice(("apac", "ana", "sales"))}
        try:
            hits = store.recall(text, by=who, **{k: v for k, v in kwargs.items() if v is not None})
        except ml.ValidationError:
            refused += 1
            hits = []
        for h in hits:
            served["ours"] += 1
            cross["ours"] += not who.can_read(h.record.scope or scope_of[h.record_id])
        for nh in naive.search(text, org=org, entity=kwargs.get("subject"), k=kwargs["k"], kinds=kwargs.get("kinds")):
            served["naive"] += 1
            cross["naive"] += not who.can_read(ml.Scope.parse(nh.item.scope))
        ctx.tick(NAME, n + 1, questions + len(principals))

    right = {"ours": 0, "naive": 0}
    asked = 0
    for n, who in enumerate(principals):
        subject = f"account:{who.scope.org}-{rng.randrange(accounts)}"
        want = ids[label] if (label := most_specific(events, subject, who)) else None
        got = store.get_fact(subject, "discount_ceiling", by=who)
        top = naive.search(
            f"discount ceiling for {subject}",
            org=who.scope.org,
            entity=subject,
            where={"attribute": "discount_ceiling"},
            k=1,
        )
        asked += 1
        right["ours"] += (got.record_id if got else None) == want
        right["naive"] += (top[0].item.record_id if top else None) == want
        ctx.tick(NAME, questions + n + 1, questions + len(principals))

    metrics = [
        Metric(
            "cross-scope items served (share of served items the asker may not read)",
            rate(cross["ours"], served["ours"]),
            rate(cross["naive"], served["naive"]),
            (Gate("ours", "==", 0),),
            short="cross-scope items",
        ),
        Metric(
            "cross-scope items served (count)",
            float(cross["ours"]),
            float(cross["naive"]),
            (Gate("ours", "==", 0),),
            unit="count",
        ),
        Metric(
            "slot answered from the most specific readable scope",
            rate(right["ours"], asked),
            rate(right["naive"], asked),
            (Gate("ours", "==", 1),),
            unit="score",
            short="scope precedence",
        ),
    ]
    details = {
        "questions": questions,
        "principals": len(principals),
        "served_items": served,
        "scope_column_filters_refused": refused,
    }
    return EvalResult(NAME, f"generated org trees (seed {seed}, {questions} questions)", metrics, details)
