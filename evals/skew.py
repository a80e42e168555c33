"""Skew: a backfill written by another definition must not flatter the replay (seed 000).

Generated customers hold support sessions; each session mentions a few facts about the
customer's setup. In production the live summariser (``summariser@v3``, the last 20
turns) writes what it caught — about half of a session's facts — when the session ends.
Sessions before the launch had no memory; when the eval set was built, a backfill script
(``backfill@v1``: another prompt, the whole transcript) wrote complete summaries of those
old sessions, labelled the same kind of memory. Decisions after the launch ask about one
setup fact; a decision is right when a served item states it.

Reported per source version: the share of what each replay serves from each definition
(``backfill@v1`` is a definition production never ran), and the score with and without
it — this store as of each decision, the naive memory with every row, the naive memory
without the backfill rows, and what production saw.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import memory_lakehouse as ml

from .core import Context, EvalResult, Event, Gate, Metric, SimClock, day, ingest, rate

NAME = "skew"
SCOPE = ml.Scope("acme", "support")
LIVE = ml.Principal("summariser", SCOPE, role="curator")
BACKFILL = ml.Principal("backfill-script", SCOPE, role="curator")
AGENT = ml.Principal("triage-bot", ml.Scope("acme", "support", "tier2", "triage-bot"), role="agent")
LIVE_SOURCE, BACKFILL_SOURCE = "summariser@v3", "backfill@v1"
FACTS = {
    "sso_plugin": ("runs the SSO plugin {v}", ("v2.2", "v2.3", "v2.4")),
    "region": ("is hosted in the {v} region", ("eu-west", "us-east", "ap-south")),
    "database": ("stores data on {v}", ("postgres 14", "postgres 16", "mysql 8")),
    "billing": ("pays by {v}", ("card", "invoice", "bank transfer")),
}
LAUNCH = day(60)


@dataclass(frozen=True)
class Decision:
    decision_id: str
    customer: str
    attribute: str
    value: str
    decided_at: datetime


def generate(seed: int, customers: int) -> tuple[list[Event], list[Decision], datetime]:
    rng = random.Random(seed)
    events: list[Event] = []
    decisions: list[Decision] = []
    backfill_at = day(200)
    for c in range(customers):
        customer = f"customer:s{c:03d}"
        setup = {a: rng.choice(vals) for a, (_, vals) in FACTS.items()}
        for s in range(rng.randint(3, 6)):
            at = day(rng.uniform(0, 120))
            said = rng.sample(sorted(FACTS), 2)
            if at < LAUNCH:  # no memory in production; the backfill writes the whole session later
                caught, by, source, written = said, BACKFILL, BACKFILL_SOURCE, backfill_at
            else:  # the live summariser catches about half of what was said
                caught = [a for a in said if rng.random() < 0.5]
                by, source, written = LIVE, LIVE_SOURCE, at + timedelta(minutes=rng.randrange(5, 90))
            if caught:
                text = "; ".join(f"{customer} " + FACTS[a][0].format(v=setup[a]) for a in caught)
                events.append(
                    Event(
                        written,
                        by,
                        ml.Fact(
                            customer,
                            f"session_summary_{s}",
                            text,
                            at,
                            source=source,
                            evidence=f"session:{customer}/{s}",
                        ),
                    )
                )
        for d in range(2):
            attribute = rng.choice(sorted(FACTS))
            decisions.append(
                Decision(f"{customer}-d{d}", customer, attribute, setup[attribute], day(rng.uniform(70, 190)))
            )
    return events, decisions, backfill_at


def _right(texts: list[str], d: Decision) -> bool:
    want = FACTS[d.attribute][0].format(v=d.value)
    return any(want in t for t in texts)


def run(ctx: Context) -> EvalResult:
    seed = ctx.seed(NAME)
    customers = ctx.size("skew.customers", 10, 80)
    events, decisions, backfill_at = generate(seed, customers)
    clock = SimClock(day(-1))
    store = ctx.open_store(NAME, clock)
    naive = ctx.naive()
    # production: live writes as sessions end, each decision on the live store at its time
    live = sorted((e for e in events if e.by is LIVE), key=lambda e: e.at)
    production_right = 0
    i = 0
    for n, d in enumerate(sorted(decisions, key=lambda d: d.decided_at)):
        due = []
        while i < len(live) and live[i].at <= d.decided_at:
            due.append(live[i])
            i += 1
        ingest(due, store, naive, clock)
        clock.set(d.decided_at)
        hits = store.recall(
            f"{d.customer} {d.attribute.replace('_', ' ')}", by=AGENT, subject=d.customer, kinds=["fact"], k=5
        )
        production_right += _right([str(getattr(h.record, "value", "")) for h in hits], d)
        ctx.tick(NAME, n + 1, len(decisions) * 2)
    ingest(live[i:], store, naive, clock)
    ingest([e for e in events if e.by is BACKFILL], store, naive, clock)  # the eval set is built later
    clock.set(backfill_at + timedelta(days=1))

    sources: dict[str, Counter[str]] = {"ours": Counter(), "naive": Counter()}
    right = {"ours": 0, "naive": 0, "naive_without_backfill": 0}
    for n, d in enumerate(decisions):
        question = f"{d.customer} {d.attribute.replace('_', ' ')}"
        hits = store.recall(question, by=AGENT, subject=d.customer, kinds=["fact"], k=5, as_of=d.decided_at)
        sources["ours"].update(h.record.source for h in hits)
        right["ours"] += _right([str(getattr(h.record, "value", "")) for h in hits], d)
        nh = naive.search(question, org="acme", entity=d.customer, kinds=["fact"], k=5)
        sources["naive"].update(h.item.source for h in nh)
        right["naive"] += _right([str(h.item.payload.get("value")) for h in nh], d)
        nh_live = [
            h
            for h in naive.search(question, org="acme", entity=d.customer, kinds=["fact"], k=50)
            if h.item.source != BACKFILL_SOURCE
        ][:5]
        right["naive_without_backfill"] += _right([str(h.item.payload.get("value")) for h in nh_live], d)
        ctx.tick(NAME, len(decisions) + n + 1, len(decisions) * 2)

    total = len(decisions)
    served = {side: sum(c.values()) for side, c in sources.items()}
    share = {side: rate(c[BACKFILL_SOURCE], served[side]) for side, c in sources.items()}
    metrics = [
        Metric(
            f"share of replay-served items from {BACKFILL_SOURCE} (a definition production never ran)",
            share["ours"],
            share["naive"],
            (Gate("ours", "==", 0), Gate("naive", ">", 0)),
            short=f"served from {BACKFILL_SOURCE}",
        ),
        Metric(
            f"share of replay-served items from {LIVE_SOURCE} (the production definition)",
            rate(sources["ours"][LIVE_SOURCE], served["ours"]),
            rate(sources["naive"][LIVE_SOURCE], served["naive"]),
            short=f"served from {LIVE_SOURCE}",
        ),
        Metric(
            "replay score with every source (ours: as of each decision)",
            rate(right["ours"], total),
            rate(right["naive"], total),
            unit="score",
            short="score, every source",
        ),
        Metric(
            f"replay score without {BACKFILL_SOURCE} rows",
            rate(right["ours"], total),
            rate(right["naive_without_backfill"], total),
            unit="score",
            short=f"score without {BACKFILL_SOURCE}",
        ),
        Metric("production score", rate(production_right, total), unit="score"),
        Metric(
            "replay score minus production score",
            rate(right["ours"], total) - rate(production_right, total),
            rate(right["naive"], total) - rate(production_right, total),
            (Gate("ours", "==", 0),),
            unit="score",
            short="replay minus production",
        ),
    ]
    details: dict[str, Any] = {
        "decisions": total,
        "served_by_source": {k: dict(v) for k, v in sources.items()},
        "backfill_rows": sum(1 for e in events if e.by is BACKFILL),
        "live_rows": sum(1 for e in events if e.by is LIVE),
    }
    return EvalResult(
        NAME, f"generated sessions (seed {seed}, {customers} customers, {total} decisions)", metrics, details
    )
