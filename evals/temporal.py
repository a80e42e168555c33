"""Temporal: replayed decisions must see only what was known then — and the 94%-vs-71% effect.

The dataset is generated ticket histories (seed 000): customers open tickets against a
product area; the summariser writes each ticket's resolution as an episode when the
ticket closes (hours to days later), and sometimes a fact about a change that happened
before a ticket but was learned after it. A triage agent decides each ticket's fix from
memory: the most relevant fixed episode of the customer on that product area, or the
runbook's first fix when memory has none.

The story runs once, in time order, as production: each decision is made at the
ticket's opening on the live store (the clock at that moment) and scored against the
fix that resolved the ticket. Then the same decisions are replayed offline twice:
with this store, ``as_of`` each ticket's opening, and with the naive memory, which
holds the same rows and no time axis. Reported: leakage (decisions that saw a row not
known, or not yet valid, at their time) and the three scores — naive offline, as-of
replay, production. The gates: 0 leakage here and more than 0 for naive on the same
decisions; the as-of replay agrees with production on every decision; naive offline
inflates the score.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import memory_lakehouse as ml

from .core import Context, EvalResult, Event, Gate, Metric, SimClock, day, hit_time, ingest, leaked, rate
from .naive import NaiveMemory

NAME = "temporal"

#: product area -> (ways a ticket describes its problem, the fixes that resolve it; the runbook's is first)
AREAS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "sso": (
        (
            "login loop after the SSO redirect",
            "SAML assertion rejected at sign-in",
            "users bounced back to the identity provider page",
        ),
        ("re-upload the IdP metadata XML", "downgrade the SSO plugin to v2.3", "rotate the SAML signing certificate"),
    ),
    "billing": (
        ("invoice shows the wrong seat count", "card declined on renewal", "charged twice this month"),
        ("re-sync seats from the admin console", "switch the account to invoice terms", "refund and re-run the charge"),
    ),
    "export": (
        ("CSV export times out", "exported report is missing columns", "scheduled export never arrives"),
        ("split the export by month", "reset the export column mapping", "re-verify the destination bucket"),
    ),
    "webhooks": (
        ("webhook deliveries fail with 401", "events arrive out of order", "webhook retries flood the endpoint"),
        ("rotate the webhook secret", "enable ordered delivery", "raise the endpoint rate limit"),
    ),
    "search": (
        ("search returns stale results", "search is slow on large workspaces", "search misses new documents"),
        ("rebuild the workspace search index", "enable the search cache tier", "re-run the crawler"),
    ),
    "mobile": (
        ("mobile app crashes on launch", "push notifications stopped", "mobile login fails on Android"),
        ("clear the app's offline cache", "re-register the push certificate", "update the Android app"),
    ),
}
ENV = "prod"
SUPPORT = ml.Scope("acme", "support")
SUMMARISER = ml.Principal("summariser", SUPPORT, role="curator")
AGENT = ml.Principal("triage-bot", ml.Scope("acme", "support", "tier2", "triage-bot"), role="agent")


@dataclass(frozen=True)
class Ticket:
    ticket_id: str
    customer: str
    area: str
    text: str
    opened_at: datetime
    closed_at: datetime
    fix: str


def generate(seed: int, customers: int, tickets_per_customer: int) -> tuple[list[Ticket], list[Event]]:
    """Ticket histories and the memory writes they cause (resolutions, late-learned changes, preferences)."""
    rng = random.Random(seed)
    tickets: list[Ticket] = []
    events: list[Event] = []
    n = 0
    for c in range(customers):
        customer = f"customer:c{c:03d}"
        areas = rng.sample(sorted(AREAS), 2)  # a customer's tickets cluster on a few product areas
        habit = {a: rng.choice(AREAS[a][1]) for a in areas}  # what usually fixes it for this customer
        events.append(
            Event(
                day(rng.uniform(0, 2)),
                SUMMARISER,
                ml.Preference(
                    customer,
                    "response_style",
                    rng.choice(["prefers CLI commands", "prefers UI steps"]),
                    day(0),
                    source="summariser@v3",
                    evidence=f"session:{customer}-intro",
                ),
                label=f"{customer}-pref",
            )
        )
        at = day(rng.uniform(2, 10))
        for _ in range(tickets_per_customer):
            n += 1
            area = rng.choice(areas)
            fixes = AREAS[area][1]
            fix = habit[area] if rng.random() < 0.9 else rng.choice([f for f in fixes if f != habit[area]])
            text = f"{rng.choice(AREAS[area][0])} (error {rng.choice('ABCDEFGH')}-{rng.randrange(1000, 9999)})"
            opened = at.replace(second=0, microsecond=0) + timedelta(minutes=rng.randrange(1, 59))
            closed = opened + timedelta(hours=rng.uniform(2, 72))
            ticket = Ticket(f"T-{n:05d}", customer, area, text, opened, closed, fix)
            tickets.append(ticket)
            events.append(
                Event(
                    closed,
                    SUMMARISER,
                    ml.Episode(
                        area,
                        ENV,
                        f"{ticket.ticket_id}: {text}",
                        fix,
                        "fixed",
                        closed,
                        subject=customer,
                        evidence=f"https://tickets.example/{ticket.ticket_id}",
                        source="summariser@v3",
                    ),
                    label=f"{ticket.ticket_id}-resolution",
                )
            )
            if rng.random() < 0.3:  # happened just before the ticket, learned an hour after it
                events.append(
                    Event(
                        opened + timedelta(hours=1),
                        SUMMARISER,
                        ml.Fact(
                            customer,
                            f"recent_change_{area}",
                            f"changed the {area} configuration before {ticket.ticket_id}",
                            opened - timedelta(minutes=30),
                            source="summariser@v3",
                            evidence=f"https://tickets.example/{ticket.ticket_id}#timeline",
                        ),
                        label=f"{ticket.ticket_id}-late",
                    )
                )
            at = opened + timedelta(days=rng.uniform(1, 12))
    return tickets, events


# ---------------------------------------------------------------- the agent, on either memory


@dataclass(frozen=True)
class Served:
    """What one decision did: the fix it proposed and the (known_since, valid_from) of what it read."""

    fix: str
    times: tuple[tuple[datetime | None, datetime | None], ...]
    record_ids: tuple[str, ...]


def decide_with_store(store: Any, ticket: Ticket, *, as_of: datetime | None) -> Served:
    """The production agent: recall the customer's fixed episodes on the area, and its facts."""
    episodes = store.recall(
        ticket.text,
        by=AGENT,
        subject=ticket.customer,
        kinds=["episode"],
        filters={"service": ticket.area},
        k=5,
        as_of=as_of,
    )
    context = store.recall(
        ticket.text, by=AGENT, subject=ticket.customer, kinds=["fact", "preference"], k=5, as_of=as_of
    )
    fixed = [h for h in episodes if getattr(h.record, "outcome", None) == "fixed"]
    fix = fixed[0].record.action if fixed else AREAS[ticket.area][1][0]
    hits = list(episodes) + list(context)
    return Served(fix, tuple(hit_time(h) for h in hits), tuple(h.record_id for h in hits))


def decide_with_naive(naive: NaiveMemory, ticket: Ticket) -> Served:
    """The same agent on the naive memory: the same questions, a time-blind top-k."""
    episodes = naive.search(
        ticket.text, org="acme", entity=ticket.customer, kinds=["episode"], where={"service": ticket.area}, k=5
    )
    context = naive.search(ticket.text, org="acme", entity=ticket.customer, kinds=["fact", "preference"], k=5)
    fixed = [h for h in episodes if h.item.payload.get("outcome") == "fixed"]
    fix = str(fixed[0].item.payload["action"]) if fixed else AREAS[ticket.area][1][0]
    hits = list(episodes) + list(context)
    return Served(
        fix, tuple((h.item.ingested_at, h.item.event_time) for h in hits), tuple(h.item.record_id for h in hits)
    )


def run_production(
    store: Any, naive: NaiveMemory, clock: SimClock, tickets: Sequence[Ticket], events: Sequence[Event], ctx: Context
) -> dict[str, Served]:
    """Run the story in time order: writes as they happen, each decision on the live store at its time."""
    pending = sorted(events, key=lambda e: e.at)
    served: dict[str, Served] = {}
    i = 0
    for n, ticket in enumerate(sorted(tickets, key=lambda t: t.opened_at)):
        due = []
        while i < len(pending) and pending[i].at <= ticket.opened_at:
            due.append(pending[i])
            i += 1
        ingest(due, store, naive, clock)
        clock.set(ticket.opened_at)
        served[ticket.ticket_id] = decide_with_store(store, ticket, as_of=None)
        ctx.tick(NAME, n + 1, len(tickets) * 2)
    ingest(pending[i:], store, naive, clock)
    return served


def run(ctx: Context) -> EvalResult:
    seed = ctx.seed(NAME)
    customers = ctx.size("temporal.customers", 5, 40)
    per = ctx.size("temporal.tickets", 5, 7)
    tickets, events = generate(seed, customers, per)
    data = f"generated tickets (seed {seed}, {len(tickets)} tickets)"
    clock = SimClock(day(-1))
    store = ctx.open_store(NAME, clock)
    naive = ctx.naive()
    production = run_production(store, naive, clock, tickets, events, ctx)
    clock.set(max(e.at for e in events) + timedelta(days=1))  # the eval runs later, with every row written

    replayed: dict[str, Served] = {}
    baseline: dict[str, Served] = {}
    for n, t in enumerate(tickets):
        replayed[t.ticket_id] = decide_with_store(store, t, as_of=t.opened_at)
        baseline[t.ticket_id] = decide_with_naive(naive, t)
        ctx.tick(NAME, len(tickets) + n + 1, len(tickets) * 2)
    bulk = store.replay([(t.ticket_id, AGENT, t.text, t.customer, t.opened_at) for t in tickets])

    total = len(tickets)
    score = {
        name: rate(sum(1 for t in tickets if runs[t.ticket_id].fix == t.fix), total)
        for name, runs in (("production", production), ("replay", replayed), ("naive", baseline))
    }
    leaks = {
        name: sum(1 for t in tickets if leaked(runs[t.ticket_id].times, t.opened_at))
        for name, runs in (("replay", replayed), ("naive", baseline), ("production", production))
    }
    agree = sum(
        1
        for t in tickets
        if replayed[t.ticket_id].fix == production[t.ticket_id].fix
        and set(replayed[t.ticket_id].record_ids) == set(production[t.ticket_id].record_ids)
    )
    own_answer = sum(
        1
        for t in tickets
        if any(
            i.label == f"{t.ticket_id}-resolution"
            for i in naive.items
            if i.record_id in baseline[t.ticket_id].record_ids
        )
    )
    metrics = [
        Metric(
            "leakage rate (replayed decisions that saw a row not known or not valid then)",
            rate(leaks["replay"], total),
            rate(leaks["naive"], total),
            (Gate("ours", "==", 0), Gate("naive", ">", 0)),
            short="leakage rate",
        ),
        Metric(
            "bulk replay leakage (store.replay over the same decisions)",
            bulk.leakage_rate,
            gates=(Gate("ours", "==", 0),),
        ),
        Metric("decisions that read their own ticket's resolution (the answer key)", None, rate(own_answer, total)),
        Metric(
            "offline score: as-of replay (ours) vs naive memory",
            score["replay"],
            score["naive"],
            unit="score",
            short="offline score",
        ),
        Metric(
            "production score (live store at each decision's time)",
            score["production"],
            unit="score",
            note="what production saw",
        ),
        Metric(
            "offline score minus production score",
            score["replay"] - score["production"],
            score["naive"] - score["production"],
            (Gate("ours", "==", 0), Gate("naive", ">", 0)),
            unit="score",
            short="offline minus production",
        ),
        Metric(
            "replayed decisions identical to production (fix and rows read)",
            rate(agree, total),
            gates=(Gate("ours", "==", 1),),
        ),
    ]
    details = {
        "decisions": total,
        "customers": customers,
        "memory_writes": len(events),
        "scores": {k: round(v, 4) for k, v in score.items()},
        "leaked_decisions": leaks,
        "effect": f"naive offline {score['naive']:.1%}, as-of replay "
        f"{score['replay']:.1%}, production {score['production']:.1%}",
    }
    return EvalResult(NAME, data, metrics, details)
